package doc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

func TestUnmarshal_DecodesWithoutValidating(t *testing.T) {
	// Not a valid raw result (no summary, an unknown status), but JSON
	// that fits the type: Unmarshal is no validator.
	var r doc.RawResult
	if err := doc.Unmarshal(doc.KindRawResult, []byte(`{"task_id":"x","status":"done"}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.TaskID != "x" || r.Status != "done" {
		t.Errorf("decoded %+v", r)
	}
}

func TestUnmarshal_ErrorsNameTheKindAndMatchErrInvalid(t *testing.T) {
	cases := []struct {
		name, data string
		notJSON    bool
		want       string
	}{
		{"empty", ``, true, "raw-result: not valid JSON: unexpected end of JSON input"},
		{"trailing", `{"status":"success"} x`, true, "raw-result: not valid JSON: invalid character 'x' after top-level value"},
		{"truncated", `{"status":`, true, "raw-result: not valid JSON: unexpected end of JSON input"},
		{"wrong type", `{"status":1}`, false, "raw-result: json: cannot unmarshal number into Go struct field RawResult.status of type string"},
		{"not an object", `[1]`, false, "raw-result: json: cannot unmarshal array into Go value of type doc.RawResult"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r doc.RawResult
			err := doc.Unmarshal(doc.KindRawResult, []byte(c.data), &r)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, doc.ErrInvalid) || errors.Is(err, doc.ErrNotJSON) != c.notJSON {
				t.Errorf("%v: ErrInvalid %v, ErrNotJSON %v (want %v)", err, errors.Is(err, doc.ErrInvalid), errors.Is(err, doc.ErrNotJSON), c.notJSON)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %q, want %q", err, c.want)
			}
		})
	}
}
