package engine

import (
	"encoding/json"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Spent is what an attempt's engine reported spending so far: the usage
// and its price (nil when unpriced). The soldier keeps it current in
// layout.ResultSpent while the engine runs; the general takes it for a
// raw result without usage (an attempt killed by a timeout or a cancel),
// SPEC §10.6.
type Spent struct {
	Usage   *doc.Usage `json:"usage"`
	CostUSD *float64   `json:"cost_usd"`
}

// WriteSpent replaces the record at path.
func WriteSpent(path string, s Spent) error {
	return atomicfile.WriteJSON(path, s)
}

// ReadSpent reads the record at path; ok is false when there is none or
// it holds no usage.
func ReadSpent(path string) (s Spent, ok bool) {
	b, err := atomicfile.ReadLimited(path, 4096)
	if err != nil || json.Unmarshal(b, &s) != nil || s.Usage == nil {
		return Spent{}, false
	}
	return s, true
}
