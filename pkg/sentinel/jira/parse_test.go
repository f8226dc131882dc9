package jira

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
)

func TestParseSearch_Fixture(t *testing.T) {
	data, err := os.ReadFile("testdata/search_single.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseSearch(data)
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsLast || len(p.Issues) != 1 {
		t.Fatalf("page = %+v", p)
	}
	is := p.Issues[0]
	if is.Key != "QP-123" || is.Status != "To Do" || is.Summary != "Login page shows a blank screen" || is.Bad != "" {
		t.Errorf("issue = %+v", is)
	}
	// 09:55:12.345 +09:00 is 00:55:12.345 UTC.
	if got, want := EventID(is.Key, is.Updated), "evt-jira-QP-123-20261121005512345"; got != want {
		t.Errorf("EventID = %s, want %s", got, want)
	}
}

func TestParseSearch_Pagination(t *testing.T) {
	for name, want := range map[string]struct {
		last  bool
		token string
	}{
		"search_page1.json": {false, "CAEaAggD"},
		"search_page2.json": {false, "CAEaAggG"},
		"search_page3.json": {true, ""}, // no isLast, no token: last
		"search_empty.json": {true, ""},
	} {
		data, _ := os.ReadFile("testdata/" + name)
		p, err := ParseSearch(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.IsLast != want.last || p.NextPageToken != want.token {
			t.Errorf("%s: last %v token %q, want %v %q", name, p.IsLast, p.NextPageToken, want.last, want.token)
		}
	}
}

func TestParseSearch_BadInput(t *testing.T) {
	for _, in := range []string{"<html><body>Oops</body></html>", "", "{", "[]", `{"errorMessages":["x"]}`, "null"} {
		if _, err := ParseSearch([]byte(in)); err == nil {
			t.Errorf("ParseSearch(%q) succeeded", in)
		}
	}
	data, _ := os.ReadFile("testdata/bad_key.json")
	p, err := ParseSearch(data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Issues[0].Bad == "" || !strings.Contains(p.Issues[0].Bad, "unsafe issue key") {
		t.Errorf("crafted key not flagged: %+v", p.Issues[0])
	}
	if p.Issues[1].Bad != "" {
		t.Errorf("good issue flagged: %+v", p.Issues[1])
	}
}

func TestWindowMinutes(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 5, 30, 0, time.UTC)
	cases := []struct {
		last string
		want int
	}{
		{"", 10},                    // first run
		{"garbage", 10},             // unreadable: like a first run
		{"2026/11/21 10:05", 2},     // 30 s ago: 1 + 1
		{"2026/11/21 10:00", 7},     // 5.5 min: 6 + 1
		{"2026/11/21 09:05", 62},    // an hour
		{"2026/11/22 10:00", 1},     // clock went back: just the overlap
		{"2025/01/01 00:00", 43200}, // capped at 30 days
	}
	for _, c := range cases {
		if got := WindowMinutes(c.last, now); got != c.want {
			t.Errorf("WindowMinutes(%q) = %d, want %d", c.last, got, c.want)
		}
	}
}

func TestJQL(t *testing.T) {
	if got, want := JQL("assignee = currentUser() OR reporter = currentUser()", 10),
		`(assignee = currentUser() OR reporter = currentUser()) AND updated >= "-10m" ORDER BY updated DESC`; got != want {
		t.Errorf("JQL = %s\nwant  %s", got, want)
	}
	if got, want := JQL("  ", 3), `updated >= "-3m" ORDER BY updated DESC`; got != want {
		t.Errorf("JQL = %s, want %s", got, want)
	}
}

func FuzzParseJiraSearch(f *testing.F) {
	for _, name := range []string{"search_single.json", "search_page1.json", "search_page2.json", "search_page3.json", "search_empty.json", "unauthorized.json", "bad_key.json"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"issues":[{"key":"A-1","fields":{"updated":"2026-01-01T00:00:00Z","status":null}}],"nextPageToken":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseSearch(data)
		if err != nil {
			return
		}
		for _, is := range p.Issues {
			if is.Bad != "" {
				continue
			}
			if id := EventID(is.Key, is.Updated); !ids.Valid(id) {
				t.Fatalf("invalid id %q from key %q", id, is.Key)
			}
		}
	})
}
