package operator

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
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

// ControlWait is how long a control command waits for the king's answer.
const ControlWait = 15 * time.Second

// Control asks the leading king (on any host) to act (SPEC §10.11: pause,
// resume, cancel a task or an event): the request goes to the shared store
// in the operator's name, and the king's reply comes back within wait.
func Control(ctx context.Context, l layout.Layout, req control.Request, wait time.Duration) (*control.Reply, error) {
	sh, err := OpenShared(ctx, l)
	if err != nil {
		return nil, err
	}
	defer sh.Close()
	req.By = Operator()
	id, err := control.Submit(ctx, sh.KV, req, time.Now())
	if err != nil {
		return nil, err
	}
	return control.WaitReply(ctx, sh.KV, id, wait)
}
