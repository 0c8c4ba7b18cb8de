package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A delayed job fires once, across a leader kill: created through a
// follower with a delay, the leader is killed before its time; no claim
// takes it early; once its time has come the new leader promotes it and
// exactly one of several waiting workers gets it. A job with a retry
// backoff failed with requeue shows its next run time and is not handed
// out before it.
func TestDelayedJobFiresOnceAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "delayed"
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 1, "delaySeconds": 4}), http.StatusCreated), &j)
	if j.RunAt.IsZero() || j.Status != api.JobStatusQueued {
		t.Fatalf("delayed job %+v", j)
	}
	due := j.RunAt
	claimOnce := func(url, worker string, waitMS int64) api.WorkerClaim {
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: worker, Streams: []string{stream}, MaxWaitMS: waitMS}), http.StatusOK), &wc)
		return wc
	}
	if wc := claimOnce(fs[1].URL, "early", 0); wc.Claimed {
		t.Fatalf("claimed %s before its time", wc.JobID)
	}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+j.ID+"/claim", apiLeft, map[string]any{}), http.StatusConflict, "not_yet_claimable")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Three workers wait on the stream through the survivors; one gets it.
	var mu sync.Mutex
	var got []api.WorkerClaim
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := apiRequest("POST", fs[i%2].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: fmt.Sprintf("w%d", i), Streams: []string{stream}, MaxWaitMS: 9000})
			if err != nil || r.Status != http.StatusOK {
				return
			}
			var wc api.WorkerClaim
			if jsonErr := json.Unmarshal(r.Body, &wc); jsonErr == nil && wc.Claimed {
				mu.Lock()
				got = append(got, wc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || got[0].JobID != j.ID {
		t.Fatalf("%d workers got the delayed job (%+v), want exactly one", len(got), got)
	}
	if now := time.Now(); now.Before(due) {
		t.Fatalf("handed out at %v, before its time %v", now, due)
	}

	// A retry backoff: failed with requeue, it waits out base seconds.
	var b api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 2, "backoff": map[string]int{"base": 3, "max": 10}}), http.StatusCreated), &b)
	wc := claimOnce(fs[0].URL, "flaky", 5000)
	if !wc.Claimed || wc.JobID != b.ID {
		t.Fatalf("claim of the backoff job: %+v", wc)
	}
	var ack api.WorkerAck
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/fail", apiLeft, api.WorkerFailRequest{WorkerID: "flaky", JobID: b.ID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Error: &api.JobError{Message: "flaky", Retryable: true}}), http.StatusOK), &ack)
	failedAt := time.Now()
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/jobs/"+b.ID+"?consistent", apiHead, nil), http.StatusOK), &b)
	if !ack.Requeued || b.Status != api.JobStatusQueued || b.RunAt.IsZero() || b.Backoff == nil || b.Backoff.Base != 3 {
		t.Fatalf("after the fail: ack %+v, job %+v", ack, b)
	}
	if wait := b.RunAt.Sub(failedAt); wait > 3*time.Second+500*time.Millisecond {
		t.Fatalf("backoff of %v, want at most 3 s", wait)
	}
	wc = claimOnce(fs[0].URL, "again", 15000)
	if !wc.Claimed || wc.JobID != b.ID || time.Now().Before(b.RunAt) {
		t.Fatalf("after the backoff: %+v at %v (runAt %v)", wc, time.Now(), b.RunAt)
	}

	// The cluster's default backoff (SPINE_RETRY_BACKOFF, 1s..5m): a job
	// created without one waits about a second after its first failure;
	// one created with base 0 is claimable again at once.
	for _, tc := range []struct {
		stream  string
		backoff any
		want    *api.Backoff
	}{
		{stream: stream + "-default", want: &api.Backoff{Base: 1, Max: 300}},
		{stream: stream + "-none", backoff: map[string]int{"base": 0}},
	} {
		body := map[string]any{"stream": tc.stream, "payload": 3}
		if tc.backoff != nil {
			body["backoff"] = tc.backoff
		}
		var d api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs", apiHead, body), http.StatusCreated), &d)
		if (d.Backoff == nil) != (tc.want == nil) || (d.Backoff != nil && *d.Backoff != *tc.want) {
			t.Fatalf("%s: created with backoff %+v, want %+v", tc.stream, d.Backoff, tc.want)
		}
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w", Streams: []string{tc.stream}, MaxWaitMS: 5000}), http.StatusOK), &wc)
		if !wc.Claimed || wc.JobID != d.ID {
			t.Fatalf("%s: claim %+v", tc.stream, wc)
		}
		failedAt := time.Now()
		apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/fail", apiLeft, api.WorkerFailRequest{WorkerID: "w", JobID: d.ID,
			AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Error: &api.JobError{Message: "transient", Retryable: true}}), http.StatusOK)
		apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/jobs/"+d.ID+"?consistent", apiHead, nil), http.StatusOK), &d)
		switch {
		case d.Status != api.JobStatusQueued:
			t.Fatalf("%s: after a retryable fail %+v", tc.stream, d)
		case tc.want != nil && (d.RunAt.IsZero() || d.RunAt.Sub(failedAt) > 1500*time.Millisecond):
			t.Fatalf("%s: runAt %v after a fail at %v, want within the 1 s base", tc.stream, d.RunAt, failedAt)
		case tc.want == nil && !d.RunAt.IsZero():
			t.Fatalf("%s: runAt %v with no backoff", tc.stream, d.RunAt)
		}
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w2", Streams: []string{tc.stream}, MaxWaitMS: 10000}), http.StatusOK), &wc)
		if !wc.Claimed || wc.JobID != d.ID || (!d.RunAt.IsZero() && time.Now().Before(d.RunAt)) {
			t.Fatalf("%s: retry %+v at %v (runAt %v)", tc.stream, wc, time.Now(), d.RunAt)
		}
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// A concurrency limit holds across a leader kill: eight jobs of one key
// with a limit of 2, worked by four workers through every node, each job
// held for a while; the leader is killed while they run. No moment sees
// more than two of the key's jobs held (a hold counted from the claim's
// answer to the complete's sending, inside the server's own run of the
// job), and every job is done.
func TestConcurrencyLimitAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "3", "REAPER_INTERVAL_MS": "200", "SPINE_LEASE_GRACE_MS": "500"})
	leader, fs := apiRoles(t, c)
	const stream = "limited"
	ids := map[string]bool{}
	for range 8 {
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 1, "concurrencyKey": "tenant-a", "concurrencyLimit": 2}), http.StatusCreated), &j)
		if j.ConcurrencyKey != "tenant-a" || j.ConcurrencyLimit != 2 {
			t.Fatalf("created %+v", j)
		}
		ids[j.ID] = true
	}
	type hold struct {
		from, to time.Time
		job, who string
	}
	var mu sync.Mutex
	var holds []hold
	done := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	killed := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				finished := len(done) == len(ids)
				mu.Unlock()
				if finished {
					return
				}
				url := c.Nodes[w%3].URL
				r, err := apiRequest("POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: fmt.Sprintf("w%d", w), Streams: []string{stream}, MaxWaitMS: 1000})
				if err != nil || r.Status != http.StatusOK {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				var wc api.WorkerClaim
				if json.Unmarshal(r.Body, &wc) != nil || !wc.Claimed {
					continue
				}
				from := time.Now()
				time.Sleep(400 * time.Millisecond) // the work
				to := time.Now()
				body := api.WorkerCompleteRequest{WorkerID: fmt.Sprintf("w%d", w), JobID: wc.JobID, AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Result: []byte(`1`)}
				for try := 0; try < 20; try++ {
					cr, err := apiRequest("POST", c.Nodes[(w+try)%3].URL+"/internal/worker/complete", apiLeft, body)
					if err == nil && cr.Status == http.StatusOK {
						mu.Lock()
						holds = append(holds, hold{from, to, wc.JobID + "/" + wc.AttemptID, fmt.Sprintf("w%d via %s", w, url)})
						done[wc.JobID] = true
						mu.Unlock()
						break
					}
					if err == nil && cr.Status == http.StatusConflict {
						break // the lease was lost in the failover: the job runs again
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	go func() {
		defer close(killed)
		time.Sleep(700 * time.Millisecond)
		_ = c.Kill(leader)
	}()
	wg.Wait()
	<-killed
	mu.Lock()
	defer mu.Unlock()
	if len(done) != len(ids) {
		t.Fatalf("%d of %d jobs done", len(done), len(ids))
	}
	// The most holds at one instant: at the start of each hold, count the
	// holds that have begun and not ended.
	for _, h := range holds {
		n := 0
		for _, o := range holds {
			if !o.from.After(h.from) && o.to.After(h.from) {
				n++
			}
		}
		if n > 2 {
			for _, o := range holds {
				t.Logf("hold %s %s %v..%v", o.job, o.who, o.from.Format("15:04:05.000"), o.to.Format("15:04:05.000"))
			}
			t.Fatalf("%d jobs of a key limited to 2 were held at once (at %v)", n, h.from)
		}
	}

	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// A dependency chain completes in order across a leader kill: a fan-out of
// three parts and a fan-in job that depends on all of them, then a job
// after the fan-in; the leader is killed halfway; every job is handed out
// only once what it depends on is done. A failed part fails its dependents.
func TestDependencyChainAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "chained"
	create := func(url string, deps ...string) string {
		t.Helper()
		var j api.Job
		body := map[string]any{"stream": stream, "payload": 1}
		if len(deps) > 0 {
			body["dependsOn"] = deps
		}
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/jobs", apiHead, body), http.StatusCreated), &j)
		return j.ID
	}
	p1, p2, p3 := create(fs[0].URL), create(fs[0].URL), create(fs[0].URL)
	fanIn := create(fs[1].URL, p1, p2, p3)
	last := create(fs[1].URL, fanIn)
	apiWantError(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"payload": 1, "dependsOn": []string{"no-such-job"}}), http.StatusNotFound, "not_found")

	var order []string
	work := func(url string) string {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w", Streams: []string{stream}, MaxWaitMS: 5000}), http.StatusOK), &wc)
		if !wc.Claimed {
			return ""
		}
		apiWant(t, apiDo(t, "POST", url+"/internal/worker/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "w", JobID: wc.JobID,
			AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Result: []byte(`1`)}), http.StatusOK)
		order = append(order, wc.JobID)
		return wc.JobID
	}
	work(fs[0].URL)
	work(fs[0].URL)
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/jobs/"+fanIn+"?consistent", apiHead, nil), http.StatusOK), &j)
	if j.WaitingOn != 1 || len(j.DependsOn) != 3 {
		t.Fatalf("fan-in after two parts: waitingOn %d of %v", j.WaitingOn, j.DependsOn)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		work(nl.URL)
	}
	if extra := work(nl.URL); extra != "" {
		t.Fatalf("a sixth job %s was handed out", extra)
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	if len(order) != 5 || pos[fanIn] < pos[p1] || pos[fanIn] < pos[p2] || pos[fanIn] < pos[p3] || pos[last] != 4 {
		t.Fatalf("handed out in the order %v (parts %s %s %s, fan-in %s, last %s)", order, p1, p2, p3, fanIn, last)
	}

	// A failed part fails what waits on it, down the chain.
	q := create(nl.URL)
	r := create(nl.URL, q)
	s := create(nl.URL, r)
	var wc api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w", Streams: []string{stream}}), http.StatusOK), &wc)
	apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/fail", apiLeft, api.WorkerFailRequest{WorkerID: "w", JobID: wc.JobID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Error: &api.JobError{Message: "broken", Retryable: false}}), http.StatusOK)
	if wc.JobID != q {
		t.Fatalf("claimed %s, want %s", wc.JobID, q)
	}
	for _, id := range []string{r, s} {
		apiDecode(t, apiWant(t, apiDo(t, "GET", nl.URL+"/jobs/"+id+"?consistent", apiHead, nil), http.StatusOK), &j)
		if j.Status != api.JobStatusFailed || j.Error == nil || j.Error.Code != "dependency_failed" {
			t.Fatalf("%s after its dependency failed: %s %+v", id, j.Status, j.Error)
		}
	}

	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// The worker contract's release: fenced by the lease token, no attempt
// used, and with cooldown_ms the job is not handed straight back (to this
// worker or any); once the cooldown ends another worker gets it. Across a
// leader kill between the release and the end of the cooldown.
func TestWorkerReleaseWithCooldown(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "gpu-only"
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": map[string]string{"needs": "gpu"}}), http.StatusCreated), &j)
	claim := func(url, worker string, waitMS int64) api.WorkerClaim {
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: worker, Streams: []string{stream}, MaxWaitMS: waitMS}), http.StatusOK), &wc)
		return wc
	}
	wc := claim(fs[1].URL, "cpu-box", 0)
	if !wc.Claimed || wc.JobID != j.ID {
		t.Fatalf("claim %+v", wc)
	}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/release", apiLeft, api.WorkerReleaseRequest{WorkerID: "cpu-box", JobID: j.ID, LeaseToken: "wrong"}), http.StatusConflict, "stale_lease")
	var ack api.WorkerAck
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/release", apiLeft, api.WorkerReleaseRequest{WorkerID: "cpu-box", JobID: j.ID,
		LeaseToken: wc.LeaseToken, Reason: "needs a GPU", CooldownMS: 3000}), http.StatusOK), &ack)
	released := time.Now()
	if !ack.Requeued || ack.Status != api.JobStatusQueued {
		t.Fatalf("release answer %+v", ack)
	}
	if again := claim(fs[1].URL, "cpu-box", 0); again.Claimed {
		t.Fatalf("the released job came straight back: %+v", again)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := claim(nl.URL, "gpu-box", 10000)
	if !got.Claimed || got.JobID != j.ID || got.Attempt != 1 {
		t.Fatalf("after the cooldown: %+v (want attempt 1: a release uses none)", got)
	}
	if since := time.Since(released); since < 2500*time.Millisecond {
		t.Fatalf("handed out %v after a 3 s cooldown", since)
	}

	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// A fan-in that runs whatever its parts did, across a leader kill: one
// part fails before the kill, the other is done after it through the new
// leader; the fan-in is then handed out (and a strict dependent of the
// failed part has failed), on every node's word.
func TestFanInAfterFailedPartAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	create := func(body map[string]any) string {
		t.Helper()
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, body), http.StatusCreated), &j)
		return j.ID
	}
	p1 := create(map[string]any{"stream": "fan-parts", "payload": 1})
	p2 := create(map[string]any{"stream": "fan-parts", "payload": 2})
	report := create(map[string]any{"stream": "fan-report", "payload": 3, "dependsOn": []string{p1, p2}, "onDependencyFailure": "run"})
	strict := create(map[string]any{"stream": "fan-report", "payload": 4, "dependsOn": []string{p1}})
	claim := func(url, stream string) api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w", Streams: []string{stream}}), http.StatusOK), &wc)
		return wc
	}
	wc := claim(fs[1].URL, "fan-parts")
	if wc.JobID != p1 {
		t.Fatalf("claimed %+v, want %s", wc, p1)
	}
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/fail", apiLeft, api.WorkerFailRequest{WorkerID: "w", JobID: wc.JobID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Error: &api.JobError{Message: "broken", Retryable: false}}), http.StatusOK)

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if wc := claim(nl.URL, "fan-report"); wc.Claimed {
		t.Fatalf("handed out %s before the last part ended", wc.JobID)
	}
	wc = claim(nl.URL, "fan-parts")
	apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "w", JobID: wc.JobID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Result: []byte(`1`)}), http.StatusOK)
	if wc.JobID != p2 {
		t.Fatalf("claimed %s, want %s", wc.JobID, p2)
	}
	for _, n := range c.Nodes {
		if n == leader {
			continue
		}
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "GET", n.URL+"/jobs/"+strict+"?consistent", apiHead, nil), http.StatusOK), &j)
		if j.Status != api.JobStatusFailed || j.Error == nil || j.Error.Code != "dependency_failed" {
			t.Fatalf("the strict dependent on %s: %s %+v", n.ID, j.Status, j.Error)
		}
	}
	if wc := claim(fs[0].URL, "fan-report"); wc.JobID != report {
		t.Fatalf("after every part ended: %+v, want the fan-in %s", wc, report)
	}
}
