package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// completeRef is the lease reference of claim answer a, as a complete
// sends it.
func completeRef(worker string, a map[string]interface{}) string {
	return fmt.Sprintf(`"worker_id":%q,"job_id":%q,"attempt_id":%q,"lease_token":%q`, worker, a["job_id"], a["attempt_id"], a["lease_token"])
}

// completeAck decodes a complete's answer, which must be 200.
func completeAck(t *testing.T, r resp) api.WorkerCompleteAck {
	t.Helper()
	var ack api.WorkerCompleteAck
	if r.Code != http.StatusOK {
		t.Fatalf("complete: %d %s", r.Code, r.Body)
	}
	if err := json.Unmarshal(r.Body, &ack); err != nil || !ack.OK || !ack.Ack {
		t.Fatalf("complete answer %s: %v", r.Body, err)
	}
	return ack
}

// A complete with "next" ends its job and hands the worker the next one,
// in one entry of the log from LevelCompleteNext on and in two below it,
// with the same answer either way.
func TestWorkerCompleteClaimsNext(t *testing.T) {
	for _, level := range []int{fsm.LevelCompleteNext - 1, fsm.LevelCompleteNext} {
		t.Run(fmt.Sprint("level ", level), func(t *testing.T) {
			e := newEnv(t, atLevel(level))
			e.fc.setSupported(level)
			var types []fsm.CommandType
			a := e.create(map[string]interface{}{})["id"].(string)
			b := e.create(map[string]interface{}{})["id"].(string)
			first := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
			if first["job_id"] != a {
				t.Fatalf("claim took %v, want %s", first["job_id"], a)
			}
			e.fc.beforeApply = func(t fsm.CommandType) { types = append(types, t) }
			ack := completeAck(t, e.do("POST", "/internal/worker/complete", leftTok, `{`+completeRef("w-1", first)+`,"result":{"ok":1},"next":{}}`))
			n := ack.Next
			if n == nil || !n.Claimed || n.JobID != b || n.LeaseToken == "" || n.AttemptID == "" || n.Attempt != 1 || n.LeaseTTLSeconds <= 0 {
				t.Fatalf("next: %+v", n)
			}
			if j := e.job(a); j.State != fsm.StateDone || string(j.Result) != `{"ok":1}` {
				t.Fatalf("completed job: %s %s", j.State, j.Result)
			}
			if j := e.job(b); j.State != fsm.StateRunning || j.Lease.WorkerID != "w-1" || j.Lease.Token != n.LeaseToken {
				t.Fatalf("next job: %s %+v", j.State, j.Lease)
			}
			want := []fsm.CommandType{fsm.CmdComplete}
			if level < fsm.LevelCompleteNext {
				want = append(want, fsm.CmdClaim)
			}
			if fmt.Sprint(types) != fmt.Sprint(want) {
				t.Fatalf("entries %v, want %v", types, want)
			}

			// Nothing left: the complete stands and next says so at once.
			nb := map[string]interface{}{"job_id": n.JobID, "attempt_id": n.AttemptID, "lease_token": n.LeaseToken}
			ack = completeAck(t, e.do("POST", "/internal/worker/complete", leftTok, `{`+completeRef("w-1", nb)+`,"next":{"max_wait_ms":0}}`))
			if ack.Next == nil || ack.Next.Claimed || e.job(b).State != fsm.StateDone {
				t.Fatalf("complete with nothing next: %+v, %s", ack.Next, e.job(b).State)
			}
		})
	}
}

// A complete's next claim is checked as a claim is, before anything
// changes: bad input and a stream out of the token's scope are refused,
// and the job the complete names stays running.
func TestWorkerCompleteNextRefusedChangesNothing(t *testing.T) {
	e := newEnv(t)
	scoped := e.newToken(api.TokenCreateRequest{Name: "claw-a", Role: fsm.RoleLeftClaw, Streams: []string{"a"}})
	id := e.create(map[string]interface{}{"stream": "a"})["id"].(string)
	e.create(map[string]interface{}{"stream": "b"})
	c := e.workerClaim(scoped, `{"worker_id":"w-1","streams":["a"]}`)
	if c["job_id"] != id {
		t.Fatalf("claim %v", c)
	}
	ref := completeRef("w-1", c)
	for _, bad := range []struct {
		next   string
		status int
		code   string
	}{
		{`{"max_wait_ms":-1}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{`{"max_jobs":1000}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{`{"worker_id":"w-2"}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{`{"streams":["b"]}`, http.StatusForbidden, api.CodeForbidden},
		{`{"capabilities":[""]}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{`{"bogus":1}`, http.StatusBadRequest, api.CodeInvalidRequest},
	} {
		e.do("POST", "/internal/worker/complete", scoped, `{`+ref+`,"next":`+bad.next+`}`).apiErr(t, bad.status, bad.code)
		if j := e.job(id); j.State != fsm.StateRunning {
			t.Fatalf("after next %s the job is %s", bad.next, j.State)
		}
	}
	// A refused complete claims nothing.
	third := e.create(map[string]interface{}{"stream": "a"})["id"].(string)
	r := e.do("POST", "/internal/worker/complete", scoped, `{"worker_id":"w-1","job_id":"`+id+`","attempt_id":"x","lease_token":"stale","next":{}}`)
	if r.Code != http.StatusConflict || bytes.Contains(r.Body, []byte(`"next"`)) {
		t.Fatalf("stale complete with next: %d %s", r.Code, r.Body)
	}
	if j := e.job(third); j.State != fsm.StateQueued {
		t.Fatalf("a refused complete's next claim took a job: %s", j.State)
	}
}

// A caller that leaves while its complete (and next claim) commits: the
// complete stands, and the next job is given back at once.
func TestWorkerCompleteNextCallerLeft(t *testing.T) {
	e := newEnv(t)
	e.create(map[string]interface{}{})
	b := e.create(map[string]interface{}{})["id"].(string)
	c := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.fc.beforeApply = func(t fsm.CommandType) {
		if t == fsm.CmdComplete {
			cancel()
		}
	}
	e.doCtx(ctx, "POST", "/internal/worker/complete", leftTok, `{`+completeRef("w-1", c)+`,"next":{}}`)
	e.fc.beforeApply = nil
	if j := e.job(c["job_id"].(string)); j.State != fsm.StateDone {
		t.Fatalf("completed job: %s", j.State)
	}
	j := e.job(b)
	if j.State != fsm.StateQueued || j.Attempts != 0 || j.History()[len(j.History())-1].Type != fsm.EventReleased {
		t.Fatalf("next job not given back: %s attempts %d last event %s", j.State, j.Attempts, j.History()[len(j.History())-1].Type)
	}
}
