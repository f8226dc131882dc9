package general

import (
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// redactedJSON is v as an indented JSON value (kv.EncodeJSON's bytes) with
// every string value passed through the one redactor (SPEC §10.14): final
// results quote what agents and engines said.
func redactedJSON(v any) ([]byte, error) {
	b, err := kv.EncodeJSON(v)
	if err != nil {
		return nil, err
	}
	return redact.JSON(b), nil
}
