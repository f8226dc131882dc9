package soldier

import (
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// keepsConversation reports whether a successful attempt's stored session
// must stay for a follow-up (SPEC §9.10): the agent asked to keep the
// conversation, or its general's manifest keeps conversations
// (track_conversation, gen-herald). The general keeps the task dir too, so
// the follow-up resumes with the same cwd, as claude requires.
func keepsConversation(o RunOptions, raw map[string]any) bool {
	// A success the general will accept as one (it validates; the schema
	// requires a summary): a broken one becomes InvalidResult there.
	if st, _ := raw["status"].(string); st != doc.ResultSuccess {
		return false
	}
	if _, ok := raw["summary"].(string); !ok {
		return false
	}
	if v, _ := raw["track_conversation"].(bool); v {
		return true
	}
	if o.BaseDir == "" || o.General == "" {
		return false
	}
	m, err := config.LoadManifest(layout.New(o.BaseDir).GeneralManifest(o.General))
	return err == nil && m.TrackConversation
}
