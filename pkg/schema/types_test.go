package schema_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/schemas"
)

func ptr[T any](v T) *T { return &v }

var replyCtx = schema.ReplyContext{
	General: "gen-pr", SessionID: "9f1c", Repo: ptr("acme/api"), TaskID: "task-20261121-004",
	Channel: "C1", ThreadTS: "1700000000.000200",
}

// fullValues holds one fully populated value of each Go type per kind: every
// field set, so a field the schema does not know (or types differently) fails.
var fullValues = []struct {
	kind  schema.Kind
	value any
}{
	{schema.KindEvent, &schema.Event{
		ID: "evt-github-1-2026-11-21T10:00:00Z", Type: "github.pr.review_requested", Source: schema.SourceGitHub,
		Repo: ptr("acme/api"), Payload: map[string]any{"pr_number": "42"}, Priority: schema.PriorityNormal,
		CreatedAt: "2026-11-21T10:00:00Z", Status: schema.EventDispatched, TaskID: "task-20261121-004",
	}},
	{schema.KindTask, &schema.Task{
		ID: "task-20261121-004", EventID: "evt-slack-reply-1-2", TargetGeneral: "gen-pr", Type: schema.TaskTypeResume,
		Repo: ptr("acme/api"), Payload: map[string]any{"text": "yes"}, Priority: schema.PriorityHigh,
		CreatedAt: "2026-11-21T10:00:00Z", Status: schema.TaskPending, RetryCount: 2,
		NotBefore: "2026-11-21T10:02:00Z", SessionID: "9f1c", OriginalTaskID: "task-20261121-001",
		Workdir: "/opt/kingdom/workspace/gen-pr/tasks/task-20261121-001",
		Thread:  &schema.Thread{Channel: "C1", ThreadTS: "1700000000.000200"},
	}},
	{schema.KindMessage, &schema.Message{
		ID: "msg-task-20261121-004-question", Type: schema.MessageHumanInputRequest, TaskID: ptr("task-20261121-004"),
		Channel: "C1", Urgency: schema.UrgencyHigh, Content: "Merge?", Context: map[string]any{"k": "v"},
		SourceRef: &schema.SourceRef{Channel: "D1", TS: "1700000000.000100"}, CreatedAt: "2026-11-21T10:00:00Z",
		Status: schema.MessagePending, ThreadTS: ptr("1700000000.000200"), ReplyContext: &replyCtx,
		TrackConversation: &schema.TrackConversation{ReplyContext: replyCtx, TTLSeconds: 3600},
		Final:             ptr(schema.FinalDone),
	}},
	{schema.KindRawResult, &schema.RawResult{
		TaskID: "task-20261121-004", Status: schema.ResultFailed, Summary: "s", Error: "boom",
		ErrorReason: schema.ReasonEngineError, Terminal: ptr(true), Question: "q", Reason: "r",
		MemoryUpdates: []string{"m"}, NotifyChannel: "C2", Proclamation: &schema.Proclamation{Channel: "C3", Message: "hear ye"},
		Metrics: map[string]any{"cost": "1"}, RetryCount: 1, SessionID: "9f1c",
	}},
	{schema.KindResult, &schema.Result{
		RawResult: schema.RawResult{
			TaskID: "task-20261121-004", Status: schema.ResultKilled, Summary: "s", Error: "gone",
			ErrorReason: schema.ReasonSoldierDied, Terminal: ptr(false), Question: "q", Reason: "r",
			MemoryUpdates: []string{"m"}, NotifyChannel: "C2", Proclamation: &schema.Proclamation{Channel: "C3", Message: "m"},
			Metrics: map[string]any{"cost": "1"}, SessionID: "9f1c",
		},
		General: "gen-pr", DurationSeconds: 12.5, CompletedAt: "2026-11-21T10:00:00Z", RetryCount: 1,
		CheckpointPath: "/opt/kingdom/state/results/task-20261121-004-checkpoint.json", SoldierID: "soldier-1700000000-ab12",
	}},
	{schema.KindInboxEvent, &schema.InboxEvent{
		ID: "deploy-1", Type: "ops.deploy", Repo: ptr("acme/api"), Payload: map[string]any{"v": "1"}, Priority: schema.PriorityLow,
	}},
	{schema.KindCheckpoint, &schema.Checkpoint{
		TaskID: "task-20261121-004", SessionID: "9f1c", Workdir: "/w", Thread: &schema.Thread{Channel: "C1", ThreadTS: "1.2"},
		Question: "Merge?", General: "gen-pr", Repo: ptr("acme/api"),
	}},
	{schema.KindPetitionResult, &schema.PetitionResult{General: "gen-herald"}},
	{schema.KindPetitionResult, &schema.PetitionResult{DirectResponse: "hello"}},
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
		kind  schema.Kind
		value any
	}{
		{schema.KindEvent, schema.Event{ID: "e1", Type: "t", Source: schema.SourceInbox, Priority: schema.PriorityLow,
			CreatedAt: schema.FormatTime(fixedNow), Status: schema.EventPending}},
		{schema.KindTask, &schema.Task{ID: "task-20261121-001", EventID: "e1", TargetGeneral: "gen-pr", Type: "t",
			Priority: schema.PriorityLow, CreatedAt: schema.FormatTime(fixedNow), Status: schema.TaskPending}},
		{schema.KindMessage, schema.Message{ID: "m1", Type: schema.MessageReport, Urgency: schema.UrgencyNormal,
			CreatedAt: schema.FormatTime(fixedNow), Status: schema.MessagePending}},
		{schema.KindRawResult, schema.RawResult{TaskID: "task-20261121-001", Status: schema.ResultSuccess}},
		{schema.KindResult, schema.Result{RawResult: schema.RawResult{TaskID: "task-20261121-001", Status: schema.ResultSuccess},
			General: "gen-pr", CompletedAt: schema.FormatTime(fixedNow)}},
		{schema.KindInboxEvent, schema.InboxEvent{Type: "x"}},
		{schema.KindCheckpoint, schema.Checkpoint{TaskID: "task-20261121-001", Workdir: "/w", Question: "q", General: "gen-pr"}},
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
	types := map[schema.Kind]reflect.Type{
		schema.KindEvent:          reflect.TypeFor[schema.Event](),
		schema.KindTask:           reflect.TypeFor[schema.Task](),
		schema.KindMessage:        reflect.TypeFor[schema.Message](),
		schema.KindRawResult:      reflect.TypeFor[schema.RawResult](),
		schema.KindResult:         reflect.TypeFor[schema.Result](),
		schema.KindInboxEvent:     reflect.TypeFor[schema.InboxEvent](),
		schema.KindCheckpoint:     reflect.TypeFor[schema.Checkpoint](),
		schema.KindPetitionResult: reflect.TypeFor[schema.PetitionResult](),
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
