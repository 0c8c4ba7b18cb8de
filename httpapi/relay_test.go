package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// relayPair is a follower whose leader is a real Server behind httptest.
func relayPair(t *testing.T) (leader, follower *env, ts *httptest.Server) {
	t.Helper()
	leader = newEnv(t)
	ts = httptest.NewServer(leader.h)
	t.Cleanup(ts.Close)
	follower = newEnv(t)
	follower.fc.id = "n2"
	follower.fc.setFollower("n1", ts.URL)
	return leader, follower, ts
}

func TestRelayCarriesConcurrentWrites(t *testing.T) {
	leader, follower, _ := relayPair(t)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := follower.doCtx(ctx, "POST", "/jobs", headTok, fmt.Sprintf(`{"payload":{"i":%d}}`, i), "Idempotency-Key", fmt.Sprintf("k-%d", i))
			if r.Code != http.StatusCreated {
				errs <- fmt.Sprintf("create %d: %d %s", i, r.Code, r.Body)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	counts, err := leader.fc.fsm.Read().Counts()
	if err != nil {
		t.Fatal(err)
	}
	if got := counts["queued"]; got != n {
		t.Fatalf("leader has %d jobs, want %d", got, n)
	}
	if relays, _, _ := follower.srv.relay.Stats(); relays != 1 {
		t.Fatalf("follower holds %d relay connections, want 1 (requests went over plain HTTP?)", relays)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A caller that leaves a long poll parked on the leader through the relay
// cancels it there too: the leader stops waiting for it at once.
func TestRelayPropagatesCancel(t *testing.T) {
	leader, follower, _ := relayPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan resp, 1)
	go func() {
		done <- follower.doCtx(ctx, "POST", "/internal/worker/claim", leftTok, `{"worker_id":"w1","max_wait_ms":20000}`)
	}()
	waitUntil(t, "the claim to park on the leader", func() bool { return leader.srv.queue.Stats().ClaimWaiters == 1 })
	cancel()
	waitUntil(t, "the leader to drop the claim", func() bool { return leader.srv.queue.Stats().ClaimWaiters == 0 })
	<-done
	// The job created afterwards is not claimed for the departed caller.
	id := leader.create(map[string]interface{}{"payload": 1})["id"].(string)
	if j := leader.job(id); j.State != "queued" {
		t.Fatalf("job state %s, want queued", j.State)
	}
}

// A write delivered over the relay whose answer is lost (the leader went
// away) is not sent again: the caller learns its outcome is unknown.
func TestRelayAnswerLost(t *testing.T) {
	leader, follower, _ := relayPair(t)
	done := make(chan resp, 1)
	go func() {
		done <- follower.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w1","max_wait_ms":20000}`)
	}()
	waitUntil(t, "the claim to park on the leader", func() bool { return leader.srv.queue.Stats().ClaimWaiters == 1 })
	leader.srv.Close() // closes the relay connections it serves
	r := <-done
	r.apiErr(t, http.StatusServiceUnavailable, api.CodeOutcomeUnknown)
}

// A follower whose token configuration differs from the leader's cannot
// open a relay; it forwards over plain HTTP instead, and callers see no
// difference.
func TestRelayRefusedFallsBackToHTTP(t *testing.T) {
	leader, _, ts := relayPair(t)
	follower := newEnv(t, func(cfg *envConfig) { cfg.Tokens.Add(RoleHead, "another-head-token") })
	follower.fc.id = "n3"
	follower.fc.setFollower("n1", ts.URL)
	r := follower.do("POST", "/jobs", headTok, `{"payload":7}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("create through follower: %d %s", r.Code, r.Body)
	}
	id := r.json(t)["id"].(string)
	if leader.job(id) == nil {
		t.Fatal("leader does not have the job")
	}
	if clients, _, unsupported := follower.srv.relay.Stats(); clients != 0 || unsupported != 1 {
		t.Fatalf("relay clients %d, unsupported %d: want none and the leader marked", clients, unsupported)
	}
}
