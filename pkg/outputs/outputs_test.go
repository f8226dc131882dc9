package outputs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/githubfake"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

const task = "task-20260301-001"

type fixture struct {
	f  *githubfake.Fake
	st store.Store
	r  *Runner
}

func newFixture(t *testing.T, allow ...string) *fixture {
	t.Helper()
	f := githubfake.New("write-tok")
	t.Cleanup(f.Close)
	f.AddRepo("acme/app", "main")
	f.AddPull("acme/app", githubfake.Pull{Number: 7, Title: "Fix", Head: "feature", Base: "main"})
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol := config.DefaultManifest().Outputs
	pol.Allow = allow
	return &fixture{f: f, st: st, r: &Runner{Store: st, Policy: pol,
		Services: Services{GitHubAPI: f.URL(), GitHubToken: "write-tok", JiraURL: f.URL(), JiraEmail: "k@x", JiraToken: "jira-tok"},
		Target:   Target{TaskID: task, Repo: "acme/app", PR: 7, JiraKey: "OPS-1"}}}
}

func (x *fixture) record(t *testing.T, key string) Record {
	t.Helper()
	b, err := x.st.Value(context.Background(), NS, key)
	if err != nil {
		t.Fatalf("record %s: %v", key, err)
	}
	var r Record
	json.Unmarshal(b, &r)
	return r
}

var review = doc.Output{Kind: doc.OutputGitHubReview, Event: "REQUEST_CHANGES", Body: "Two problems.",
	Comments: []doc.ReviewComment{{Path: "main.go", Line: 3, Body: "nil check"}}}

// SPEC §12.3: the general posts the review with the write token, and a
// second run of the same attempt (a restart finishing it again) finds the
// records and posts nothing.
func TestRun_PostsEachOutputOnceWithTheWriteToken(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubReview, doc.OutputGitHubComment, doc.OutputJiraComment)
	outs := []doc.Output{review, {Kind: doc.OutputGitHubComment, Body: "Thanks."}, {Kind: doc.OutputJiraComment, Body: "Reviewed."}}
	for run := 0; run < 2; run++ {
		res, err := x.r.Run(context.Background(), task, 0, outs)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3 || res[0].State != "done" || res[1].State != "done" || res[2].State != "done" {
			t.Fatalf("run %d: outcomes %+v", run, res)
		}
		if !strings.Contains(res[0].Link, "pullrequestreview-") || !strings.Contains(res[2].Link, "/browse/OPS-1?focusedCommentId=") {
			t.Errorf("links: %+v", res)
		}
	}
	rv := x.f.Reviews("acme/app", 7)
	if len(rv) != 1 || rv[0].Auth != "Bearer write-tok" || rv[0].State != "CHANGES_REQUESTED" || len(rv[0].Comments) != 1 ||
		!strings.Contains(rv[0].Body, Marker(Key(task, 0, 0))) {
		t.Errorf("reviews: %+v", rv)
	}
	if c := x.f.Comments("acme/app", 7); len(c) != 1 {
		t.Errorf("comments: %+v", c)
	}
	if c := x.f.JiraComments("OPS-1"); len(c) != 1 {
		t.Errorf("jira comments: %+v", c)
	}
	if r := x.record(t, Key(task, 0, 1)); r.State != "done" || r.Kind != doc.OutputGitHubComment {
		t.Errorf("record: %+v", r)
	}
}

// A general killed after the POST but before it recorded the end finds
// the started record on restart and looks the review up by its marker
// before posting again.
func TestRun_StartedRecordIsLookedUpBeforeAnyRepost(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubReview)
	key := Key(task, 0, 0)
	// The crashed run: its started record, and its post on GitHub.
	if err := x.r.start(context.Background(), key, review.Kind); err != nil {
		t.Fatal(err)
	}
	g, _ := x.r.Services.GitHub()
	link, err := g.CreateReview(context.Background(), "acme/app", 7, "COMMENT", "x\n\n"+Marker(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.r.Run(context.Background(), task, 0, []doc.Output{review})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].State != "done" || res[0].Link != link {
		t.Fatalf("outcomes %+v, want done with %s", res, link)
	}
	if n := len(x.f.Reviews("acme/app", 7)); n != 1 {
		t.Errorf("%d reviews, want 1", n)
	}
	// Started and not found: it was never posted, so it posts now.
	x2 := newFixture(t, doc.OutputGitHubReview)
	x2.r.start(context.Background(), key, review.Kind)
	if res, err := x2.r.Run(context.Background(), task, 0, []doc.Output{review}); err != nil || res[0].State != "done" {
		t.Fatalf("%+v %v", res, err)
	}
	if n := len(x2.f.Reviews("acme/app", 7)); n != 1 {
		t.Errorf("%d reviews, want 1", n)
	}
}

// A post whose answer was lost (a 502 after GitHub stored it) is found by
// its marker, not posted again.
func TestRun_LostAnswerIsFoundNotReposted(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubComment)
	x.f.LoseAnswers(1)
	res, err := x.r.Run(context.Background(), task, 0, []doc.Output{{Kind: doc.OutputGitHubComment, Body: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].State != "done" || res[0].Link == "" {
		t.Errorf("outcome %+v", res[0])
	}
	if n := len(x.f.Comments("acme/app", 7)); n != 1 {
		t.Errorf("%d comments, want 1", n)
	}
}

// A fenced-out attempt's outputs never run.
func TestRun_LostClaimRunsNothing(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubReview)
	x.r.Held = func(context.Context) error { return fmt.Errorf("claim of %s: %w", task, store.ErrFenced) }
	_, err := x.r.Run(context.Background(), task, 0, []doc.Output{review})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("got %v, want ErrFenced", err)
	}
	if n := len(x.f.Reviews("acme/app", 7)); n != 0 {
		t.Errorf("a fenced-out attempt posted %d reviews", n)
	}
}

// A retried attempt whose predecessor already did the output reuses its
// outcome instead of posting a second review.
func TestRun_RetriedAttemptDoesNotRepeatAnEarlierOne(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubReview)
	if _, err := x.r.Run(context.Background(), task, 0, []doc.Output{review}); err != nil {
		t.Fatal(err)
	}
	res, err := x.r.Run(context.Background(), task, 1, []doc.Output{review})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].State != "done" || res[0].Link == "" {
		t.Errorf("outcome %+v", res[0])
	}
	if n := len(x.f.Reviews("acme/app", 7)); n != 1 {
		t.Errorf("%d reviews, want 1", n)
	}
}

// Refusals are outcomes with a reason, in the order given, and nothing
// refused reaches GitHub.
func TestRun_RefusalsAreOutcomes(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubReview, doc.OutputGitHubPullRequest)
	outs := []doc.Output{
		review,
		review, // over max (1)
		{Kind: doc.OutputGitHubComment, Body: "x"},           // not allowed
		{Kind: doc.OutputGitHubPullRequest, Title: "Fix it"}, // no push before it
	}
	res, err := x.r.Run(context.Background(), task, 0, outs)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ state, reason string }{
		{"done", ""},
		{"refused", "over outputs.max for github.review (1 per attempt)"},
		{"refused", "github.comment is not in the manifest's outputs.allow"},
		{"refused", "a pull request needs a github.push before it"},
	}
	for i, w := range want {
		if res[i].State != w.state || !strings.Contains(res[i].Reason, w.reason) || res[i].Index != i {
			t.Errorf("outcome %d: %+v, want %s %q", i, res[i], w.state, w.reason)
		}
	}
	if n := len(x.f.Reviews("acme/app", 7)); n != 1 {
		t.Errorf("%d reviews, want 1", n)
	}
	if len(x.f.Comments("acme/app", 7)) != 0 || len(x.f.PullsOpened("acme/app")) != 0 {
		t.Error("a refused output reached GitHub")
	}
}

type fakePusher struct {
	pushed  map[string]bool
	refuse  string
	calls   int
	lookups int
}

func (p *fakePusher) Push(ctx context.Context, branch, message, key string) (string, string, error) {
	p.calls++
	if p.refuse != "" {
		return "", p.refuse, nil
	}
	p.pushed[branch] = true
	return "https://github.example/acme/app/tree/" + branch, "", nil
}

func (p *fakePusher) Pushed(ctx context.Context, branch string) (string, error) {
	p.lookups++
	if p.pushed[branch] {
		return "https://github.example/acme/app/tree/" + branch, nil
	}
	return "", nil
}

// A pull request opens from the branch the push before it went to, into
// the default branch; a refused push refuses the pull request too.
func TestRun_PullRequestFromThePushedBranch(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubPush, doc.OutputGitHubPullRequest)
	p := &fakePusher{pushed: map[string]bool{}}
	x.r.Pusher = p
	outs := []doc.Output{{Kind: doc.OutputGitHubPush, BranchSuffix: "fix", Message: "fix"}, {Kind: doc.OutputGitHubPullRequest, Title: "Fix", Body: "b"}}
	res, err := x.r.Run(context.Background(), task, 0, outs)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].State != "done" || res[1].State != "done" {
		t.Fatalf("outcomes %+v", res)
	}
	prs := x.f.PullsOpened("acme/app")
	if len(prs) != 1 || prs[0].Path != "kingdom/"+task+"-fix" {
		t.Errorf("pull requests: %+v", prs)
	}
	y := newFixture(t, doc.OutputGitHubPush, doc.OutputGitHubPullRequest)
	y.r.Pusher = &fakePusher{pushed: map[string]bool{}, refuse: "the push touches a protected path: .github/workflows/ci.yml"}
	res, err = y.r.Run(context.Background(), task, 0, outs)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].State != "refused" || !strings.Contains(res[0].Reason, ".github/workflows/ci.yml") || res[1].State != "refused" {
		t.Errorf("outcomes %+v", res)
	}
	if len(y.f.PullsOpened("acme/app")) != 0 {
		t.Error("a pull request opened without its push")
	}
}

func TestRefusal_FieldsAndTargets(t *testing.T) {
	pol := config.DefaultManifest().Outputs
	pol.Allow = slices.Clone(doc.OutputKinds)
	tgt := Target{TaskID: task, Repo: "acme/app", PR: 7}
	cases := []struct {
		o    doc.Output
		t    Target
		want string
	}{
		{doc.Output{Kind: doc.OutputGitHubReview, Event: "APPROVE", Body: "x"}, tgt, "COMMENT or REQUEST_CHANGES"},
		{doc.Output{Kind: doc.OutputGitHubReview, Event: "COMMENT"}, tgt, "no body and no comments"},
		{doc.Output{Kind: doc.OutputGitHubReview, Event: "COMMENT", Body: "x"}, Target{Repo: "acme/app"}, "no pull request"},
		{doc.Output{Kind: doc.OutputGitHubReview, Event: "COMMENT", Comments: []doc.ReviewComment{{Path: "../etc", Line: 1, Body: "x"}}}, tgt, "line comment 0"},
		{doc.Output{Kind: doc.OutputGitHubComment, Body: "x"}, Target{}, "no repository"},
		{doc.Output{Kind: doc.OutputGitHubComment, Body: " "}, tgt, "body is empty"},
		{doc.Output{Kind: doc.OutputGitHubPush, BranchSuffix: "../main", Message: "m"}, tgt, "branch_suffix must match"},
		{doc.Output{Kind: doc.OutputGitHubPush}, tgt, "no commit message"},
		{doc.Output{Kind: doc.OutputJiraComment, Body: "x"}, tgt, "no Jira issue"},
		{doc.Output{Kind: doc.OutputGitHubComment, Body: "x"}, tgt, ""},
	}
	for _, c := range cases {
		got := refusal(pol, []doc.Output{c.o}, 0, c.t)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: got %q, want %q", c.o, got, c.want)
		}
	}
	if got := Branch(task, ""); got != "kingdom/"+task {
		t.Errorf("branch %q", got)
	}
}

func TestProtected_Globs(t *testing.T) {
	globs := config.DefaultProtectedPaths
	changed := []string{"main.go", ".github/workflows/ci.yml", "docs/CLAUDE.md", ".claude/settings.json", ".mcp.json",
		"AGENTS.md", "src/.codex/config.toml", ".githubx/a", "CLAUDE.md.txt"}
	got := Protected(globs, changed)
	want := []string{".github/workflows/ci.yml", "docs/CLAUDE.md", ".claude/settings.json", ".mcp.json", "AGENTS.md"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := Protected([]string{"src/**/secret*"}, []string{"src/a/b/secret.go", "secret.go", "src/secret"}); !slices.Equal(got, []string{"src/a/b/secret.go", "src/secret"}) {
		t.Errorf("** glob: %v", got)
	}
}

// Without a write token nothing is posted: the outputs are refused with
// the reason, never sent unauthenticated.
func TestRun_NoWriteTokenRefuses(t *testing.T) {
	x := newFixture(t, doc.OutputGitHubReview)
	x.r.Services.GitHubToken = ""
	res, err := x.r.Run(context.Background(), task, 0, []doc.Output{review})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].State != "refused" || !strings.Contains(res[0].Reason, "GH_TOKEN") {
		t.Errorf("outcome %+v", res[0])
	}
	for _, r := range x.f.Requests() {
		if r.Method != "GET" {
			t.Errorf("a write went out: %+v", r)
		}
	}
}
