package chamberlain

import (
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// decodeEventData extracts the fields the counters use from an internal
// event's data in one pass over its members (issue #15: a chamberlain
// consuming a large events.log from zero decodes every line). A field of
// another type is left empty, as json.Unmarshal would leave it unusable.
func decodeEventData(raw []byte) eventData {
	var d eventData
	// raw is only read here: parse it in place and copy out the strings
	// that are kept.
	r := gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw)))
	if !r.IsObject() {
		return d
	}
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "event_id":
			if v.Type == gjson.String {
				d.EventID = strings.Clone(v.Str)
			}
		case "general":
			if v.Type == gjson.String {
				d.General = strings.Clone(v.Str)
			}
		case "target_general":
			if v.Type == gjson.String {
				d.TargetGeneral = strings.Clone(v.Str)
			}
		case "duration_seconds":
			if v.Type == gjson.Number {
				f := v.Num
				d.DurationSeconds = &f
			} else {
				d.DurationSeconds = nil
			}
		}
		return true
	})
	return d
}
