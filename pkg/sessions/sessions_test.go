package sessions_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
)

func TestRegistry_ConcurrentAddsLoseNothing(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	r := sessions.New(l)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := r.Add(sessions.Entry{ID: fmt.Sprintf("soldier-%d", i), TaskID: "t", General: "gen-pr", StartedAt: time.Now()}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	es, err := r.List()
	if err != nil || len(es) != 50 {
		t.Fatalf("List = %d entries, %v; want 50", len(es), err)
	}
	r.Remove("soldier-3")
	r.Remove("missing")
	es, _ = r.List()
	if len(es) != 49 {
		t.Fatalf("after remove %d entries", len(es))
	}
	if err := r.Replace(nil); err != nil {
		t.Fatal(err)
	}
	es, _ = r.List()
	if len(es) != 0 {
		t.Fatalf("after replace %d entries", len(es))
	}
}
