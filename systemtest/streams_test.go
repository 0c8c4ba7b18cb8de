package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// An operator's pause holds across a leader kill: a stream paused through
// a follower stays paused on the new leader (claims skip it, a claim by id
// is refused, producers still add jobs, GET /streams shows it on every
// node, the killed node included once back); the resume, through another
// follower, hands out the jobs in their order.
func TestStreamPauseAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "pausable"
	create := func(url string) string {
		t.Helper()
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/jobs", apiHead, map[string]any{"stream": stream, "payload": map[string]int{"n": 1}}), http.StatusCreated), &j)
		return j.ID
	}
	var ids []string
	for range 3 {
		ids = append(ids, create(fs[0].URL))
	}
	var st api.StreamInfo
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/streams/"+stream+"/pause", apiHead, map[string]string{"reason": "drill"}), http.StatusOK), &st)
	if !st.Paused || st.Queued != 3 || st.Pause.Reason != "drill" {
		t.Fatalf("pause answer %+v", st)
	}
	claim := func(url string) api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w", Streams: []string{stream}}), http.StatusOK), &wc)
		return wc
	}
	if wc := claim(fs[1].URL); wc.Claimed {
		t.Fatalf("claimed %s from a paused stream", wc.JobID)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var other = fs[0]
	if other == nl {
		other = fs[1]
	}
	ids = append(ids, create(other.URL)) // producers go on
	if wc := claim(nl.URL); wc.Claimed {
		t.Fatalf("the new leader handed out %s from the paused stream", wc.JobID)
	}
	apiWantError(t, apiDo(t, "POST", other.URL+"/jobs/"+ids[0]+"/claim", apiLeft, map[string]any{}), http.StatusConflict, "stream_paused")
	apiDecode(t, apiWant(t, apiDo(t, "GET", nl.URL+"/streams/"+stream+"?consistent", apiRight, nil), http.StatusOK), &st)
	if !st.Paused || st.Queued != 4 {
		t.Fatalf("the new leader shows %+v", st)
	}

	// The killed node comes back with the pause, from its own log.
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the restarted node to show the pause", func() error {
		var l api.StreamList
		r, err := apiRequest("GET", leader.URL+"/streams?stale", apiHead, nil)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(r.Body, &l); err != nil {
			return err
		}
		for _, s := range l.Streams {
			if s.Name == stream && s.Paused && s.Queued == 4 {
				return nil
			}
		}
		return fmt.Errorf("%s answers %s", leader.ID, r.Body)
	})

	apiDecode(t, apiWant(t, apiDo(t, "POST", other.URL+"/streams/"+stream+"/resume", apiHead, nil), http.StatusOK), &st)
	if st.Paused {
		t.Fatalf("resume answer %+v", st)
	}
	for i, want := range ids {
		if wc := claim(c.Nodes[i%3].URL); !wc.Claimed || wc.JobID != want {
			t.Fatalf("claim %d after the resume: %+v, want %s", i, wc, want)
		}
	}
}

// The job-control verbs of the CLI, as the README shows them: a job with
// a priority, a delay, a backoff and a concurrency key; its cancel; a
// stream's pause, stats and resume.
func TestJobControlCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	head := []string{"SPINE_TOKEN=" + apiHead}
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := spineCLI(t, c.URLs(), t.TempDir(), head, args...)
		if code != 0 {
			t.Fatalf("spine %v: exit %d: %s %s", args, code, out, errOut)
		}
		return out
	}
	out := run("jobs", "create", "--payload", `{"doc":7}`, "--stream", "cli", "--priority", "5", "--delay", "30s",
		"--backoff", "5s", "--concurrency-key", "tenant-7", "--output", "json")
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("jobs create: %v: %s", err, out)
	}
	if j.Priority != 5 || j.RunAt.IsZero() || j.Backoff == nil || j.Backoff.Base != 5 || j.ConcurrencyKey != "tenant-7" || j.ConcurrencyLimit != 1 {
		t.Fatalf("created %+v", j)
	}
	if out := run("jobs", "cancel", j.ID, "--reason", "superseded"); !strings.Contains(out, "cancelled") {
		t.Fatalf("jobs cancel: %s", out)
	}
	run("stream", "pause", "cli", "--reason", "bad deploy")
	if out := run("stream", "stats"); !strings.Contains(out, "cli") || !strings.Contains(out, "bad deploy") {
		t.Fatalf("stream stats: %s", out)
	}
	run("stream", "resume", "cli")
	if out := run("stream", "stats", "cli", "--output", "json"); !strings.Contains(out, `"paused": false`) && !strings.Contains(out, `"paused":false`) {
		t.Fatalf("stream stats cli after the resume: %s", out)
	}
}

// A claw finds every node's address in GET /cluster/nodes, and sees a
// killed node there as not alive: where to go when its node dies.
func TestClusterNodesForClaws(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	_, fs := apiRoles(t, c)
	var got api.ClusterNodes
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/cluster/nodes", apiLeft, nil), http.StatusOK), &got)
	if len(got.Nodes) != 3 || got.Leader == "" {
		t.Fatalf("nodes %+v", got)
	}
	for _, n := range got.Nodes {
		if !n.Alive || n.HTTPAddr == "" || n.Leader != (n.ID == got.Leader) {
			t.Fatalf("node %+v of %+v", n, got)
		}
	}
	apiWantError(t, apiDo(t, "GET", fs[0].URL+"/cluster/nodes", "", nil), http.StatusUnauthorized, "unauthorized")
	if err := c.Kill(fs[1]); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the killed node to show not alive", func() error {
		var now api.ClusterNodes
		if err := apiGet(fs[0].URL+"/cluster/nodes", apiRight, &now); err != nil {
			return err
		}
		for _, n := range now.Nodes {
			if n.ID == fs[1].ID && n.Alive {
				return fmt.Errorf("%s still alive", n.ID)
			}
		}
		return nil
	})
	if err := c.Restart(fs[1]); err != nil {
		t.Fatal(err)
	}
}

// A stream's job defaults hold across a leader kill: set with the CLI
// through the cluster, they are written into the jobs created through the
// new leader's followers after the kill, so at most the default limit of
// the stream's jobs run at once; the killed node comes back with them.
func TestStreamDefaultsAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, _ := apiRoles(t, c)
	const stream = "gpu"
	head := []string{"SPINE_TOKEN=" + apiHead}
	code, out, errOut := spineCLI(t, c.URLs(), t.TempDir(), head, "stream", "defaults", stream, "--concurrency-key", "gpu-box", "--concurrency-limit", "2", "--output", "table")
	if code != 0 || !strings.Contains(out, "key gpu-box, limit 2") {
		t.Fatalf("spine stream defaults: exit %d: %s %s", code, out, errOut)
	}
	if code, _, _ := spineCLI(t, c.URLs(), t.TempDir(), head, "stream", "defaults", stream); code != 2 {
		t.Fatalf("spine stream defaults without a flag: exit %d, want 2", code)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var other *testcluster.Node
	for _, n := range c.Nodes {
		if n != leader && n != nl {
			other = n
		}
	}
	var ids []string
	for range 3 {
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", other.URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 1}), http.StatusCreated), &j)
		if j.ConcurrencyKey != "gpu-box" || j.ConcurrencyLimit != 2 {
			t.Fatalf("a job created after the failover: key %q limit %d", j.ConcurrencyKey, j.ConcurrencyLimit)
		}
		ids = append(ids, j.ID)
	}
	claim := func(url, worker string) api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: worker, Streams: []string{stream}}), http.StatusOK), &wc)
		return wc
	}
	first, second := claim(nl.URL, "w1"), claim(other.URL, "w2")
	if !first.Claimed || !second.Claimed || first.JobID != ids[0] || second.JobID != ids[1] {
		t.Fatalf("the first two claims: %+v, %+v", first, second)
	}
	if wc := claim(other.URL, "w3"); wc.Claimed {
		t.Fatalf("a third job of a stream limited to 2 ran: %s", wc.JobID)
	}
	apiWant(t, apiDo(t, "POST", other.URL+"/internal/worker/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "w1",
		JobID: first.JobID, AttemptID: first.AttemptID, LeaseToken: first.LeaseToken, Result: []byte(`1`)}), http.StatusOK)
	if wc := claim(nl.URL, "w3"); !wc.Claimed || wc.JobID != ids[2] {
		t.Fatalf("after a complete: %+v, want %s", wc, ids[2])
	}

	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the restarted node to show the defaults", func() error {
		r, err := apiRequest("GET", leader.URL+"/streams/"+stream+"?stale", apiHead, nil)
		if err != nil {
			return err
		}
		var st api.StreamInfo
		if err := json.Unmarshal(r.Body, &st); err != nil {
			return err
		}
		if d := st.Defaults; d == nil || d.ConcurrencyKey != "gpu-box" || d.ConcurrencyLimit != 2 || st.Running != 2 {
			return fmt.Errorf("%s answers %s", leader.ID, r.Body)
		}
		return nil
	})
}
