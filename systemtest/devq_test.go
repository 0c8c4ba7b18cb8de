package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// devqRetry sends a request until a node answers something other than 503
// (an election in progress) and returns that answer.
func devqRetry(t *testing.T, method, u, token string, body interface{}) *apiResp {
	t.Helper()
	var last *apiResp
	apiEventually(t, 30*time.Second, method+" "+u, func() error {
		r, err := apiRequest(method, u, token, body)
		if err != nil {
			return err
		}
		last = r
		if r.Status == http.StatusServiceUnavailable {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	return last
}

func devqTask(t *testing.T, r *apiResp, status int) api.Task {
	t.Helper()
	apiWant(t, r, status)
	var v api.Task
	apiDecode(t, r, &v)
	return v
}

// The developer queue on three processes: set up through followers, the
// same task on every node, a complete that survives the leader's death and
// lands once, auto-fail at twice a tiny timeout from the registry, and a
// purge that leaves queued and running tasks alone.
func TestDevQueueOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"REAPER_INTERVAL_MS": "100", "SPINE_LEASE_GRACE_MS": "0"})
	leader, fs := apiRoles(t, c)
	f := fs[0].URL
	reg := api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}, {Name: "tiny", TaskClass: "FAST_SCRIPT", Timeout: 1}}}
	apiWant(t, apiDo(t, "PUT", f+"/api/registry", apiHead, reg), 200)
	// A broken registry changes nothing.
	apiWantError(t, apiDo(t, "PUT", f+"/api/registry", apiHead, api.Registry{Tools: []api.Tool{{Name: "x", TaskClass: "NOPE"}}}), 400, api.CodeInvalidRequest)
	apiWant(t, apiDo(t, "POST", f+"/api/sessions", apiHead, api.SessionCreateRequest{Name: "api-v2"}), 201)
	apiWant(t, apiDo(t, "POST", f+"/api/streams", apiHead, api.StreamCreateRequest{Name: "auth", Session: "api-v2", Instructions: "JWT per PRD 4.2"}), 201)

	enqueue := func(base, tool string) api.Task {
		t.Helper()
		return devqTask(t, apiDo(t, "POST", base+"/api/tasks", apiHead, api.EnqueueRequest{ToolName: tool, Stream: "auth",
			Payload: json.RawMessage(`{"n":1}`)}), 201)
	}
	tk := enqueue(f, "run-bash")

	// Every node serves the same task, from its own state too.
	apiCaughtUp(t, c)
	var seen []string
	for _, n := range c.Nodes {
		for _, q := range []string{"", "?stale"} {
			v := devqTask(t, apiDo(t, "GET", n.URL+"/api/tasks/"+tk.ID+q, apiLeft, nil), 200)
			if v.ID != tk.ID || v.Timeout != 300 || v.Stream.Instructions != "JWT per PRD 4.2" || v.Status != api.TaskQueued {
				t.Fatalf("%s%s: %+v", n.ID, q, v)
			}
			b, _ := json.Marshal(v)
			seen = append(seen, string(b))
		}
	}
	for _, s := range seen[1:] {
		if s != seen[0] {
			t.Fatalf("nodes disagree on the task:\n%s\n%s", seen[0], s)
		}
	}

	// Claimed through a follower; the leader dies before the complete,
	// which still lands, once.
	claim := api.TaskClaimRequest{Stream: "auth", ClaimID: "failover-claim-1"}
	cl := devqTask(t, apiDo(t, "POST", f+"/api/claim", apiLeft, claim), 200)
	if cl.ID != tk.ID || cl.LeaseToken == "" || cl.Stream.Instructions != "JWT per PRD 4.2" {
		t.Fatalf("claim: %+v", cl)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// The claim repeated by its key on the new leader (its answer lost,
	// say) answers the same task and lease.
	if re := devqTask(t, devqRetry(t, "POST", fs[1].URL+"/api/claim", apiLeft, claim), 200); re.ID != cl.ID ||
		re.LeaseToken != cl.LeaseToken || re.Attempts != 1 {
		t.Fatalf("keyed claim repeated after the leader's death: %+v, first %+v", re, cl)
	}
	done := devqTask(t, devqRetry(t, "POST", fs[1].URL+"/api/tasks/"+tk.ID+"/complete", apiLeft,
		api.TaskCompleteRequest{LeaseToken: cl.LeaseToken, Result: json.RawMessage(`{"summary":"done across a failover"}`)}), 200)
	if done.Status != api.TaskSucceeded {
		t.Fatalf("complete after the leader's death: %+v", done)
	}
	// The worker retries (its answer lost, say): the first answer again.
	again := devqRetry(t, "POST", f+"/api/tasks/"+tk.ID+"/complete", apiLeft,
		api.TaskCompleteRequest{LeaseToken: cl.LeaseToken, AttemptID: cl.AttemptID, Result: json.RawMessage(`{"summary":"done across a failover"}`)})
	apiWant(t, again, 200)
	events := apiEvents(t, f, apiHead, tk.ID)
	completed := 0
	for _, e := range events {
		if e.Type == "completed" {
			completed++
		}
	}
	if completed != 1 {
		t.Fatalf("%d completed events, want 1: %+v", completed, events)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}

	// A tool with a 1 s timeout: claimed and abandoned, it is auto-failed
	// at 2 s by the (new) leader's reaper.
	ab := enqueue(f, "tiny")
	apiWant(t, devqRetry(t, "POST", f+"/api/claim", apiRight, api.TaskClaimRequest{Stream: "auth"}), 200)
	apiEventually(t, 20*time.Second, "the abandoned task to be auto-failed", func() error {
		v := devqTask(t, apiDo(t, "GET", f+"/api/tasks/"+ab.ID, apiLeft, nil), 200)
		if v.Status != api.TaskFailed {
			return fmt.Errorf("task is %s", v.Status)
		}
		if !v.AutoFailed || v.Error != "Auto-failed: task exceeded 2x timeout (1s) with no complete/fail reported. Likely worker crash or disconnect." {
			t.Fatalf("auto-failed task: %+v", v)
		}
		return nil
	})

	// Purge of everything finished: the queued and the running task stay.
	first := enqueue(f, "run-bash")
	second := enqueue(f, "run-bash")
	apiWant(t, devqRetry(t, "POST", f+"/api/claim", apiLeft, api.TaskClaimRequest{Stream: "auth"}), 200) // first runs, second waits
	var pr api.PurgeResult
	apiDecode(t, apiWant(t, devqRetry(t, "POST", f+"/api/purge", apiHead, api.PurgeRequest{OlderThan: "0s"}), 200), &pr)
	if pr.Purged != 2 {
		t.Fatalf("purged %d, want the succeeded and the auto-failed task", pr.Purged)
	}
	var list api.TaskList
	apiDecode(t, apiDo(t, "GET", f+"/api/tasks?"+url.Values{"stream": {"auth"}}.Encode(), apiLeft, nil), &list)
	var left []string
	for _, v := range list.Tasks {
		left = append(left, v.ID+":"+v.Status)
	}
	if len(list.Tasks) != 2 || !strings.Contains(strings.Join(left, " "), first.ID+":running") || !strings.Contains(strings.Join(left, " "), second.ID+":queued") {
		t.Fatalf("after the purge: %v", left)
	}
}
