package schema_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// withKey adds `"key": value` as the last property of a JSON object.
func withKey(d []byte, key, value string) []byte {
	s := strings.TrimSpace(string(d))
	return []byte(strings.TrimSuffix(s, "}") + ", " + key + ": " + value + "}")
}

func TestDecode_CaseVariantKeysAreRejectedAtEveryDepth(t *testing.T) {
	cases := []struct {
		name, fixture, key, value string
		decode                    func([]byte) error
	}{
		{"top level", "testdata/good/event.json", `"Priority"`, `"high"`,
			func(b []byte) error { _, err := schema.DecodeEvent(b); return err }},
		{"long s folds onto s", "testdata/good/raw-result.json", `"ſtatus"`, `"killed"`,
			func(b []byte) error { _, err := schema.DecodeRawResult(b); return err }},
		{"promoted field of an embedded struct", "testdata/good/result.json", `"Task_ID"`, `"task-20990101-001"`,
			func(b []byte) error { _, err := schema.DecodeResult(b); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := withKey(readFile(t, c.fixture), c.key, c.value)
			err := c.decode(data)
			if !errors.Is(err, doc.ErrInvalid) || !strings.Contains(err.Error(), "differs only in case") {
				t.Fatalf("got %v, want ErrInvalid naming the case-variant key", err)
			}
		})
	}
	t.Run("nested object", func(t *testing.T) {
		js := string(readFile(t, "testdata/good/message--human-input-request.json"))
		const real = `"task_id": "task-20260207-001"}`
		i := strings.Index(js, `"reply_context"`)
		j := strings.Index(js[i:], real)
		if i < 0 || j < 0 {
			t.Fatal("fixture has no reply_context.task_id")
		}
		data := []byte(js[:i+j] + `"task_id": "task-20260207-001", "TASK_ID": "../x"}` + js[i+j+len(real):])
		// Prove the hole is real: encoding/json alone takes the smuggled value.
		var raw doc.Message
		if err := json.Unmarshal(data, &raw); err != nil || raw.ReplyContext.TaskID != "../x" {
			t.Fatalf("encoding/json no longer matches keys case-insensitively (%v, %q); revisit checkCase", err, raw.ReplyContext.TaskID)
		}
		_, err := schema.DecodeMessage(data)
		if !errors.Is(err, doc.ErrInvalid) || !strings.Contains(err.Error(), "at '/reply_context'") {
			t.Fatalf("got %v, want ErrInvalid at /reply_context", err)
		}
	})
}

func TestDecode_ExtraKeysThatAreNoFieldStillDecode(t *testing.T) {
	data := withKey(readFile(t, "testdata/good/raw-result.json"), `"exit_code"`, `3`)
	data = withKey(data, `"Extra"`, `{"ID": 1}`)
	r, err := schema.DecodeRawResult(data)
	if err != nil {
		t.Fatalf("got %v, want extra properties accepted", err)
	}
	if r.TaskID == "" {
		t.Fatalf("decoded %+v", r)
	}
}
