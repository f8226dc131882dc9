package envoy

import (
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Cancelled tasks (SPEC §10.11) end as a failed final whose content the king
// starts with ⛔: it keeps its own emoji, and the source DM gets 🚫 instead
// of ❌.
const (
	cancelledEmoji    = "⛔"
	ReactionCancelled = "no_entry"
)

// isCancelled reports whether a final notification is a cancel.
func isCancelled(m *schema.Message) bool {
	return m.Final != nil && *m.Final == schema.FinalFailed && strings.HasPrefix(m.Content, cancelledEmoji)
}

// finalReactionOf is the reaction a final notification puts on the DM that
// asked.
func finalReactionOf(m *schema.Message) string {
	if isCancelled(m) {
		return ReactionCancelled
	}
	return finalReaction[*m.Final]
}

// Urgency markers (message urgency, SPEC §3.3): urgent always stands out;
// high marks alerts and updates (a question already says ❓).
const (
	urgentPrefix = "🚨 *URGENT* "
	highPrefix   = "❗ "
)

// withUrgency puts the urgency marker in front of the text.
func withUrgency(m *schema.Message, text string) string {
	switch m.Urgency {
	case schema.UrgencyUrgent:
		if !strings.HasPrefix(text, urgentPrefix) {
			return urgentPrefix + text
		}
	case schema.UrgencyHigh:
		if m.Type != schema.MessageHumanInputRequest && !strings.HasPrefix(text, highPrefix) {
			return highPrefix + text
		}
	}
	return text
}
