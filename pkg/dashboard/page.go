package dashboard

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strings"
)

// page is the whole user interface: one HTML file with its CSS and script
// inline, embedded in the binary (no build step, no CDN). It renders every
// value with textContent, never as HTML.
//
//go:embed page/index.html
var page []byte

func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Defence in depth: no inline script may run but the page's own, no
	// outside source is loaded, nothing frames the page.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'sha256-"+pageScriptHash+"'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(page)
}

// pageScriptHash is the CSP hash of the page's one inline script.
var pageScriptHash = scriptHash(page)

func scriptHash(html []byte) string {
	s := string(html)
	i := strings.Index(s, "<script>")
	j := strings.LastIndex(s, "</script>")
	if i < 0 || j < i {
		return ""
	}
	sum := sha256.Sum256([]byte(s[i+len("<script>") : j]))
	return base64.StdEncoding.EncodeToString(sum[:])
}
