package httpapi

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

// heartbeatEnv is a server that coalesces heartbeats (a tenth of the lease)
// with a clock the test moves.
func heartbeatEnv(t *testing.T) (*env, *atomic.Int64) {
	var offset atomic.Int64
	e := newEnv(t, func(c *Config) {
		c.LeaseRenewFraction = 0.1
		c.Now = func() time.Time { return testNow.Add(time.Duration(offset.Load())) }
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
	for _, ev := range j.History {
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
	// committed expiry comes back, after a read index.
	hb := e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	if j := hb.json(t); hb.Code != 200 || j["ok"] != true || j["lease_expires_at"] != ts(claimedExpiry) {
		t.Fatalf("early heartbeat: %d %s (want expiry %s)", hb.Code, hb.Body, ts(claimedExpiry))
	}
	if a2, r2 := e.fc.counts(); a2 != applied || r2 != reads+1 {
		t.Fatalf("early heartbeat: %d commands and %d read indexes, want %d and %d", a2, r2, applied, reads+1)
	}
	if hb.Header.Get(headerIndex) == "" {
		t.Error("early heartbeat has no index header")
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

	// Refusals found in committed state need no entry either.
	stale := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"lease_token":"old"}`, a["job_id"])
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, stale); r.Code != http.StatusConflict {
		t.Fatalf("stale heartbeat: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, `{"worker_id":"w-1","job_id":"nope","lease_token":"x"}`); r.Code != http.StatusNotFound {
		t.Fatalf("unknown job: %d %s", r.Code, r.Body)
	}
	if a2, _ := e.fc.counts(); a2 != applied {
		t.Fatal("a refused heartbeat wrote an entry")
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
	// caller is told to retry elsewhere, not that its lease is fine.
	r := e.do("POST", "/internal/worker/heartbeat", leftTok, body)
	if r.Code != http.StatusServiceUnavailable {
		t.Fatalf("heartbeat without a read index: %d %s", r.Code, r.Body)
	}
	if a2, _ := e.fc.counts(); a2 != applied {
		t.Fatal("failed heartbeat wrote an entry")
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
