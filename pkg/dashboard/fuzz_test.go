package dashboard

import (
	"context"
	"testing"
)

// Last-Event-ID comes from the client: any text is either refused or
// judged by the store (here the files store), never a panic.
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{`{"inode":1,"offset":0}`, "123-456", "", "-", "abc", "12", `{"inode":-1}`, " 5-6 ", "\r\n"} {
		f.Add(s)
	}
	st := withStore(f, Options{Layout: newBase(f)}).Store
	f.Fuzz(func(t *testing.T, s string) {
		c, err := checkCursor(s)
		if err != nil {
			return
		}
		_, _ = st.Events(context.Background(), c, 1)
	})
}
