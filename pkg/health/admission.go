package health

import (
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// Admit reports whether work of this priority may start under this health
// and token status (SPEC §4.4, §9.18): health_ok ∧ token_ok.
//
//	health green: all · yellow: only high · orange, red: none
//	tokens ok: health decides · warning: only high, or any when health is
//	green · critical: only high · unknown: as ok
//
// An unrecognized health level counts as orange (nothing starts); an
// unrecognized token status counts as unknown (health decides). The
// concurrency limit is the caller's third condition.
func Admit(health, tokenStatus, priority string) bool {
	return DenyReason(health, tokenStatus, priority) == ""
}

// DenyReason returns why Admit refuses, e.g. "health yellow admits only
// high priority", or "" when it admits.
func DenyReason(health, tokenStatus, priority string) string {
	high := priority == doc.PriorityHigh
	switch health {
	case Green:
	case Yellow:
		if !high {
			return fmt.Sprintf("health yellow admits only high priority, not %q", priority)
		}
	case Orange, Red:
		return fmt.Sprintf("health %s admits nothing", health)
	default:
		return fmt.Sprintf("health %q is unknown (treated as orange)", health)
	}
	switch tokenStatus {
	case TokenWarning:
		// Written as the spec states it; after the health rule above it
		// never narrows further (yellow already requires high).
		if !high && health != Green {
			return fmt.Sprintf("token budget warning admits only high priority unless health is green (health %s)", health)
		}
	case TokenCritical:
		if !high {
			return fmt.Sprintf("token budget critical admits only high priority, not %q", priority)
		}
	}
	return ""
}
