package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// The limits an attacker's probe found missing, on three spine processes,
// most requests sent to followers: each reproduction gets a clear JSON
// error with the right status and changes nothing.

// limitsMCPPost sends one MCP message to base's /mcp (with a session id
// when sid is set).
func limitsMCPPost(t *testing.T, base, token, sid, body string, hdr ...string) *apiResp {
	t.Helper()
	h := append([]string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}, hdr...)
	if sid != "" {
		h = append(h, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18")
	}
	return apiDo(t, "POST", base+"/mcp", token, body, h...)
}

const limitsInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`

// limitsMCPSessions reads a node's open MCP sessions from /health.
func limitsMCPSessions(t *testing.T, base string) int {
	t.Helper()
	var h struct {
		MCPSessions *int `json:"mcp_sessions"`
	}
	apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/health", "", nil), http.StatusOK), &h)
	if h.MCPSessions == nil {
		t.Fatal("/health has no mcp_sessions")
	}
	return *h.MCPSessions
}

// limitsJobs lists a stream's jobs on the leader.
func limitsJobs(t *testing.T, base, stream string) []apiJob {
	t.Helper()
	return apiListAll(t, base, apiHead, url.Values{"stream": {stream}})
}

// goTerms are what an answer must never say: callers send JSON, not Go.
var limitsGoTerms = []string{"Go struct", "Go value", "map[string]", "interface {}", "jsonrpc2", "wireDecode", "mcpserver.", "*mcp."}

func limitsNoGo(t *testing.T, what, s string) {
	t.Helper()
	for _, g := range limitsGoTerms {
		if strings.Contains(s, g) {
			t.Errorf("%s: the answer speaks Go (%q): %s", what, g, s)
		}
	}
}

func TestLimitsOnThreeNodes(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"SPINE_MCP_SESSIONS_PER_TOKEN": "4", "SPINE_MCP_SESSION_IDLE": "3s"})
	leader, followers := apiRoles(t, c)
	L, F1, F2 := leader.URL, followers[0].URL, followers[1].URL

	t.Run("RetentionBounded", func(t *testing.T) {
		reg := api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}, PurgeOlderThanDays: 3}
		apiWant(t, apiDo(t, "PUT", F1+"/api/registry", apiHead, reg), http.StatusOK)
		before := apiWant(t, apiDo(t, "GET", L+"/api/registry", apiHead, nil), http.StatusOK)
		for _, days := range []int{1_000_000, 3651} {
			reg.PurgeOlderThanDays = days
			r := apiDo(t, "PUT", F1+"/api/registry", apiHead, reg)
			apiWantError(t, r, http.StatusBadRequest, "invalid_request")
			if !strings.Contains(string(r.Body), "purge_older_than_days must be 0 to 3650") {
				t.Errorf("%d days: %s", days, r.Body)
			}
		}
		after := apiWant(t, apiDo(t, "GET", L+"/api/registry", apiHead, nil), http.StatusOK)
		if string(after.Body) != string(before.Body) {
			t.Fatalf("a refused registry changed it:\n%s\n%s", before.Body, after.Body)
		}
		// A purge computes its cut-off in the past.
		var pr api.PurgeResult
		apiDecode(t, apiWant(t, apiDo(t, "POST", F2+"/api/purge", apiHead, map[string]any{}), http.StatusOK), &pr)
		if !pr.Before.Before(time.Now().Add(-71 * time.Hour)) {
			t.Fatalf("purge cut-off %v, want three days ago", pr.Before)
		}
	})

	t.Run("RunAtRange", func(t *testing.T) {
		for _, at := range []string{"2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1600-01-01T00:00:00Z",
			time.Now().Add(400 * 24 * time.Hour).UTC().Format(time.RFC3339)} {
			r := apiDo(t, "POST", F1+"/jobs", apiHead, map[string]any{"payload": 1, "stream": "limits-runat", "runAt": at})
			apiWantError(t, r, http.StatusBadRequest, "invalid_request")
			if !strings.Contains(string(r.Body), "runAt must be between 1970-01-01T00:00:00Z and 365 days from now") {
				t.Errorf("runAt %s: %s", at, r.Body)
			}
		}
		code, _, stderr := spineCLI(t, []string{F2}, t.TempDir(), []string{"SPINE_TOKEN=" + apiHead},
			"jobs", "create", "--payload", "1", "--stream", "limits-runat", "--run-at", "2300-01-01T00:00:00Z")
		if code == 0 || !strings.Contains(stderr, "runAt must be between") {
			t.Errorf("spine jobs create --run-at 2300: exit %d, %s", code, stderr)
		}
		if jobs := limitsJobs(t, L, "limits-runat"); len(jobs) != 0 {
			t.Fatalf("refused creates made %d jobs", len(jobs))
		}
		// A past runAt means now.
		j := apiCreate(t, F2, map[string]any{"stream": "limits-runat", "runAt": "2000-01-01T00:00:00Z"})
		if j.Status != "queued" {
			t.Fatalf("runAt in 2000: %+v", j)
		}
	})

	t.Run("CommentLimits", func(t *testing.T) {
		id := apiCreate(t, L, map[string]any{"stream": "limits-comments"}).ID
		const tries = 130
		var (
			wg             sync.WaitGroup
			mu             sync.Mutex
			added, refused int
			other          []string
		)
		nodes := []string{L, F1, F2}
		for i := range tries {
			wg.Go(func() {
				r, err := apiRequest("POST", nodes[i%3]+"/jobs/"+id+"/comment", apiLeft, map[string]string{"text": fmt.Sprint("note ", i)})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					other = append(other, err.Error())
				case r.Status == http.StatusOK:
					added++
				case r.Status == http.StatusConflict && strings.Contains(string(r.Body), `"comment_limit"`):
					refused++
				default:
					other = append(other, r.String())
				}
			})
		}
		wg.Wait()
		if len(other) > 0 || added != 100 || refused != tries-100 {
			t.Fatalf("%d comments added, %d refused (comment_limit), others %v; want 100 and %d", added, refused, other, tries-100)
		}
		apiWantError(t, apiDo(t, "POST", F1+"/jobs/"+id+"/comment", apiHead, map[string]string{"text": "more"}), http.StatusConflict, "comment_limit")
		apiCaughtUp(t, c)
		for _, n := range c.Nodes {
			if j := apiGetJob(t, n.URL, apiHead, id, "?stale"); len(j.Comments) != 100 {
				t.Fatalf("%s holds %d comments", n.ID, len(j.Comments))
			}
		}
		// 256 KiB of comment text in all.
		id2 := apiCreate(t, L, map[string]any{"stream": "limits-comments"}).ID
		big := strings.Repeat("z", 64<<10)
		for range 4 {
			apiWant(t, apiDo(t, "POST", F2+"/jobs/"+id2+"/comment", apiRight, map[string]string{"text": big}), http.StatusOK)
		}
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+id2+"/comment", apiRight, map[string]string{"text": "x"}), http.StatusConflict, "comment_limit")
		if j := apiGetJob(t, L, apiHead, id2, ""); len(j.Comments) != 4 {
			t.Fatalf("the job holds %d comments after the refusal", len(j.Comments))
		}
	})

	t.Run("MuxHeaderLimit", func(t *testing.T) {
		mc, err := wire.Dial(context.Background(), F1, wire.MuxPath, wire.MuxProtocol, apiHead)
		if err != nil {
			t.Fatal(err)
		}
		defer mc.Close()
		h := http.Header{"Authorization": {"Bearer " + apiHead}, "Content-Type": {"application/json"}}
		for i := range 100_000 {
			h[fmt.Sprint("X-", i)] = []string{""}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := mc.RoundTrip(ctx, wire.AppendRequest(nil, "POST", "/jobs", h, []byte(`{"payload":1,"stream":"limits-mux"}`)))
		if err != nil {
			t.Fatal(err)
		}
		var eb api.ErrorBody
		if err := json.NewDecoder(res.Body).Decode(&eb); err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || eb.Error.Code != api.CodeHeadersTooLarge {
			t.Fatalf("a frame with 100,000 headers: %d %+v %v", res.StatusCode, eb, err)
		}
		if jobs := limitsJobs(t, L, "limits-mux"); len(jobs) != 0 {
			t.Fatalf("the refused frame made %d jobs", len(jobs))
		}
	})

	t.Run("UILoginNext", func(t *testing.T) {
		for _, next := range []string{`/ui/../\evil.com`, `/\evil.com`, "//evil.com", "/ui/..//evil.com", "http://evil.com/ui/", "/ui/%2e%2e/%2F%2Fevil.com"} {
			form := "token=" + url.QueryEscape(apiHead) + "&next=" + url.QueryEscape(next)
			r := apiDo(t, "POST", F2+"/ui/login", "", form, "Content-Type", "application/x-www-form-urlencoded")
			if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/ui/" {
				t.Errorf("next=%q: %d Location %q, want /ui/", next, r.Status, r.Header.Get("Location"))
			}
		}
		form := "token=" + url.QueryEscape(apiHead) + "&next=" + url.QueryEscape("/ui/tasks?status=queued")
		if r := apiDo(t, "POST", F2+"/ui/login", "", form, "Content-Type", "application/x-www-form-urlencoded"); r.Header.Get("Location") != "/ui/tasks?status=queued" {
			t.Errorf("a page of the UI: Location %q", r.Header.Get("Location"))
		}
	})

	t.Run("BlobsServedSafely", func(t *testing.T) {
		body, ct := apiMultipart(t, "file", "x.html", "text/html", []byte("<script>alert(document.domain)</script>"))
		var b api.Blob
		apiDecode(t, apiWant(t, apiDo(t, "POST", F1+"/blobs", apiLeft, body, "Content-Type", ct), http.StatusCreated), &b)
		g := apiWant(t, apiDo(t, "GET", F2+"/blobs/"+b.ID, apiRight, nil), http.StatusOK)
		if g.Header.Get("Content-Disposition") != "attachment" || g.Header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(g.Header.Get("Cache-Control"), "private") || !strings.Contains(g.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Fatalf("an HTML blob served with %v", g.Header)
		}
		body, ct = apiMultipart(t, "file", "x.png", "image/png", []byte("\x89PNG\r\n\x1a\nlimits"))
		apiDecode(t, apiWant(t, apiDo(t, "POST", F1+"/blobs", apiLeft, body, "Content-Type", ct), http.StatusCreated), &b)
		g = apiWant(t, apiDo(t, "GET", L+"/blobs/"+b.ID, apiRight, nil), http.StatusOK)
		if g.Header.Get("Content-Disposition") != "" || g.Header.Get("Content-Type") != "image/png" || g.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("a PNG blob served with %v", g.Header)
		}
	})

	t.Run("MCPArguments", func(t *testing.T) {
		j := apiCreate(t, L, map[string]any{"stream": "limits-mcp"})
		claw := mcpConnect(t, F1, apiLeft)
		for _, c := range []struct {
			tool string
			args any
			says string
		}{
			{"claim", map[string]any{"streams": []string{"limits-mcp"}, "wait_seconds": json.RawMessage("9223372036854775807")}, "wait_seconds must be an integer from 0 to 30"},
			{"claim", map[string]any{"streams": []string{"limits-mcp"}, "wait_seconds": json.RawMessage("1e300")}, "wait_seconds must be an integer from 0 to 30"},
			{"claim", map[string]any{"streams": []string{"limits-mcp"}, "wait_seconds": -5}, "wait_seconds must be an integer from 0 to 30, not -5"},
			{"claim", map[string]any{"streams": []string{"limits-mcp"}, "max_jobs": 0}, "max_jobs must be an integer from 1 to 100, not 0"},
			{"claim", []any{1}, "arguments must be a JSON object of named arguments"},
			{"peek", map[string]any{"stream": "limits-mcp", "limit": -1}, "limit must be an integer from 1 to 100, not -1"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := claw.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			cancel()
			if err != nil {
				t.Fatalf("%s %v: %v", c.tool, c.args, err)
			}
			var msg string
			for _, ct := range res.Content {
				if tc, ok := ct.(*mcp.TextContent); ok {
					msg += tc.Text
				}
			}
			if !res.IsError || !strings.Contains(msg, c.tool+" refused: "+c.says) {
				t.Errorf("%s %v: %v %q, want a tool error saying %q", c.tool, c.args, res.IsError, msg, c.says)
			}
			limitsNoGo(t, c.tool, msg)
		}
		if got := apiGetJob(t, L, apiHead, j.ID, ""); got.Status != "queued" || got.Attempts != 0 {
			t.Fatalf("after the refused claims the job is %s with %d attempts", got.Status, got.Attempts)
		}

		// Transport errors: the API's JSON errors, or a JSON-RPC error for
		// a body that is no JSON-RPC message.
		r := limitsMCPPost(t, F1, apiLeft, "", `{"jsonrpc":"2.0","id":1,`)
		var rpc struct {
			JSONRPC string `json:"jsonrpc"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &rpc); err != nil || r.Status != http.StatusBadRequest || rpc.Error.Code != -32700 || rpc.Error.Message == "" {
			t.Errorf("a malformed body: %s", r)
		}
		r = limitsMCPPost(t, F1, apiLeft, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`)
		if err := json.Unmarshal(r.Body, &rpc); err != nil || r.Status != http.StatusBadRequest || rpc.Error.Code != -32602 {
			t.Errorf("params that are not an object: %s", r)
		}
		limitsNoGo(t, "params", string(r.Body))
		apiWantError(t, limitsMCPPost(t, F1, apiLeft, "", limitsInitialize, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type")
		apiWantError(t, limitsMCPPost(t, F1, apiLeft, "no-such-session", `{"jsonrpc":"2.0","id":2,"method":"ping"}`), http.StatusNotFound, "not_found")
	})

	t.Run("MCPSessions", func(t *testing.T) {
		// F2 serves no other test's MCP session.
		var sids []string
		for range 4 {
			r := limitsMCPPost(t, F2, apiLeft, "", limitsInitialize)
			if r.Status != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize: %s", r)
			}
			sids = append(sids, r.Header.Get("Mcp-Session-Id"))
		}
		r := limitsMCPPost(t, F2, apiLeft, "", limitsInitialize)
		apiWantError(t, r, http.StatusTooManyRequests, "too_many_sessions")
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After: %v", r.Header)
		}
		for range 30 {
			apiWantError(t, limitsMCPPost(t, F2, apiLeft, "", limitsInitialize), http.StatusTooManyRequests, "too_many_sessions")
		}
		if n := limitsMCPSessions(t, F2); n != 4 {
			t.Fatalf("%d MCP sessions open on %s after 31 refused initializes, want 4", n, followers[1].ID)
		}
		// Another token still gets a session.
		if r := limitsMCPPost(t, F2, apiRight, "", limitsInitialize); r.Status != http.StatusOK {
			t.Fatalf("another token's initialize: %s", r)
		}
		// Idle sessions end (SPINE_MCP_SESSION_IDLE=3s), and give their places back.
		apiEventually(t, 60*time.Second, "the idle MCP sessions to end", func() error {
			if n := limitsMCPSessions(t, F2); n != 0 {
				return fmt.Errorf("%d sessions open", n)
			}
			return nil
		})
		r = limitsMCPPost(t, F2, apiLeft, sids[0], `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		apiWantError(t, r, http.StatusNotFound, "not_found")
		if !strings.Contains(string(r.Body), "held_jobs") {
			t.Errorf("the 404 of an ended session does not say how to take its leases over: %s", r.Body)
		}
		if r := limitsMCPPost(t, F2, apiLeft, "", limitsInitialize); r.Status != http.StatusOK {
			t.Fatalf("an initialize once the idle sessions ended: %s", r)
		}
	})
}
