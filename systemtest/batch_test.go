package systemtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A batch claim hands out many leases in one round trip, each fenced on
// its own, across a leader kill: ten jobs taken through a follower, the
// leader killed, the rest taken through another node in a second batch;
// every job is completed once with its own lease, a lease of one job
// cannot complete another, and no job is handed out twice.
func TestBatchClaimAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "batched"
	created := map[string]bool{}
	for range 30 {
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 1}), http.StatusCreated), &j)
		created[j.ID] = true
	}
	claim := func(url string, n int) []api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "batcher", Streams: []string{stream}, MaxJobs: n}), http.StatusOK), &wc)
		if len(wc.Jobs) > 0 && (wc.JobID != wc.Jobs[0].JobID || !wc.Claimed) {
			t.Fatalf("top-level fields %+v do not repeat the first of %d", wc, len(wc.Jobs))
		}
		return wc.Jobs
	}
	first := claim(fs[1].URL, 10)
	if len(first) != 10 {
		t.Fatalf("first batch took %d jobs, want 10", len(first))
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	other := fs[0]
	if other == nl {
		other = fs[1]
	}
	second := claim(other.URL, 25)
	if len(second) != 20 {
		t.Fatalf("second batch took %d jobs, want the 20 left", len(second))
	}
	all := append(first, second...)
	seen := map[string]bool{}
	for _, wc := range all {
		if !created[wc.JobID] || seen[wc.JobID] || wc.LeaseToken == "" {
			t.Fatalf("claim %+v: unknown, twice, or without a lease", wc)
		}
		seen[wc.JobID] = true
	}
	// One job's lease does not complete another.
	apiWantError(t, apiDo(t, "POST", nl.URL+"/internal/worker/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "batcher",
		JobID: all[0].JobID, AttemptID: all[1].AttemptID, LeaseToken: all[1].LeaseToken}), http.StatusConflict, "stale_lease")
	for i, wc := range all {
		url := []string{nl.URL, other.URL}[i%2]
		apiWant(t, apiDo(t, "POST", url+"/internal/worker/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "batcher",
			JobID: wc.JobID, AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Result: []byte(`1`)}), http.StatusOK)
	}
	var st api.StreamInfo
	apiDecode(t, apiWant(t, apiDo(t, "GET", nl.URL+"/streams/"+stream+"?consistent", apiHead, nil), http.StatusOK), &st)
	if st.Done != 30 || st.Queued != 0 || st.Running != 0 {
		t.Fatalf("stream after the batches: %+v", st)
	}
	if len(claim(nl.URL, 5)) != 0 {
		t.Fatal("a batch claimed from an empty stream")
	}
	apiWantError(t, apiDo(t, "POST", nl.URL+"/internal/worker/claim", apiLeft, map[string]any{"worker_id": "b", "max_jobs": 101}), http.StatusBadRequest, "invalid_request")
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// Priorities hold across a leader kill: jobs of mixed priorities created
// through a follower before and after the kill are handed out highest
// first, FIFO within a priority, by the new leader.
func TestPrioritiesAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "prioritized"
	create := func(url string, p int) string {
		t.Helper()
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 1, "priority": p}), http.StatusCreated), &j)
		return j.ID
	}
	low := create(fs[0].URL, 0)
	mid := create(fs[0].URL, 5)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	other := fs[0]
	if other == nl {
		other = fs[1]
	}
	high := create(other.URL, 9)
	mid2 := create(other.URL, 5)
	var wc api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", other.URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "p", Streams: []string{stream}, MaxJobs: 10}), http.StatusOK), &wc)
	var got []string
	for _, j := range wc.Jobs {
		got = append(got, j.JobID)
	}
	want := []string{high, mid, mid2, low}
	if len(got) != len(want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("claim order %v, want %v (high, mid, mid2, low)", got, want)
		}
	}
	apiWantError(t, apiDo(t, "POST", nl.URL+"/jobs", apiHead, map[string]any{"payload": 1, "priority": 101}), http.StatusBadRequest, "invalid_request")
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
