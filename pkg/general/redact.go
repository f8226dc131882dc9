package general

import (
	"encoding/json"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// writeRedactedJSON writes v as an indented JSON state file (0600) with
// every string value passed through the one redactor (SPEC §10.14): final
// results and synthetic raw results quote what agents and engines said.
func writeRedactedJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, redact.JSON(append(b, '\n')), 0o600)
}
