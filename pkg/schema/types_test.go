package schema_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/schemas"
)

func ptr[T any](v T) *T { return &v }

var replyCtx = doc.ReplyContext{
	General: "gen-pr", SessionID: "9f1c", Repo: ptr("acme/api"), TaskID: "task-20261121-004",
	Channel: "C1", ThreadTS: "1700000000.000200",
}

// fullValues holds one fully populated value of each Go type per kind: every
// field set, so a field the schema does not know (or types differently) fails.
var fullValues = []struct {
	kind  doc.Kind
	value any
}{
	{doc.KindEvent, &doc.Event{
		ID: "evt-github-1-2026-11-21T10:00:00Z", Type: "github.pr.review_requested", Source: doc.SourceGitHub,
		Repo: ptr("acme/api"), Payload: map[string]any{"pr_number": "42"}, Priority: doc.PriorityNormal,
		CreatedAt: "2026-11-21T10:00:00Z", Status: doc.EventDispatched, TaskID: "task-20261121-004",
	}},
	{doc.KindTask, &doc.Task{
		ID: "task-20261121-004", EventID: "evt-slack-reply-1-2", TargetGeneral: "gen-pr", Type: doc.TaskTypeResume,
		Repo: ptr("acme/api"), Payload: map[string]any{"text": "yes"}, Priority: doc.PriorityHigh,
		CreatedAt: "2026-11-21T10:00:00Z", Status: doc.TaskPending, RetryCount: 2,
		NotBefore: "2026-11-21T10:02:00Z", SessionID: "9f1c", OriginalTaskID: "task-20261121-001",
		Workdir: "/opt/kingdom/workspace/gen-pr/tasks/task-20261121-001",
		Thread:  &doc.Thread{Channel: "C1", ThreadTS: "1700000000.000200"},
	}},
	{doc.KindMessage, &doc.Message{
		ID: "msg-task-20261121-004-question", Type: doc.MessageHumanInputRequest, TaskID: ptr("task-20261121-004"),
		Channel: "C1", Urgency: doc.UrgencyHigh, Content: "Merge?", Context: map[string]any{"k": "v"},
		SourceRef: &doc.SourceRef{Channel: "D1", TS: "1700000000.000100"}, CreatedAt: "2026-11-21T10:00:00Z",
		Status: doc.MessagePending, ThreadTS: ptr("1700000000.000200"), ReplyContext: &replyCtx,
		TrackConversation: &doc.TrackConversation{ReplyContext: replyCtx, TTLSeconds: 3600},
		Final:             ptr(doc.FinalDone),
	}},
	{doc.KindRawResult, &doc.RawResult{
		TaskID: "task-20261121-004", Status: doc.ResultFailed, Summary: "s", Error: "boom",
		ErrorReason: doc.ReasonEngineError, Terminal: ptr(true), Question: "q", Reason: "r",
		MemoryUpdates: []string{"m"}, NotifyChannel: "C2", Proclamation: &doc.Proclamation{Channel: "C3", Message: "hear ye"},
		Metrics: map[string]any{"cost": "1"}, RetryCount: 1, SessionID: "9f1c",
	}},
	{doc.KindResult, &doc.Result{
		RawResult: doc.RawResult{
			TaskID: "task-20261121-004", Status: doc.ResultKilled, Summary: "s", Error: "gone",
			ErrorReason: doc.ReasonSoldierDied, Terminal: ptr(false), Question: "q", Reason: "r",
			MemoryUpdates: []string{"m"}, NotifyChannel: "C2", Proclamation: &doc.Proclamation{Channel: "C3", Message: "m"},
			Metrics: map[string]any{"cost": "1"}, SessionID: "9f1c",
		},
		General: "gen-pr", DurationSeconds: 12.5, CompletedAt: "2026-11-21T10:00:00Z", RetryCount: 1,
		CheckpointPath: "/opt/kingdom/state/results/task-20261121-004-checkpoint.json", SoldierID: "soldier-1700000000-ab12",
	}},
	{doc.KindInboxEvent, &doc.InboxEvent{
		ID: "deploy-1", Type: "ops.deploy", Repo: ptr("acme/api"), Payload: map[string]any{"v": "1"}, Priority: doc.PriorityLow,
	}},
	{doc.KindCheckpoint, &doc.Checkpoint{
		TaskID: "task-20261121-004", SessionID: "9f1c", Workdir: "/w", Thread: &doc.Thread{Channel: "C1", ThreadTS: "1.2"},
		Question: "Merge?", General: "gen-pr", Repo: ptr("acme/api"),
	}},
	{doc.KindPetitionResult, &doc.PetitionResult{General: "gen-herald"}},
	{doc.KindPetitionResult, &doc.PetitionResult{DirectResponse: "hello"}},
}

// TestTypes_RoundTripThroughSchema keeps the Go types and the schemas from
// drifting: a fully populated value marshals into a valid document and
// decodes back unchanged.
func TestTypes_RoundTripThroughSchema(t *testing.T) {
	for _, c := range fullValues {
		t.Run(string(c.kind), func(t *testing.T) {
			data, err := json.Marshal(c.value)
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(c.kind, data); err != nil {
				t.Fatalf("marshalled value invalid: %v\n%s", err, data)
			}
			back := reflect.New(reflect.TypeOf(c.value).Elem()).Interface()
			if err := schema.Decode(c.kind, data, back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c.value) {
				t.Errorf("round trip changed the value:\n got %+v\nwant %+v", back, c.value)
			}
		})
	}
}

// TestTypes_ZeroishValuesStillValid: nil maps and nil nullable pointers must
// marshal as {} and null, never break the schema.
func TestTypes_ZeroishValuesStillValid(t *testing.T) {
	for _, c := range []struct {
		kind  doc.Kind
		value any
	}{
		{doc.KindEvent, doc.Event{ID: "e1", Type: "t", Source: doc.SourceInbox, Priority: doc.PriorityLow,
			CreatedAt: doc.FormatTime(fixedNow), Status: doc.EventPending}},
		{doc.KindTask, &doc.Task{ID: "task-20261121-001", EventID: "e1", TargetGeneral: "gen-pr", Type: "t",
			Priority: doc.PriorityLow, CreatedAt: doc.FormatTime(fixedNow), Status: doc.TaskPending}},
		{doc.KindMessage, doc.Message{ID: "m1", Type: doc.MessageReport, Urgency: doc.UrgencyNormal,
			CreatedAt: doc.FormatTime(fixedNow), Status: doc.MessagePending}},
		{doc.KindRawResult, doc.RawResult{TaskID: "task-20261121-001", Status: doc.ResultSuccess}},
		{doc.KindResult, doc.Result{RawResult: doc.RawResult{TaskID: "task-20261121-001", Status: doc.ResultSuccess},
			General: "gen-pr", CompletedAt: doc.FormatTime(fixedNow)}},
		{doc.KindInboxEvent, doc.InboxEvent{Type: "x"}},
		{doc.KindCheckpoint, doc.Checkpoint{TaskID: "task-20261121-001", Workdir: "/w", Question: "q", General: "gen-pr"}},
	} {
		data, err := json.Marshal(c.value)
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(c.kind, data); err != nil {
			t.Errorf("%s: %v\n%s", c.kind, err, data)
		}
	}
}

// TestTypes_FieldsMatchSchemaProperties: every property a schema declares
// is a field of the Go type, and every field is a declared property.
func TestTypes_FieldsMatchSchemaProperties(t *testing.T) {
	types := map[doc.Kind]reflect.Type{
		doc.KindEvent:          reflect.TypeFor[doc.Event](),
		doc.KindTask:           reflect.TypeFor[doc.Task](),
		doc.KindMessage:        reflect.TypeFor[doc.Message](),
		doc.KindRawResult:      reflect.TypeFor[doc.RawResult](),
		doc.KindResult:         reflect.TypeFor[doc.Result](),
		doc.KindInboxEvent:     reflect.TypeFor[doc.InboxEvent](),
		doc.KindCheckpoint:     reflect.TypeFor[doc.Checkpoint](),
		doc.KindPetitionResult: reflect.TypeFor[doc.PetitionResult](),
	}
	for kind, typ := range types {
		props := schemaProperties(t, string(kind)+".json")
		if fields := reflectJSONNames(typ); !slices.Equal(fields, props) {
			t.Errorf("%s: Go fields %v, schema properties %v", kind, fields, props)
		}
	}
}

// schemaProperties returns the sorted top-level property names of a schema,
// following a top-level $ref to another file (result.json → raw-result.json).
func schemaProperties(t *testing.T, file string) []string {
	t.Helper()
	data, err := schemas.FS.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Ref        string                     `json:"$ref"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range doc.Properties {
		names = append(names, name)
	}
	if doc.Ref != "" {
		names = append(names, schemaProperties(t, doc.Ref)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

var fixedNow = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
