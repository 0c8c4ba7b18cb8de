package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
)

// The probe's reproductions on three processes: a claw cannot take, read,
// heartbeat or finish the other claw's jobs by naming the other role, the
// other role's worker id or agent id, or by presenting its lease token; a
// job it may not read is answered as an unknown id; its stream counts
// leave the other role's jobs out. The leader is killed half way: the
// rules and the worker ids' bindings are the replicated state's, so the
// new leader and the restarted node answer alike.
func TestClawCannotPoseAsTheOtherRoleAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	apiEventually(t, 30*time.Second, "the cluster level raised on every node", func() error {
		for _, n := range c.Nodes {
			var st api.ClusterStatus
			r := apiDo(t, "GET", n.URL+"/cluster/status?stale", apiHead, nil)
			apiDecode(t, r, &st)
			if st.Level < 1 {
				return fmt.Errorf("%s at level %d", n.ID, st.Level)
			}
		}
		return nil
	})
	f := fs[0].URL
	apiWant(t, apiDo(t, "POST", f+"/v1/gateways", apiHead, map[string]any{"id": "gw-1", "address": "http://10.0.0.7:7000", "capacity": 4}), http.StatusCreated)
	// The right claw's work: a job for its role, one for its worker rw
	// (held under rw's lease), and an untargeted one it holds.
	forRight := apiCreate(t, f, map[string]interface{}{"stream": "r", "target": "right_claw", "payload": map[string]string{"s": "right-secret"}}).ID
	held := apiCreate(t, f, map[string]interface{}{"stream": "w", "target": "rw", "payload": map[string]string{"s": "held-secret"}}).ID
	shared := apiCreate(t, f, map[string]interface{}{"stream": "s"}).ID
	claim := func(base, token, worker, stream string) api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/internal/worker/claim", token, api.WorkerClaimRequest{WorkerID: worker, Streams: []string{stream}}), http.StatusOK), &wc)
		return wc
	}
	h := claim(fs[1].URL, apiRight, "rw", "w")
	s := claim(f, apiRight, "rw", "s")
	if h.JobID != held || s.JobID != shared {
		t.Fatalf("the right claw claimed %s and %s", h.JobID, s.JobID)
	}

	poses := func(base string) {
		t.Helper()
		// A role's name is no worker id, on every claim surface.
		for _, r := range []*apiResp{
			apiDo(t, "POST", base+"/jobs/"+forRight+"/claim", apiLeft, map[string]string{"workerId": "right_claw"}),
			apiDo(t, "POST", base+"/internal/worker/claim", apiLeft, map[string]any{"worker_id": "right_claw", "streams": []string{"r", "w", "s"}}),
			apiDo(t, "POST", base+"/v1/tasks/claim", apiLeft, map[string]any{"agent_id": "right_claw", "streams": []string{"r"}}),
			apiDo(t, "GET", base+"/v1/tasks/next?agent_id=right_claw&streams=r", apiLeft, nil),
		} {
			apiWantError(t, r, http.StatusBadRequest, "invalid_request")
		}
		// The right claw's worker id is the right claw's.
		for _, r := range []*apiResp{
			apiDo(t, "POST", base+"/internal/worker/claim", apiLeft, map[string]any{"worker_id": "rw", "streams": []string{"w"}}),
			apiDo(t, "POST", base+"/v1/tasks/claim", apiLeft, map[string]any{"agent_id": "rw", "streams": []string{"w"}}),
			apiDo(t, "GET", base+"/v1/tasks/next?agent_id=rw&streams=w", apiLeft, nil),
			apiDo(t, "POST", base+"/v1/workers", apiLeft, map[string]any{"id": "rw", "gateway": "none", "capacity": 1}),
			apiDo(t, "GET", base+"/internal/worker/held?worker_id=rw", apiLeft, nil),
		} {
			apiWantError(t, r, http.StatusForbidden, "worker_id_taken")
		}
		// Gateways are head's: a claw neither removes one nor registers one
		// that head's routing would send jobs to.
		apiWantError(t, apiDo(t, "DELETE", base+"/v1/gateways/gw-1", apiLeft, nil), http.StatusForbidden, "forbidden")
		apiWantError(t, apiDo(t, "POST", base+"/v1/gateways", apiRight, map[string]any{"id": "gw-evil", "address": "http://10.6.6.6:1", "capacity": 9}), http.StatusForbidden, "forbidden")
		apiWant(t, apiDo(t, "GET", base+"/v1/gateways/gw-1", apiLeft, nil), http.StatusOK)
		apiWantError(t, apiDo(t, "GET", base+"/v1/gateways/gw-evil", apiLeft, nil), http.StatusNotFound, "not_found")
		// A job the left claw may not read is an unknown id, whatever it
		// calls and whatever it carries.
		unknown := "00000000-0000-4000-8000-000000000000"
		for _, call := range []struct{ method, path string }{
			{"GET", "/jobs/%s"}, {"GET", "/v1/tasks/%s"}, {"POST", "/jobs/%s/claim"},
			{"POST", "/jobs/%s/heartbeat"}, {"POST", "/jobs/%s/complete"}, {"POST", "/jobs/%s/fail"}, {"POST", "/jobs/%s/release"},
			{"POST", "/jobs/%s/comment"}, {"POST", "/v1/tasks/%s/complete"},
		} {
			for _, id := range []string{held, forRight} {
				body := map[string]any{"leaseToken": h.LeaseToken, "attemptId": h.AttemptID}
				if call.method == "GET" {
					body = nil
				} else if strings.HasSuffix(call.path, "/comment") {
					body = map[string]any{"text": "hi"}
				} else if strings.HasSuffix(call.path, "/claim") {
					body = map[string]any{"workerId": "lw"}
				} else if strings.HasPrefix(call.path, "/v1/") {
					body = map[string]any{"lease_token": h.LeaseToken, "attempt_id": h.AttemptID, "result": map[string]string{"summary": "x"}}
				}
				got := apiDo(t, call.method, base+fmt.Sprintf(call.path, id), apiLeft, body)
				want := apiDo(t, call.method, base+fmt.Sprintf(call.path, unknown), apiLeft, body)
				apiWantError(t, got, http.StatusNotFound, "not_found")
				if g, w := strings.ReplaceAll(string(got.Body), id, "ID"), strings.ReplaceAll(string(want.Body), unknown, "ID"); g != w {
					t.Errorf("%s %s: %s, an unknown id %s", call.method, call.path, g, w)
				}
			}
		}
		for _, path := range []string{"heartbeat", "complete", "fail", "release"} {
			body := map[string]any{"worker_id": "lw", "job_id": held, "attempt_id": h.AttemptID, "lease_token": h.LeaseToken,
				"error": map[string]string{"message": "x"}}
			if path != "fail" {
				delete(body, "error")
			}
			r := apiDo(t, "POST", base+"/internal/worker/"+path, apiLeft, body)
			if r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), `"not_found"`) {
				t.Errorf("worker %s of the held job: %s", path, r)
			}
		}
		// A lease token is not an identity: the right claw's token on a
		// job both may read.
		apiWantError(t, apiDo(t, "POST", base+"/jobs/"+shared+"/complete", apiLeft, map[string]any{"leaseToken": s.LeaseToken, "result": 1}), http.StatusForbidden, "not_owner")
		apiWantError(t, apiDo(t, "POST", base+"/jobs/"+shared+"/heartbeat", apiLeft, map[string]any{"leaseToken": s.LeaseToken}), http.StatusForbidden, "not_owner")
		r := apiDo(t, "POST", base+"/internal/worker/complete", apiLeft, map[string]any{"worker_id": "lw", "job_id": shared,
			"attempt_id": s.AttemptID, "lease_token": s.LeaseToken, "result": 1})
		if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), `"not_owner"`) {
			t.Errorf("worker complete with the right claw's token: %s", r)
		}
		// Lists and counts leave the right claw's jobs out.
		for _, path := range []string{"/jobs?limit=1000", "/streams", "/v1/agents", "/v1/state", "/api/status"} {
			r := apiWant(t, apiDo(t, "GET", base+path, apiLeft, nil), http.StatusOK)
			for _, secret := range []string{held, forRight, "right-secret", "held-secret", h.LeaseToken, s.LeaseToken} {
				if strings.Contains(string(r.Body), secret) {
					t.Errorf("GET %s as the left claw carries %q", path, secret)
				}
			}
		}
		var streams api.StreamList
		apiDecode(t, apiDo(t, "GET", base+"/streams", apiLeft, nil), &streams)
		for _, st := range streams.Streams {
			if st.Name == "r" || st.Name == "w" {
				t.Errorf("the left claw sees stream %s: %+v", st.Name, st)
			}
			if st.Name == "s" && st.Running != 1 {
				t.Errorf("stream s as the left claw: %+v", st)
			}
		}
		apiDecode(t, apiDo(t, "GET", base+"/streams", apiRight, nil), &streams)
		queued := map[string]int{}
		for _, st := range streams.Streams {
			queued[st.Name] = st.Queued + st.Running
		}
		if queued["r"] != 1 || queued["w"] != 1 {
			t.Errorf("the right claw's streams: %+v", streams.Streams)
		}
		// The MCP tools, through the same rules.
		cs := mcpConnect(t, base, apiLeft)
		for _, worker := range []string{"right_claw", "rw"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"worker_id": worker, "streams": []string{"w"}, "wait_seconds": 0}})
			cancel()
			if err != nil || !res.IsError {
				t.Errorf("MCP claim as %s: %v %+v", worker, err, res)
			}
		}
	}
	poses(leader.URL)
	poses(fs[1].URL)

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	poses(nl.URL)
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	poses(leader.URL)

	// The right claw finishes its work with its leases, on the new leader.
	apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/complete", apiRight, map[string]any{"worker_id": "rw", "job_id": held,
		"attempt_id": h.AttemptID, "lease_token": h.LeaseToken, "result": map[string]int{"ok": 1}}), http.StatusOK)
	apiWant(t, apiDo(t, "POST", leader.URL+"/jobs/"+shared+"/complete", apiRight, map[string]any{"leaseToken": s.LeaseToken, "result": 1}), http.StatusOK)
	for _, id := range []string{held, shared} {
		if j := apiGetJob(t, leader.URL, apiHead, id, "?consistent"); j.Status != "done" {
			t.Fatalf("job %s is %s", id, j.Status)
		}
	}
	apiWantError(t, apiDo(t, "GET", nl.URL+"/jobs/"+held, apiLeft, nil), http.StatusNotFound, "not_found")
}
