package systemtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// badRaw sends raw on a new connection to addr, closes its sending side
// when half is set, and reads the answer. A stalled request leaves the
// connection open: the server's read timeout answers it.
func badRaw(t *testing.T, addr, raw string, half bool) *apiResp {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	if half {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	return badReadAnswer(t, conn, raw)
}

func badReadAnswer(t *testing.T, conn net.Conn, what string) *apiResp {
	t.Helper()
	// Only so that a broken node fails the test instead of hanging it.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %.80q: %v", what, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &apiResp{Method: "raw", URL: strings.SplitN(what, "\r\n", 2)[0], Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// badWant asserts the API's JSON error with status and code, a message
// that says want (when given) and names none of the nodes' addresses nor
// Go's terms; it returns the message.
func badWant(t *testing.T, c *testcluster.Cluster, r *apiResp, status int, code, want string) string {
	t.Helper()
	apiWantError(t, r, status, code)
	var eb apiErrorBody
	apiDecode(t, r, &eb)
	msg := eb.Error.Message
	if want != "" && !strings.Contains(msg, want) {
		t.Errorf("%s: message does not say %q", r, want)
	}
	leaks := []string{"127.0.0.1", "read tcp", "i/o timeout", "2006-01-02", "Go struct", "json:", "create-ex", "create-requires", "int64"}
	for _, n := range c.Nodes {
		leaks = append(leaks, n.HTTPAddr, n.RaftAddr, n.GossipAddr)
	}
	for _, l := range leaks {
		if strings.Contains(string(r.Body), l) {
			t.Errorf("%s: the answer names %q", r, l)
		}
	}
	return msg
}

// The bad inputs of an attacker's probe, sent to the leader and to a
// follower of a real cluster: each is refused with the API's JSON error
// and its status, in the API's terms, and nothing changes (the registry is
// still there, the leader did not move, the job still runs under its
// lease, no job was created, no node left); no node logs an error.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, followers := apiRoles(t, c)
	base := leader.URL

	// State to keep: a registry, a gateway and worker, a running job.
	reg := map[string]interface{}{"project": map[string]string{"name": "p"}, "tools": []map[string]string{{"name": "run-bash", "task_class": "FAST_SCRIPT"}}}
	apiWant(t, apiDo(t, "PUT", base+"/api/registry", apiHead, reg), http.StatusOK)
	apiWant(t, apiDo(t, "POST", base+"/v1/gateways", apiHead, map[string]interface{}{"id": "g1", "address": "http://g1.test", "capacity": 2}), http.StatusCreated)
	apiWant(t, apiDo(t, "POST", base+"/v1/workers", apiLeft, map[string]interface{}{"id": "w1", "gateway": "g1", "capacity": 1}), http.StatusCreated)
	job := apiCreate(t, base, nil)
	claim := apiJobOf(t, apiPost(t, base, "/jobs/"+job.ID+"/claim", apiLeft, map[string]string{}, http.StatusOK))
	registry := func(node *testcluster.Node) string {
		return string(apiWant(t, apiDo(t, "GET", node.URL+"/api/registry", apiHead, nil), http.StatusOK).Body)
	}
	regBefore := registry(leader)

	// Stalled bodies, one per node, answered by the read timeout (60 s)
	// while the rest runs.
	head := func(method, path, token string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: spine\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\n"
	}
	type stalled struct {
		node *testcluster.Node
		conn net.Conn
	}
	var stalls []stalled
	for _, n := range []*testcluster.Node{leader, followers[0]} {
		conn, err := net.Dial("tcp", n.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, head("POST", "/jobs", apiHead)+"Content-Length: 100\r\n\r\n{\"payload\":"); err != nil {
			t.Fatal(err)
		}
		stalls = append(stalls, stalled{n, conn})
	}

	for _, n := range []*testcluster.Node{leader, followers[0]} {
		t.Logf("sending to %s", n.ID)
		u := n.URL
		post := func(path, token, body string, hdr ...string) *apiResp {
			return apiDo(t, "POST", u+path, token, body, append([]string{"Content-Type", "application/json"}, hdr...)...)
		}
		// 1. null and other non-objects.
		badWant(t, c, apiDo(t, "PUT", u+"/api/registry", apiHead, ""), 400, "invalid_request", "the body is required")
		badWant(t, c, apiDo(t, "PUT", u+"/api/registry", apiHead, "null", "Content-Type", "application/json"), 400, "invalid_request", "not null")
		badWant(t, c, post("/cluster/transfer-leader", apiHead, "null"), 400, "invalid_request", "not null")
		badWant(t, c, post("/jobs/"+job.ID+"/complete", apiHead, "null"), 400, "invalid_request", "not null")
		badWant(t, c, post("/jobs/"+job.ID+"/complete", apiLeft, "null"), 400, "invalid_request", "not null")
		for _, b := range []string{"[]", `"x"`, "1"} {
			badWant(t, c, post("/jobs", apiHead, b), 400, "invalid_request", "must be a JSON object")
		}
		// 2. Bodies cut short or badly chunked (the stalled ones below).
		badWant(t, c, badRaw(t, n.HTTPAddr, head("POST", "/jobs", apiHead)+"Content-Length: 100\r\n\r\n{\"payload\":1", true),
			400, "invalid_request", "Content-Length")
		badWant(t, c, badRaw(t, n.HTTPAddr, head("POST", "/jobs", apiHead)+"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", false),
			400, "invalid_request", "chunked")
		// 3. Go's terms.
		badWant(t, c, post("/jobs", apiHead, `{"payload":1,"runAt":"tomorrow"}`), 400, "invalid_request",
			"runAt must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		big := strings.Repeat("x", 400<<10)
		for _, extra := range []string{"", `,"requires":["gpu"]`, `,"priority":1`} {
			badWant(t, c, post("/jobs", apiHead, fmt.Sprintf(`{"payload":%q%s}`, big, extra)), 413, "too_large", "the job is too large")
		}
		// 4. A path Go's server refuses.
		badWant(t, c, badRaw(t, n.HTTPAddr, "GET /jobs/%zz HTTP/1.1\r\nHost: spine\r\n\r\n", false), 400, "invalid_request", "")
		// 5. Lenient inputs.
		badWant(t, c, post("/jobs", apiHead, "{\"payload\":{\"note\":\"caf\xe9\"}}"), 400, "invalid_request", `field "payload.note"`)
		badWant(t, c, apiDo(t, "GET", u+"/jobs?consistent=maybe", apiHead, nil), 400, "invalid_request", "?consistent")
		badWant(t, c, apiDo(t, "GET", u+"/jobs/"+job.ID+"?stale=maybe", apiHead, nil), 400, "invalid_request", "?stale")
		badWant(t, c, post("/cluster/remove", apiHead, `{"node_id":"`+strings.Repeat("n", 100<<10)+`"}`), 400, "invalid_request", "letters, digits")
		badWant(t, c, post("/cluster/remove", apiHead, `{"node_id":"n1\u0000"}`), 400, "invalid_request", "letters, digits")
		badWant(t, c, post("/v1/gateways/g1/heartbeat", apiHead, `{bad`), 400, "invalid_json", "")
		badWant(t, c, post("/v1/workers/w1/heartbeat", apiLeft, `{bad`), 400, "invalid_json", "")
		badWant(t, c, apiDo(t, "POST", u+"/v1/gateways/g1/heartbeat", apiHead, "{}", "Content-Type", "text/plain"), 415, "unsupported_media_type", "")
		badWant(t, c, apiDo(t, "POST", u+"/v1/workers/w1/heartbeat", apiLeft, "{}", "Content-Type", "text/plain"), 415, "unsupported_media_type", "")
		// A heartbeat without a body is still fine.
		apiWant(t, apiDo(t, "POST", u+"/v1/workers/w1/heartbeat", apiLeft, nil), http.StatusOK)
	}

	for _, s := range stalls {
		r := badReadAnswer(t, s.conn, "stalled POST /jobs to "+s.node.ID)
		badWant(t, c, r, http.StatusRequestTimeout, "request_timeout", "read timeout")
	}

	// Nothing changed, on any node.
	apiCaughtUp(t, c)
	if l, _ := apiRoles(t, c); l.ID != leader.ID {
		t.Errorf("the leader moved from %s to %s", leader.ID, l.ID)
	}
	for _, n := range c.Nodes {
		if got := registry(n); got != regBefore {
			t.Errorf("%s: the registry changed:\n%s\n%s", n.ID, regBefore, got)
		}
		j := apiGetJob(t, n.URL, apiHead, job.ID, "?stale")
		if j.Status != "running" || j.AttemptID != claim.AttemptID || j.Attempts != 1 {
			t.Errorf("%s: the job is %s, attempt %s (%d), want running under %s", n.ID, j.Status, j.AttemptID, j.Attempts, claim.AttemptID)
		}
		if jobs := apiListAll(t, n.URL, apiHead, url.Values{"stale": {""}}); len(jobs) != 1 {
			t.Errorf("%s: %d jobs, want the one", n.ID, len(jobs))
		}
		var nodes struct {
			Nodes []json.RawMessage `json:"nodes"`
		}
		apiDecode(t, apiWant(t, apiDo(t, "GET", n.URL+"/cluster/nodes", apiHead, nil), http.StatusOK), &nodes)
		if len(nodes.Nodes) != 3 {
			t.Errorf("%s: %d nodes", n.ID, len(nodes.Nodes))
		}
		// No error logged for any of it (each was an ERROR line before).
		log, _ := os.ReadFile(n.LogPath)
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "request failed") || strings.Contains(line, "[ERROR]") && strings.Contains(line, "spine.http") {
				t.Errorf("%s logged: %s", n.ID, line)
			}
		}
	}
}
