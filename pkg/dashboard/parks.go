package dashboard

import (
	"context"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/operator"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// ParkInfo is one of the breaker's parks (SPEC §12.4, pkg/parks) with its
// evidence.
type ParkInfo struct {
	Kind  string `json:"kind"` // general | item
	Name  string `json:"name"`
	Key   string `json:"key"` // what `start unpark` takes
	Since string `json:"since"`
	// Until is a general's canary time, an item's window end.
	Until string `json:"until"`
	// Reason is one sentence with the figures.
	Reason      string `json:"reason"`
	Count       int    `json:"count"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// Last are the attempts or failures behind it.
	Last           []ParkAttempt `json:"last"`
	Canary         string        `json:"canary_task_id,omitempty"`
	CanariesFailed int           `json:"canaries_failed"`
	Unpark         string        `json:"unpark"` // the command that lifts it now
}

// ParkAttempt is one attempt behind a park.
type ParkAttempt struct {
	TaskID      string `json:"task_id"`
	Attempt     int    `json:"attempt"`
	At          string `json:"at"`
	Status      string `json:"status,omitempty"`
	ErrorReason string `json:"error_reason,omitempty"`
	Error       string `json:"error,omitempty"`
}

// readParks reads the parks; an unreadable record set is an error of the
// state, not an empty list.
func readParks(ctx context.Context, k kv.KV) ([]ParkInfo, error) {
	ps, err := parks.List(ctx, k)
	out := make([]ParkInfo, 0, len(ps))
	for _, p := range ps {
		pi := ParkInfo{Kind: p.Kind, Name: clip(p.Name, 200), Key: clip(parks.Key(p.Kind, p.Name), 210),
			Since: doc.FormatTime(p.Since), Until: doc.FormatTime(p.Until), Reason: clip(redact.String(p.Reason), 500),
			Count: p.Evidence.Count, Fingerprint: clip(p.Evidence.Fingerprint, 200), Last: []ParkAttempt{},
			Canary: p.Canary, CanariesFailed: p.CanariesFailed, Unpark: operator.UnparkCommand(parks.Park{Kind: p.Kind, Name: clip(p.Name, 200)})}
		for _, a := range p.Evidence.Last {
			pi.Last = append(pi.Last, ParkAttempt{TaskID: a.TaskID, Attempt: a.Attempt, At: doc.FormatTime(a.At),
				Status: a.Status, ErrorReason: a.ErrorReason, Error: clip(redact.String(a.Error), 300)})
		}
		out = append(out, pi)
	}
	return out, err
}
