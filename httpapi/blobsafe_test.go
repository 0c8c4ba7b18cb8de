package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// Blobs are served so that a browser never runs them as a page of the
// node: every one with nosniff, a sandboxing CSP and private caching (a
// read needs a token); active or unknown types as attachments.
func TestBlobServedSafely(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		ct     string
		data   string
		inline bool
		served string
	}{
		{"text/html", "<script>alert(document.cookie)</script>", false, "text/html"},
		{"text/html; charset=utf-8", "<b>hi</b>", false, "text/html; charset=utf-8"},
		{"image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`, false, "image/svg+xml"},
		{"application/xhtml+xml", "<html/>", false, "application/xhtml+xml"},
		{"text/xml", "<a/>", false, "text/xml"},
		{"application/xml", "<b/>", false, "application/xml"},
		{"application/javascript", "alert(1)", false, "application/javascript"},
		{"text/javascript", "alert(2)", false, "text/javascript"},
		{"application/pdf", "%PDF-1.4", false, "application/pdf"},
		{"application/x-made-up", "?", false, "application/x-made-up"},
		{"image/png", "\x89PNG\r\n\x1a\n", true, "image/png"},
		{"text/plain; charset=utf-8", "hello", true, "text/plain; charset=utf-8"},
		{"application/json", `{"a":1}`, true, "application/json"},
	} {
		ct, body := multipartBody(t, "file", c.ct, []byte(c.data))
		r := e.do("POST", "/blobs", headTok, body, "Content-Type", ct)
		if r.Code != http.StatusCreated && r.Code != http.StatusOK {
			t.Fatalf("upload %s: %d %s", c.ct, r.Code, r.Body)
		}
		g := e.do("GET", "/blobs/"+r.json(t)["id"].(string), leftTok, nil)
		h := g.Header
		if g.Code != http.StatusOK || string(g.Body) != c.data {
			t.Fatalf("%s: %d %q", c.ct, g.Code, g.Body)
		}
		if h.Get("Content-Type") != c.served || h.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(h.Get("Cache-Control"), "private") || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("%s: Content-Type %q, X-Content-Type-Options %q, Cache-Control %q, CSP %q", c.ct, h.Get("Content-Type"),
				h.Get("X-Content-Type-Options"), h.Get("Cache-Control"), h.Get("Content-Security-Policy"))
		}
		if got := h.Get("Content-Disposition") == "attachment"; got == c.inline {
			t.Errorf("%s: Content-Disposition %q (inline %v)", c.ct, h.Get("Content-Disposition"), c.inline)
		}
	}
}
