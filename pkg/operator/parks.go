package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// UnparkUsage is `start unpark`'s argument line.
const UnparkUsage = "<general> | item <key>"

// UnparkRequest is the control request of `start unpark <args>` (SPEC
// §12.4): "gen-pr" (or "general gen-pr") lifts a general's park, "item
// gh:acme:web:12" (or "item acme/web#12", a Jira key, a Slack thread's
// key) a source item's; a park's record key ("general:gen-pr") is taken
// as is.
func UnparkRequest(args []string) (control.Request, error) {
	var target string
	switch {
	case len(args) == 1 && args[0] != parks.General && args[0] != parks.Item:
		target = args[0]
	case len(args) == 2 && args[0] == parks.General:
		target = parks.Key(parks.General, args[1])
	case len(args) == 2 && args[0] == parks.Item:
		// The item's own key, even one that reads as a general's name.
		key, err := parks.Target(args[1])
		if err != nil {
			return control.Request{}, err
		}
		if !strings.HasPrefix(key, parks.Item+":") {
			key = parks.Key(parks.Item, args[1])
		}
		target = key
	default:
		return control.Request{}, errors.New("usage: start unpark " + UnparkUsage)
	}
	req := control.Request{Action: control.ActionUnpark, Target: target}
	if err := req.Validate(); err != nil {
		return control.Request{}, err
	}
	return req, nil
}

// UnparkCommand is the command that lifts p.
func UnparkCommand(p parks.Park) string {
	if p.Kind == parks.Item {
		return "start unpark item " + p.Name
	}
	return "start unpark " + p.Name
}

// Parks is the breaker's parks as the status shows them.
type Parks struct {
	List []parks.Park
	Err  error // the store could not be read: the parks are unknown
}

func readParks(ctx context.Context, s kv.KV) *Parks {
	ps, err := parks.List(ctx, s)
	return &Parks{List: ps, Err: err}
}

// problems raises a warning per park: a park holds work back but is the
// breaker doing its job, never a fault of the kingdom.
func (ps *Parks) problems(raise func(int, Problem)) {
	if ps == nil {
		return
	}
	for _, p := range ps.List {
		raise(StatusDegraded, Problem{Check: "park", Reason: fmt.Sprintf("%s %s parked since %s: %s (`%s` lifts it)",
			p.Kind, p.Name, doc.FormatTime(p.Since), p.Reason, UnparkCommand(p))})
	}
}

// print writes each park with its evidence.
func (ps *Parks) print(w io.Writer, now time.Time) {
	if ps == nil {
		return
	}
	if ps.Err != nil {
		fmt.Fprintf(w, "parks: unknown (%v)\n", ps.Err)
		return
	}
	if len(ps.List) == 0 {
		fmt.Fprintln(w, "parks: none")
		return
	}
	fmt.Fprintln(w, "Parked (the breaker, SPEC §12.4):")
	for _, p := range ps.List {
		fmt.Fprintf(w, "  %s %s since %s: %s\n", p.Kind, p.Name, clockTime(p.Since, now), p.Reason)
		fmt.Fprintf(w, "    %s; lift now: %s\n", parkNext(p, now), UnparkCommand(p))
		ev := fmt.Sprintf("%d", p.Evidence.Count)
		if p.Evidence.Fingerprint != "" {
			ev += " × " + p.Evidence.Fingerprint
		}
		fmt.Fprintf(w, "    evidence: %s\n", ev)
		for _, a := range p.Evidence.Last {
			fmt.Fprintf(w, "      %s\n", attemptLine(a, now))
		}
	}
}

// parkNext says what lifts the park by itself.
func parkNext(p parks.Park, now time.Time) string {
	switch {
	case p.Kind == parks.Item:
		return "its window lets an attempt in again at " + clockTime(p.Until, now)
	case p.Canary != "":
		return "its canary " + p.Canary + " runs; success lifts the park"
	}
	s := "one canary task runs after " + clockTime(p.Until, now)
	if p.CanariesFailed > 0 {
		s += fmt.Sprintf(" (%d canaries failed)", p.CanariesFailed)
	}
	return s
}

// attemptLine is one attempt behind a park.
func attemptLine(a parks.Attempt, now time.Time) string {
	s := fmt.Sprintf("%s attempt %d at %s", a.TaskID, a.Attempt, clockTime(a.At, now))
	if st := strings.TrimSpace(a.Status + " " + a.ErrorReason); st != "" {
		s += ": " + st
	}
	if a.Error != "" {
		s += " — " + redact.Clip(a.Error, 160)
	}
	return s
}

// ParkDoc is one park in `start status --json`.
type ParkDoc struct {
	Kind  string `json:"kind"` // general | item
	Name  string `json:"name"`
	Key   string `json:"key"` // the record's key, what `start unpark` takes
	Since string `json:"since"`
	// Until is a general's canary time, an item's window end.
	Until          string          `json:"until"`
	Reason         string          `json:"reason"`
	Count          int             `json:"count"`
	Fingerprint    string          `json:"fingerprint,omitempty"`
	Last           []parks.Attempt `json:"last"`
	Canary         string          `json:"canary_task_id,omitempty"`
	CanariesFailed int             `json:"canaries_failed"`
	Unpark         string          `json:"unpark"` // the command that lifts it
}

func (ps *Parks) docs() ([]ParkDoc, error) {
	out := []ParkDoc{}
	if ps == nil {
		return out, nil
	}
	for _, p := range ps.List {
		last := p.Evidence.Last
		if last == nil {
			last = []parks.Attempt{}
		}
		out = append(out, ParkDoc{Kind: p.Kind, Name: p.Name, Key: parks.Key(p.Kind, p.Name),
			Since: doc.FormatTime(p.Since), Until: doc.FormatTime(p.Until), Reason: p.Reason,
			Count: p.Evidence.Count, Fingerprint: p.Evidence.Fingerprint, Last: last,
			Canary: p.Canary, CanariesFailed: p.CanariesFailed, Unpark: UnparkCommand(p)})
	}
	return out, ps.Err
}
