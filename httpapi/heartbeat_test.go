package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

// heartbeatEnv is a server that coalesces heartbeats (a tenth of the lease)
// with a clock the test moves.
func heartbeatEnv(t *testing.T) (*env, *atomic.Int64) {
	var offset atomic.Int64
	e := newEnv(t, func(c *envConfig) {
		c.Queue.LeaseRenewFraction = 0.1
		c.Queue.Now = func() time.Time { return testNow.Add(time.Duration(offset.Load())) }
	})
	return e, &offset
}

// applied is how many commands the fake cluster has been asked to commit,
// and readIndexes how many read indexes it has served.
func (c *fakeCluster) counts() (applied uint64, readIndexes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index, c.readIndexes
}

func heartbeatEvents(j *fsm.Job) int {
	n := 0
	for _, ev := range j.History() {
		if ev.Type == fsm.EventHeartbeat {
			n++
		}
	}
	return n
}

func TestHeartbeatAnsweredFromCommittedLease(t *testing.T) {
	e, clock := heartbeatEnv(t)
	e.create(map[string]interface{}{"payload": "p"}) // id-1, lease 300 s
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	tok := a["lease_token"].(string)
	body := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"attempt_id":%q,"lease_token":%q}`, a["job_id"], a["attempt_id"], tok)
	claimedExpiry := e.job("id-1").Lease.ExpiresAt
	applied, reads := e.fc.counts()

	// Right after the claim the lease has all of its 300 s: no entry, the
	// committed expiry comes back from the leader's own state, with no
	// quorum round (default consistency).
	hb := e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	if j := hb.json(t); hb.Code != 200 || j["ok"] != true || j["lease_expires_at"] != ts(claimedExpiry) {
		t.Fatalf("early heartbeat: %d %s (want expiry %s)", hb.Code, hb.Body, ts(claimedExpiry))
	}
	if a2, r2 := e.fc.counts(); a2 != applied || r2 != reads {
		t.Fatalf("early heartbeat: %d commands and %d read indexes, want %d and %d", a2, r2, applied, reads)
	}
	if hb.Header.Get(api.HeaderIndex) == "" {
		t.Error("early heartbeat has no index header")
	}
	// ?consistent asks for the same answer from a linearizable view.
	hb = e.do("POST", "/internal/worker/heartbeat?consistent", leftTok, body)
	if hb.Code != 200 || hb.json(t)["lease_expires_at"] != ts(claimedExpiry) {
		t.Fatalf("consistent early heartbeat: %d %s", hb.Code, hb.Body)
	}
	if a2, r2 := e.fc.counts(); a2 != applied || r2 != reads+1 {
		t.Fatalf("consistent early heartbeat: %d commands and %d read indexes, want %d and %d", a2, r2, applied, reads+1)
	}

	// 29 s later (under a tenth of 300 s) still nothing to write.
	clock.Store(int64(29 * time.Second))
	if hb := e.do("POST", "/internal/worker/heartbeat", leftTok, body); hb.Code != 200 || hb.json(t)["lease_expires_at"] != ts(claimedExpiry) {
		t.Fatalf("heartbeat at 29 s: %d %s", hb.Code, hb.Body)
	}
	if a2, _ := e.fc.counts(); a2 != applied {
		t.Fatal("heartbeat at 29 s wrote an entry")
	}
	if n := heartbeatEvents(e.job("id-1")); n != 0 {
		t.Fatalf("%d heartbeat events in the history, want 0", n)
	}

	// Refusals found in committed state need no entry either; they are
	// confirmed with a read index, so a caller is never told to stop
	// working by a stale view.
	_, reads = e.fc.counts()
	stale := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":"old"}`, a["job_id"])
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, stale); r.Code != http.StatusConflict {
		t.Fatalf("stale heartbeat: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, `{"worker_id":"w-1","job_id":"nope","lease_token":"x"}`); r.Code != http.StatusNotFound {
		t.Fatalf("unknown job: %d %s", r.Code, r.Body)
	}
	if a2, r2 := e.fc.counts(); a2 != applied || r2 != reads+2 {
		t.Fatalf("refused heartbeats: %d commands and %d read indexes, want %d and %d", a2, r2, applied, reads+2)
	}

	// 31 s in, the extension is worth a write: expiry moves to now + 300 s.
	clock.Store(int64(31 * time.Second))
	hb = e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	want := testNow.Add(31*time.Second + 300*time.Second).UnixNano()
	if hb.Code != 200 || hb.json(t)["lease_expires_at"] != ts(want) {
		t.Fatalf("due heartbeat: %d %s (want expiry %s)", hb.Code, hb.Body, ts(want))
	}
	j := e.job("id-1")
	if a2, _ := e.fc.counts(); a2 != applied+1 || j.Lease.ExpiresAt != want || heartbeatEvents(j) != 1 {
		t.Fatalf("due heartbeat: %d commands (want %d), expiry %d (want %d), %d events", a2, applied+1, j.Lease.ExpiresAt, want, heartbeatEvents(j))
	}

	// The v0 route answers the job view from the same committed lease.
	clock.Store(int64(40 * time.Second))
	v0 := e.do("POST", "/jobs/id-1/heartbeat", leftTok, `{}`)
	if v0.Code != 200 || v0.json(t)["id"] != "id-1" {
		t.Fatalf("v0 heartbeat: %d %s", v0.Code, v0.Body)
	}
	if a2, _ := e.fc.counts(); a2 != applied+1 {
		t.Fatal("v0 heartbeat 9 s after an extension wrote an entry")
	}
}

func TestHeartbeatCoalescingFollowsTheJobsLease(t *testing.T) {
	e, clock := heartbeatEnv(t)
	e.create(map[string]interface{}{"payload": "p", "leaseSeconds": 30}) // a tenth is 3 s
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	body := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":%q}`, a["job_id"], a["lease_token"])
	applied, _ := e.fc.counts()
	clock.Store(int64(2 * time.Second))
	e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	if a2, _ := e.fc.counts(); a2 != applied {
		t.Fatal("heartbeat 2 s into a 30 s lease wrote an entry")
	}
	clock.Store(int64(4 * time.Second))
	e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	if a2, _ := e.fc.counts(); a2 != applied+1 {
		t.Fatal("heartbeat 4 s into a 30 s lease was not written")
	}
}

func TestHeartbeatReadIndexFails(t *testing.T) {
	e, _ := heartbeatEnv(t)
	e.create(map[string]interface{}{"payload": "p"})
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	body := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":%q}`, a["job_id"], a["lease_token"])
	e.fc.mu.Lock()
	e.fc.readIndexErr = cluster.ErrNotLeader
	e.fc.mu.Unlock()
	applied, _ := e.fc.counts()
	// Leadership lost between the local look and the quorum check: the
	// caller who asked for a linearizable answer, or whose heartbeat would
	// be refused, is told to retry elsewhere, not that its lease is fine or
	// gone.
	for _, c := range []struct{ path, body string }{
		{"/internal/worker/heartbeat?consistent", body},
		{"/internal/worker/heartbeat", fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":"old"}`, a["job_id"])},
	} {
		r := e.do("POST", c.path, leftTok, c.body)
		if r.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s without a read index: %d %s", c.path, r.Code, r.Body)
		}
	}
	if a2, _ := e.fc.counts(); a2 != applied {
		t.Fatal("failed heartbeat wrote an entry")
	}
}

// A follower that heard from the leader within the leader lease answers a
// heartbeat on a fresh lease from its own state when the caller says what it
// has seen (X-Spine-Min-Index) and the follower has applied that much;
// everything else (no index, an index it has not applied, a refusal,
// ?consistent, a lease due for an extension, a follower out of contact)
// goes to the leader.
func TestHeartbeatAnsweredByAFollower(t *testing.T) {
	e, clock := heartbeatEnv(t)
	e.create(map[string]interface{}{"payload": "p"}) // id-1, lease 300 s
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	body := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"attempt_id":%q,"lease_token":%q}`, a["job_id"], a["attempt_id"], a["lease_token"])
	claimedExpiry := e.job("id-1").Lease.ExpiresAt
	seen := fmt.Sprint(e.fc.fsm.AppliedIndex()) // the claim's index

	l := newFakeLeader(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"from":"leader"}`)
	})
	e.fc.setFollower("n2", l.URL)
	e.fc.mu.Lock()
	e.fc.inContact = true
	e.fc.mu.Unlock()
	applied, reads := e.fc.counts()
	forwarded := func() int { return len(l.requests()) }

	clock.Store(int64(10 * time.Second))
	hb := e.do("POST", "/internal/worker/heartbeat", leftTok, body, api.HeaderMinIndex, seen)
	if j := hb.json(t); hb.Code != 200 || j["from"] != nil || j["lease_expires_at"] != ts(claimedExpiry) {
		t.Fatalf("fresh heartbeat on a follower: %d %s (want expiry %s, answered locally)", hb.Code, hb.Body, ts(claimedExpiry))
	}
	if hb.Header.Get(api.HeaderIndex) != seen || hb.Header.Get(api.HeaderNode) != "n1" {
		t.Errorf("local answer headers: %v", hb.Header)
	}
	if v0 := e.do("POST", "/jobs/id-1/heartbeat", leftTok, `{}`, api.HeaderMinIndex, seen); v0.Code != 200 || v0.json(t)["id"] != "id-1" {
		t.Fatalf("v0 heartbeat on a follower: %d %s", v0.Code, v0.Body)
	}
	if n := forwarded(); n != 0 {
		t.Fatalf("%d heartbeats forwarded, want 0", n)
	}
	if a2, r2 := e.fc.counts(); a2 != applied || r2 != reads {
		t.Fatalf("%d commands and %d read indexes, want %d and %d", a2, r2, applied, reads)
	}
	if e.srv.queue.Stats().LocalHeartbeats != 2 {
		t.Errorf("local_heartbeats %d, want 2", e.srv.queue.Stats().LocalHeartbeats)
	}

	ahead := fmt.Sprint(e.fc.fsm.AppliedIndex() + 1)
	for i, c := range []struct {
		what, path, body, seen string
		at                     time.Duration
		inContact              bool
	}{
		{"no index: the caller may have written what this follower has not applied", "/internal/worker/heartbeat", body, "", 10 * time.Second, true},
		{"an index this follower has not applied", "/internal/worker/heartbeat", body, ahead, 10 * time.Second, true},
		{"a stale token", "/internal/worker/heartbeat", fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":"old"}`, a["job_id"]), seen, 10 * time.Second, true},
		{"an unknown job", "/internal/worker/heartbeat", `{"worker_id":"w-1","job_id":"id-9","lease_token":"x"}`, seen, 10 * time.Second, true},
		{"?consistent", "/internal/worker/heartbeat?consistent", body, seen, 10 * time.Second, true},
		{"a lease due for an extension", "/internal/worker/heartbeat", body, seen, 31 * time.Second, true},
		{"a follower out of contact", "/internal/worker/heartbeat", body, seen, 10 * time.Second, false},
	} {
		clock.Store(int64(c.at))
		e.fc.mu.Lock()
		e.fc.inContact = c.inContact
		e.fc.mu.Unlock()
		var hdr []string
		if c.seen != "" {
			hdr = []string{api.HeaderMinIndex, c.seen}
		}
		r := e.do("POST", c.path, leftTok, c.body, hdr...)
		if r.Code != 200 || r.json(t)["from"] != "leader" || forwarded() != i+1 {
			t.Fatalf("%s: %d %s, %d forwarded; want the leader's answer", c.what, r.Code, r.Body, forwarded())
		}
		if got := l.requests()[i]; got.URI != c.path || got.Body != c.body {
			t.Fatalf("%s: leader saw %s %q", c.what, got.URI, got.Body)
		}
	}
	if a2, _ := e.fc.counts(); a2 != applied {
		t.Fatal("a follower wrote an entry")
	}
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, body, api.HeaderMinIndex, "soon"); r.Code != http.StatusBadRequest {
		t.Fatalf("malformed %s: %d %s", api.HeaderMinIndex, r.Code, r.Body)
	}
}

func TestHeartbeatWrittenWhenCoalescingIsOff(t *testing.T) {
	e := newEnv(t) // LeaseRenewFraction 0
	e.create(map[string]interface{}{"payload": "p"})
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	body := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":%q}`, a["job_id"], a["lease_token"])
	applied, reads := e.fc.counts()
	e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	if a2, r2 := e.fc.counts(); a2 != applied+1 || r2 != reads {
		t.Fatalf("%d commands, %d read indexes; want %d, %d", a2, r2, applied+1, reads)
	}
}
