package githubfake

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func postReview(ctx context.Context, f *Fake, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.URL()+"/repos/acme/app/pulls/7/reviews", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	return http.DefaultClient.Do(req)
}

// A held write is dropped unanswered: HoldDrop never records it,
// HoldLanded records it first; the next write of the kind is served.
func TestHoldNext_DropAndLanded(t *testing.T) {
	f := New("tok")
	defer f.Close()
	f.AddRepo("acme/app", "main")
	f.AddPull("acme/app", Pull{Number: 7, Head: "feature", Base: "main"})
	for _, c := range []struct {
		mode HoldMode
		want int
	}{{HoldDrop, 0}, {HoldLanded, 1}} {
		before := len(f.Reviews("acme/app", 7))
		h := f.HoldNext(HoldReview, c.mode)
		errc := make(chan error, 1)
		go func() {
			resp, err := postReview(context.Background(), f, `{"event":"COMMENT","body":"held"}`)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-h.Arrived
		if got := len(f.Reviews("acme/app", 7)) - before; got != c.want {
			t.Fatalf("mode %d: %d reviews recorded while held, want %d", c.mode, got, c.want)
		}
		h.Release()
		if err := <-errc; err == nil {
			t.Fatalf("mode %d: the held write was answered", c.mode)
		}
		if got := len(f.Reviews("acme/app", 7)) - before; got != c.want {
			t.Fatalf("mode %d: %d reviews after the drop, want %d", c.mode, got, c.want)
		}
	}
	resp, err := postReview(context.Background(), f, `{"event":"COMMENT","body":"served"}`)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("the write after the holds: %v %v", resp, err)
	}
	resp.Body.Close()
	if rs := f.Reviews("acme/app", 7); len(rs) != 2 || rs[1].Auth != "Bearer tok" {
		t.Fatalf("reviews %+v", rs)
	}
}

// The writer going away ends the hold (a killed general).
func TestHoldNext_WriterGone(t *testing.T) {
	f := New("tok")
	defer f.Close()
	f.AddPull("acme/app", Pull{Number: 7})
	h := f.HoldNext(HoldReview, HoldDrop)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if resp, err := postReview(ctx, f, `{"event":"COMMENT","body":"x"}`); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	<-h.Arrived
	cancel()
	<-done
	if n := len(f.Reviews("acme/app", 7)); n != 0 {
		t.Fatalf("%d reviews", n)
	}
}

func TestNotifications_ListAndMarkRead(t *testing.T) {
	f := New("tok")
	defer f.Close()
	f.AddNotification("11", "acme/app", 7, "review_requested")
	get := func() string {
		req, _ := http.NewRequest(http.MethodGet, f.URL()+"/notifications", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return b.String()
	}
	if s := get(); !strings.Contains(s, `"review_requested"`) || !strings.Contains(s, "/repos/acme/app/pulls/7") {
		t.Fatalf("notifications %s", s)
	}
	req, _ := http.NewRequest(http.MethodPatch, f.URL()+"/notifications/threads/11", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusResetContent {
		t.Fatalf("mark read: %v %v", resp, err)
	}
	if s := strings.TrimSpace(get()); s != "[]" || len(f.MarkedRead()) != 1 {
		t.Fatalf("after mark read: %s %v", s, f.MarkedRead())
	}
}
