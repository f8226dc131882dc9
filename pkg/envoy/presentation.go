package envoy

import (
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Cancelled tasks (SPEC §10.11) end as a failed final whose content the king
// starts with ⛔: it keeps its own emoji, and the source DM gets 🚫 instead
// of ❌.
const (
	cancelledEmoji    = "⛔"
	ReactionCancelled = "no_entry"
)

// isCancelled reports whether a final notification is a cancel.
func isCancelled(m *doc.Message) bool {
	return m.Final != nil && *m.Final == doc.FinalFailed && strings.HasPrefix(m.Content, cancelledEmoji)
}

// finalReactionOf is the reaction a final notification puts on the DM that
// asked.
func finalReactionOf(m *doc.Message) string {
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
func withUrgency(m *doc.Message, text string) string {
	switch m.Urgency {
	case doc.UrgencyUrgent:
		if !strings.HasPrefix(text, urgentPrefix) {
			return urgentPrefix + text
		}
	case doc.UrgencyHigh:
		if m.Type != doc.MessageHumanInputRequest && !strings.HasPrefix(text, highPrefix) {
			return highPrefix + text
		}
	}
	return text
}
