package king

import (
	"os"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// conversation is the track_conversation of a final message whose result
// asked to keep the conversation (SPEC §9.10): the envoy registers the
// thread, and a follow-up there from the same user comes back as a
// slack.thread.reply carrying this reply_context, which resumes the session
// in the kept workdir.
func (k *King) conversation(t *doc.Task, res *doc.Result) *doc.TrackConversation {
	if !res.TrackConversation || res.Status != doc.ResultSuccess {
		return nil
	}
	rc := doc.ReplyContext{General: t.TargetGeneral, SessionID: res.SessionID, Repo: t.Repo, TaskID: t.ID, Workdir: res.Workdir}
	if rc.SessionID == "" {
		if b, err := os.ReadFile(k.l.ResultSessionID(t.ID)); err == nil {
			rc.SessionID = strings.TrimSpace(string(b))
		}
	}
	if t.Thread != nil {
		rc.Channel, rc.ThreadTS = t.Thread.Channel, t.Thread.ThreadTS
	}
	user, _ := t.Payload["user_id"].(string)
	return &doc.TrackConversation{ReplyContext: rc, UserID: user}
}
