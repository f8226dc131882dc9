package dashboard

import "testing"

// Last-Event-ID comes from the client: any text must either parse to a
// position that prints back the same way, or be refused; never panic.
func FuzzParsePos(f *testing.F) {
	for _, s := range []string{"123-456", "1-0", "", "-", "0-1", "18446744073709551615-9223372036854775807", " 5-6 ", "5--6", "a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePos(s)
		if err != nil {
			return
		}
		if p.Inode == 0 || p.Offset < 0 {
			t.Fatalf("ParsePos(%q) accepted %+v", s, p)
		}
		q, err := ParsePos(p.String())
		if err != nil || q != p {
			t.Fatalf("round trip of %q: %+v → %q → %+v, %v", s, p, p.String(), q, err)
		}
	})
}
