package start

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// countDiscarded counts event.discarded lines in logs/events.log (the
// current day's log: the chamberlain splits it daily).
func countDiscarded(l layout.Layout) int {
	f, err := os.Open(l.EventsLog())
	if err != nil {
		return 0
	}
	defer f.Close()
	needle := []byte(`"type":"event.discarded"`)
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), needle) {
			n++
		}
	}
	return n
}

// printOperator prints the pause state and the discarded events.
func (s *Status) printOperator(w io.Writer) {
	if s.Paused != nil {
		fmt.Fprintf(w, "PAUSED since %s by %s: no new task starts (`start resume` lifts it)\n", s.Paused.Since, s.Paused.By)
	}
	fmt.Fprintf(w, "events discarded (no general takes them) since the log's last daily split: %d\n", s.Discarded)
}
