package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// After logging in, the browser goes where next says only if that is a
// clean path under /ui/ of this node; anything else (another host, a
// scheme, backslashes, dot segments, doubled slashes, control characters)
// sends it to /ui/.
func TestUILoginNextStaysOnUI(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ next, want string }{
		{"/ui/cluster", "/ui/cluster"},
		{"/ui/tasks?status=queued&stream=a", "/ui/tasks?status=queued&stream=a"},
		{"/ui/tasks/id-1", "/ui/tasks/id-1"},
		{"/ui/", "/ui/"},
		{"", "/ui/"},
		{"/ui/../\\evil.com", "/ui/"},
		{"/ui/..\\evil.com", "/ui/"},
		{"/\\evil.com", "/ui/"},
		{"\\\\evil.com", "/ui/"},
		{"//evil.com", "/ui/"},
		{"//evil.com/ui/", "/ui/"},
		{"///evil.com", "/ui/"},
		{"/ui//evil.com", "/ui/"},
		{"/ui/..//evil.com", "/ui/"},
		{"/ui/../../evil.com", "/ui/"},
		{"/ui/%2e%2e/%2e%2e/evil", "/ui/"},
		{"/ui/%2F%2Fevil.com", "/ui/"},
		{"/ui/%5Cevil.com", "/ui/"},
		{"/ui/./cluster", "/ui/"},
		{"/ui/tasks/..", "/ui/"},
		{"/uix/evil", "/ui/"},
		{"/ui", "/ui/"},
		{"/jobs", "/ui/"},
		{"http://evil.com/ui/", "/ui/"},
		{"https:evil.com", "/ui/"},
		{"javascript:alert(1)", "/ui/"},
		{"//user@evil.com/ui/", "/ui/"},
		{"ui/cluster", "/ui/"},
		{"/ui/\tcluster", "/ui/"},
		{"/ui/\r\nSet-Cookie: x=y", "/ui/"},
		{"/ui/%0d%0aX: y", "/ui/"},
		{"/ui/\x00", "/ui/"},
		{"\x7f/ui/", "/ui/"},
		{" /ui/", "/ui/"},
		{"/ui/" + strings.Repeat("a", 3000), "/ui/"},
	} {
		r := e.do("POST", "/ui/login", "", "token="+url.QueryEscape(headTok)+"&next="+url.QueryEscape(c.next),
			"Content-Type", "application/x-www-form-urlencoded")
		if r.Code != http.StatusSeeOther || r.Header.Get("Location") != c.want {
			t.Errorf("next=%q: %d Location %q, want %q", c.next, r.Code, r.Header.Get("Location"), c.want)
		}
		// Whatever a browser makes of the Location, it stays on this node.
		if u, err := url.Parse("http://node.example" + r.Header.Get("Location")); err != nil || u.Host != "node.example" {
			t.Errorf("next=%q: Location %q leaves the node", c.next, r.Header.Get("Location"))
		}
	}
}
