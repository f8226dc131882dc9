package king

import (
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Only the envoy speaks for Slack (SPEC §10.15). The king tells an event
// the envoy admitted by its source: "slack" is set only on the envoy's
// admission path (after the allowed_users check); the sentinel stamps
// inbox files "inbox" whatever they claim and refuses inbox types starting
// with slack./github./jira./schedule.; its GitHub and Jira watchers stamp
// their own sources. So a slack.* event with any other source — a thread
// reply that would resume an awaited task, a DM that would start a
// petition — did not come through the envoy and is discarded with the
// reason, never acted on.

// forgedReason returns why ev cannot be acted on, or "".
func forgedReason(ev *doc.Event) string {
	if strings.HasPrefix(strings.ToLower(ev.Type), "slack.") && ev.Source != doc.SourceSlack {
		return "a " + ev.Type + " event with source " + ev.Source + " did not come through the envoy (SPEC §10.15)"
	}
	return ""
}
