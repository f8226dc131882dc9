package envoy

import (
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/logging"
)

// Outside text in Slack is data (SPEC §10.13). Every text that came from
// outside or from an agent — titles, summaries, questions, errors, DM
// answers, proclamations: all of a message's content — is escaped for Slack
// (&, <, >), so it cannot mention @channel/@here/users or disguise a link,
// and passes the one redactor (SPEC §10.14). Our own formatting is added
// around it as markup, never escaped. Console mode prints the same text.

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// EscapeText escapes s for Slack's message text: the three characters
// Slack's formatting gives meaning to (&, <, >) become entities.
func EscapeText(s string) string { return slackEscaper.Replace(s) }

// slackText builds a posted text from parts: our markup as is, outside data
// redacted and escaped.
type slackText struct{ b strings.Builder }

// markup appends Kingdom's own formatting (an emoji, a mention it chose).
func (t *slackText) markup(s string) *slackText {
	t.b.WriteString(s)
	return t
}

// data appends outside or agent text: redacted, then escaped.
func (t *slackText) data(s string) *slackText {
	t.b.WriteString(EscapeText(logging.Redact(s)))
	return t
}

func (t *slackText) String() string { return t.b.String() }
