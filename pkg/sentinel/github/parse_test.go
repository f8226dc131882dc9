package github

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// The reasons GitHub documents for notifications.
var reasons = []string{
	"approval_requested", "assign", "author", "ci_activity", "comment", "invitation",
	"manual", "member_feature_requested", "mention", "review_requested",
	"security_advisory_credit", "security_alert", "state_change", "subscribed", "team_mention",
}

func TestClassify_EveryReasonAndSubjectType(t *testing.T) {
	// Expected values written out per SPEC §9.29 (not derived from Classify).
	pr := map[string][2]string{
		"approval_requested":       {"github.pr.approval_requested", "low"},
		"assign":                   {"github.pr.assigned", "normal"},
		"author":                   {"github.pr.author", "low"},
		"ci_activity":              {"github.pr.ci_activity", "low"},
		"comment":                  {"github.pr.comment", "low"},
		"invitation":               {"github.pr.invitation", "low"},
		"manual":                   {"github.pr.manual", "low"},
		"member_feature_requested": {"github.pr.member_feature_requested", "low"},
		"mention":                  {"github.pr.mentioned", "normal"},
		"review_requested":         {"github.pr.review_requested", "normal"},
		"security_advisory_credit": {"github.pr.security_advisory_credit", "low"},
		"security_alert":           {"github.pr.security_alert", "low"},
		"state_change":             {"github.pr.state_change", "low"},
		"subscribed":               {"github.pr.subscribed", "low"},
		"team_mention":             {"github.pr.mentioned", "normal"},
	}
	issue := map[string][2]string{
		"approval_requested":       {"github.issue.approval_requested", "low"},
		"assign":                   {"github.issue.assigned", "normal"},
		"author":                   {"github.issue.author", "low"},
		"ci_activity":              {"github.issue.ci_activity", "low"},
		"comment":                  {"github.issue.comment", "low"},
		"invitation":               {"github.issue.invitation", "low"},
		"manual":                   {"github.issue.manual", "low"},
		"member_feature_requested": {"github.issue.member_feature_requested", "low"},
		"mention":                  {"github.issue.mentioned", "low"},
		"review_requested":         {"github.issue.review_requested", "low"},
		"security_advisory_credit": {"github.issue.security_advisory_credit", "low"},
		"security_alert":           {"github.issue.security_alert", "low"},
		"state_change":             {"github.issue.state_change", "low"},
		"subscribed":               {"github.issue.subscribed", "low"},
		"team_mention":             {"github.issue.mentioned", "low"},
	}
	for _, r := range reasons {
		for subject, want := range map[string][2]string{"PullRequest": pr[r], "Issue": issue[r]} {
			typ, prio := Classify(subject, r)
			if typ != want[0] || prio != want[1] {
				t.Errorf("Classify(%s, %s) = %s %s, want %s %s", subject, r, typ, prio, want[0], want[1])
			}
		}
		for _, subject := range []string{"Commit", "Release", "Discussion", "CheckSuite", "RepositoryVulnerabilityAlert", ""} {
			typ, prio := Classify(subject, r)
			if want := "github.notification." + r; typ != want || prio != "low" {
				t.Errorf("Classify(%s, %s) = %s %s, want %s low", subject, r, typ, prio, want)
			}
		}
	}
	// A reason that is not a plain word never reaches an event type.
	if typ, _ := Classify("PullRequest", "Bad Reason/../x"); typ != "github.pr.other" {
		t.Errorf("odd reason mapped to %q, want github.pr.other", typ)
	}
}

func TestPRNumber(t *testing.T) {
	cases := map[string]string{
		"https://api.github.com/repos/octocat/Hello-World/pulls/1347": "1347",
		"https://ghe.example.com/api/v3/repos/o/r/pulls/9/":           "9",
		"https://api.github.com/repos/octocat/Hello-World/issues/42":  "",
		"https://api.github.com/repos/octocat/Hello-World/releases/5": "",
		"https://api.github.com/repos/o/r/pulls/12/comments":          "",
		"": "",
		"https://api.github.com/repos/o/r/pulls/99999999999999999999999": "",
	}
	for in, want := range cases {
		if got := PRNumber(in); got != want {
			t.Errorf("PRNumber(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseNotifications_Fixture(t *testing.T) {
	data, err := os.ReadFile("testdata/notifications.json")
	if err != nil {
		t.Fatal(err)
	}
	items, filtered, err := ParseNotifications(data, Filter{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if filtered != 0 || len(items) != 4 {
		t.Fatalf("got %d items, %d filtered; want 4, 0", len(items), filtered)
	}
	want := []struct {
		id, typ, prio, repo string
		pr                  any
	}{
		{"evt-github-1001-20261121095800", "github.pr.review_requested", "normal", "octocat/Hello-World", "1347"},
		{"evt-github-1002-20261121095930", "github.issue.assigned", "normal", "octocat/Hello-World", nil},
		{"evt-github-1003-20261121095000", "github.pr.mentioned", "normal", "octocat/Spoon-Knife", "7"},
		{"evt-github-1004-20261121094000", "github.notification.subscribed", "low", "octocat/Hello-World", nil},
	}
	for i, w := range want {
		ev := items[i].Event
		if items[i].Skip != "" {
			t.Fatalf("item %d skipped: %s", i, items[i].Skip)
		}
		if ev.ID != w.id || ev.Type != w.typ || ev.Priority != w.prio || ev.Repo == nil || *ev.Repo != w.repo {
			t.Errorf("item %d = %s %s %s %v, want %+v", i, ev.ID, ev.Type, ev.Priority, ev.Repo, w)
		}
		if ev.Payload["pr_number"] != w.pr {
			t.Errorf("item %d pr_number = %v, want %v", i, ev.Payload["pr_number"], w.pr)
		}
		if ev.Source != "github" || ev.Status != "pending" || ev.CreatedAt != "2026-11-21T10:00:00Z" {
			t.Errorf("item %d envelope = %s %s %s", i, ev.Source, ev.Status, ev.CreatedAt)
		}
		b, _ := json.Marshal(ev)
		if err := schema.Validate(doc.KindEvent, b); err != nil {
			t.Errorf("item %d does not fit the event schema: %v", i, err)
		}
	}
	p := items[0].Event.Payload
	for k, v := range map[string]any{
		"reason": "review_requested", "subject_title": "Add a greeting to the README",
		"subject_url":  "https://api.github.com/repos/octocat/Hello-World/pulls/1347",
		"subject_type": "PullRequest", "updated_at": "2026-11-21T09:58:00Z", "thread_id": "1001",
	} {
		if p[k] != v {
			t.Errorf("payload[%s] = %v, want %v", k, p[k], v)
		}
	}
	if items[1].Event.Payload["issue_number"] != "42" {
		t.Errorf("issue_number = %v, want 42", items[1].Event.Payload["issue_number"])
	}
}

func TestParseNotifications_ScopeFilters(t *testing.T) {
	data, _ := os.ReadFile("testdata/notifications.json")
	cases := []struct {
		name    string
		f       Filter
		wantIDs []string
	}{
		{"repos (case-insensitive)", Filter{Repos: []string{"OCTOCAT/spoon-knife"}}, []string{"1003"}},
		{"reasons", Filter{Reasons: []string{"assign", "subscribed"}}, []string{"1002", "1004"}},
		{"both", Filter{Repos: []string{"octocat/Hello-World"}, Reasons: []string{"review_requested", "team_mention"}}, []string{"1001"}},
		{"none", Filter{}, []string{"1001", "1002", "1003", "1004"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			items, filtered, err := ParseNotifications(data, c.f, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, it.Key)
			}
			if strings.Join(got, ",") != strings.Join(c.wantIDs, ",") || filtered != 4-len(c.wantIDs) {
				t.Errorf("got %v (%d filtered), want %v", got, filtered, c.wantIDs)
			}
		})
	}
}

func TestParseNotifications_BadInput(t *testing.T) {
	bad, _ := os.ReadFile("testdata/notifications_bad_id.json")
	items, _, err := ParseNotifications(bad, Filter{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].Skip == "" || !strings.Contains(items[0].Skip, "unsafe notification id") {
		t.Fatalf("unsafe id not skipped: %+v", items)
	}
	if items[1].Skip != "" || items[1].Event.ID != "evt-github-3001-20261121090100" {
		t.Errorf("good item next to a bad one: %+v", items[1])
	}
	for _, name := range []string{"malformed.json", "error_page.html", "rate_limited.json"} {
		data, _ := os.ReadFile("testdata/" + name)
		if _, _, err := ParseNotifications(data, Filter{}, now); err == nil {
			t.Errorf("%s parsed without error", name)
		}
	}
	data, _ := os.ReadFile("testdata/error_page.html")
	if _, _, err := ParseNotifications(data, Filter{}, now); err == nil || !strings.Contains(err.Error(), "HTML") {
		t.Errorf("HTML page error = %v, want it named", err)
	}
	items, _, err = ParseNotifications([]byte(`[{"id":"5","updated_at":"yesterday","subject":{"type":"Issue"}}, 7, null]`), Filter{}, now)
	if err != nil || len(items) != 3 {
		t.Fatalf("items %v err %v", items, err)
	}
	for i, it := range items {
		if it.Skip == "" {
			t.Errorf("item %d not skipped: %+v", i, it)
		}
	}
}

func FuzzParseNotifications(f *testing.F) {
	for _, name := range []string{"notifications.json", "notifications_page2.json", "notifications_bad_id.json", "malformed.json", "error_page.html", "rate_limited.json"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`[{"id":"a-b_c","updated_at":"2026-01-01T00:00:00+09:00","repository":{"full_name":"../x"},"subject":{"type":"PullRequest","url":"/pulls/1"},"reason":"mention"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		items, _, err := ParseNotifications(data, Filter{}, now)
		if err != nil {
			return
		}
		for _, it := range items {
			if it.Skip != "" {
				continue
			}
			if !ids.Valid(it.Event.ID) {
				t.Fatalf("invalid id %q produced", it.Event.ID)
			}
			if !threadIDRE.MatchString(it.Key) {
				t.Fatalf("unsafe thread id %q accepted", it.Key)
			}
			b, err := json.Marshal(it.Event)
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(doc.KindEvent, b); err != nil {
				t.Fatalf("event %s does not fit the schema: %v", it.Event.ID, err)
			}
		}
	})
}
