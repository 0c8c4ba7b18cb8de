package httpapi

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/cluster"
)

// A default read is answered from the leader's own state only if the node
// still holds its read lease after reading; otherwise it is answered again
// from a quorum round (docs/api.md, consistency).
func TestDefaultReadCheckedAgainstLeaseAfterReading(t *testing.T) {
	e := newEnv(t)
	e.create(map[string]interface{}{"payload": "p"}) // id-1

	_, reads := e.fc.counts()
	r := e.do("GET", "/jobs/id-1", headTok, "")
	if r.Code != 200 || r.json(t)["id"] != "id-1" {
		t.Fatalf("read with the lease held: %d %s", r.Code, r.Body)
	}
	if r.Header.Get(api.HeaderIndex) == "" {
		t.Error("held answer lost its index header")
	}
	e.fc.mu.Lock()
	checks := e.fc.stillRecentCalls
	e.fc.mu.Unlock()
	if _, r2 := e.fc.counts(); r2 != reads || checks == 0 {
		t.Fatalf("lease held: %d read indexes (want %d), %d lease checks (want > 0)", r2, reads, checks)
	}
	// A refusal found in local state is checked the same way.
	if r := e.do("GET", "/jobs/nope", headTok, ""); r.Code != 404 {
		t.Fatalf("unknown job with the lease held: %d %s", r.Code, r.Body)
	}

	// The lease ran out while the node read (it was paused): the answer is
	// not sent from that read; a quorum round confirms leadership first.
	e.fc.mu.Lock()
	e.fc.leaseLost = true
	e.fc.mu.Unlock()
	_, reads = e.fc.counts()
	r = e.do("GET", "/jobs/id-1", headTok, "")
	if r.Code != 200 || r.json(t)["id"] != "id-1" {
		t.Fatalf("read after the lease ran out: %d %s", r.Code, r.Body)
	}
	if _, r2 := e.fc.counts(); r2 != reads+1 {
		t.Fatalf("lease lost: %d read indexes, want %d", r2, reads+1)
	}
	if r := e.do("GET", "/jobs/nope", headTok, ""); r.Code != 404 {
		t.Fatalf("unknown job after the lease ran out: %d %s", r.Code, r.Body)
	}
	if _, r2 := e.fc.counts(); r2 != reads+2 {
		t.Fatalf("lease lost, refusal: %d read indexes, want %d", r2, reads+2)
	}
	if got := e.srv.queue.Stats().LeaseMisses; got != 2 {
		t.Fatalf("lease misses %d, want 2", got)
	}

	// And when the quorum round then fails, the caller gets that error
	// alone: the answer read without the lease is dropped, not sent ahead
	// of it.
	e.fc.mu.Lock()
	e.fc.readIndexErr = fmt.Errorf("no quorum: %w", cluster.ErrNotLeader)
	e.fc.mu.Unlock()
	r = e.do("GET", "/jobs/id-1", headTok, "")
	r.apiErr(t, 503, api.CodeNoLeader)
	if bytes.Contains(r.Body, []byte(`"id":"id-1"`)) {
		t.Fatalf("the answer read without the lease was sent: %s", r.Body)
	}
}

// A page long enough to be held in chunks is held, dropped and read again
// the same way: the answer after the lease ran out is the page read with
// it held, and a failed quorum round sends the error alone.
func TestLongDefaultReadCheckedAgainstLeaseAfterReading(t *testing.T) {
	e := newEnv(t)
	pad := strings.Repeat("p", 1500)
	for i := range 60 {
		e.create(map[string]interface{}{"payload": map[string]interface{}{"i": i, "pad": pad}})
	}
	held := e.do("GET", "/jobs?limit=100", headTok, "")
	if held.Code != 200 || len(held.Body) < 2*wire.ChunkSize {
		t.Fatalf("page with the lease held: %d, %d bytes", held.Code, len(held.Body))
	}
	e.fc.mu.Lock()
	e.fc.leaseLost = true
	e.fc.mu.Unlock()
	if r := e.do("GET", "/jobs?limit=100", headTok, ""); r.Code != 200 || !bytes.Equal(r.Body, held.Body) {
		t.Fatalf("page after the lease ran out: %d, %d bytes, the same: %v", r.Code, len(r.Body), bytes.Equal(r.Body, held.Body))
	}
	if got := e.srv.queue.Stats().LeaseMisses; got != 1 {
		t.Fatalf("lease misses %d, want 1", got)
	}
	e.fc.mu.Lock()
	e.fc.readIndexErr = fmt.Errorf("no quorum: %w", cluster.ErrNotLeader)
	e.fc.mu.Unlock()
	r := e.do("GET", "/jobs?limit=100", headTok, "")
	r.apiErr(t, 503, api.CodeNoLeader)
	if bytes.Contains(r.Body, []byte(pad)) {
		t.Fatalf("the page read without the lease was sent: %d bytes", len(r.Body))
	}
}

// A heartbeat answered from the committed lease is subject to the same
// check: with the lease gone it goes to the full path.
func TestLocalHeartbeatCheckedAgainstLeaseAfterReading(t *testing.T) {
	e, _ := heartbeatEnv(t)
	e.create(map[string]interface{}{"payload": "p"})
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	body := fmt.Sprintf(`{"worker_id":"w-1","job_id":%q,"attempt_id":%q,"lease_token":%q}`, a["job_id"], a["attempt_id"], a["lease_token"])
	before := e.srv.queue.Stats().LocalHeartbeats
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, body); r.Code != 200 {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Body)
	}
	if e.srv.queue.Stats().LocalHeartbeats != before+1 {
		t.Fatal("fresh lease not answered locally")
	}
	e.fc.mu.Lock()
	e.fc.leaseLost = true
	e.fc.mu.Unlock()
	_, reads := e.fc.counts()
	if r := e.do("POST", "/internal/worker/heartbeat", leftTok, body); r.Code != 200 {
		t.Fatalf("heartbeat with the lease gone: %d %s", r.Code, r.Body)
	}
	if e.srv.queue.Stats().LocalHeartbeats != before+1 {
		t.Fatal("answered locally although the lease ran out during the read")
	}
	if _, r2 := e.fc.counts(); r2 != reads+1 {
		t.Fatalf("heartbeat with the lease gone: %d read indexes, want %d (a quorum round)", r2, reads+1)
	}
}
