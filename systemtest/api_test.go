package systemtest

// The full v0 API (docs/api.md) on a real three-process cluster, much of it
// through followers so forwarding is exercised on every route.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// apiUnique returns a fresh name (streams, keys) so subtests sharing a
// cluster never see each other's jobs.
func apiUnique(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// TestAPI runs the v0 API behaviours that need no special settings and kill
// no node on one shared cluster. Its retries are immediate (no default
// backoff): the cases claim a requeued job straight back; the backoff has
// its own test (TestDelayedJobFiresOnceAcrossLeaderKill).
func TestAPI(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"SPINE_RETRY_BACKOFF": "off"})
	leader, fs := apiRoles(t, c)
	if len(fs) != 2 {
		t.Fatalf("want 2 followers, have %d", len(fs))
	}
	L, F1, F2 := leader.URL, fs[0].URL, fs[1].URL
	all := []string{F1, L, F2}

	t.Run("LongPagesOverMux", func(t *testing.T) { apiLongPages(t, c) })

	t.Run("PublicHealthAndSkill", func(t *testing.T) {
		leader, _ := apiRoles(t, c)
		for _, n := range c.Nodes {
			r := apiWant(t, apiDo(t, "GET", n.URL+"/health", "", nil), http.StatusOK)
			var h struct {
				OK           bool   `json:"ok"`
				NodeID       string `json:"node_id"`
				Role         string `json:"role"`
				LeaderID     string `json:"leader_id"`
				LeaderAddr   string `json:"leader_addr"`
				AppliedIndex uint64 `json:"applied_index"`
				CommitIndex  uint64 `json:"commit_index"`
			}
			apiDecode(t, r, &h)
			wantRole := "follower"
			if n == leader {
				wantRole = "leader"
			}
			if !h.OK || h.NodeID != n.ID || h.Role != wantRole || h.LeaderID != leader.ID || h.LeaderAddr != leader.URL || h.CommitIndex == 0 {
				t.Errorf("%s /health = %s", n.ID, r.Body)
			}
			apiWantHeaders(t, r)
			// The Go client reads the same answer.
			cl, err := client.New([]string{n.URL})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := cl.Health(context.Background(), n.URL)
			if err != nil {
				t.Errorf("client.Health(%s): %v (body %s)", n.ID, err, r.Body)
			} else if ch.NodeID != n.ID || ch.LeaderID != leader.ID {
				t.Errorf("client.Health(%s) = %+v", n.ID, ch)
			}

			s := apiWant(t, apiDo(t, "GET", n.URL+"/skill.md", "", nil), http.StatusOK)
			if ct := s.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/markdown") {
				t.Errorf("/skill.md Content-Type %q", ct)
			}
			body := string(s.Body)
			if len(body) < 200 || !strings.HasPrefix(strings.TrimSpace(body), "#") || !strings.Contains(body, "/jobs") {
				t.Errorf("/skill.md is not the skill markdown: %.200q", body)
			}
		}
	})

	t.Run("AuthorizationMatrix", func(t *testing.T) { apiAuthMatrix(t, c, L, all) })

	t.Run("ClaimComplete", func(t *testing.T) {
		j := apiCreate(t, F1, map[string]interface{}{"payload": map[string]interface{}{"task": "x"}, "stream": apiUnique("cc")})
		if j.Status != "queued" || j.Attempts != 0 || j.MaxAttempts != 5 || j.Stream == "" || j.Target != nil || j.CreatedAt == "" || j.Comments == nil {
			t.Fatalf("new job: %+v", j)
		}
		cl := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiLeft, map[string]string{"workerId": "w-1"}, 200))
		if cl.Status != "running" || cl.Attempts != 1 || cl.ClaimedBy != "left_claw" || cl.WorkerID != "w-1" ||
			cl.AttemptID == "" || cl.LeaseToken == "" || cl.LeaseExpiresAt == "" || cl.StartedAt == "" {
			t.Fatalf("claimed: %+v", cl)
		}
		exp, err := time.Parse(time.RFC3339Nano, cl.LeaseExpiresAt)
		if err != nil || time.Until(exp) < 200*time.Second || time.Until(exp) > 301*time.Second {
			t.Errorf("default lease should be ~300s: leaseExpiresAt %q", cl.LeaseExpiresAt)
		}
		// The lease token is only in the claim's answer.
		if g := apiGetJob(t, F2, apiLeft, j.ID, ""); g.LeaseToken != "" || g.Status != "running" || g.AttemptID != cl.AttemptID {
			t.Errorf("GET of running job: %+v", g)
		}
		done := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/complete", apiLeft,
			map[string]interface{}{"result": map[string]interface{}{"answer": 42}, "stdout": "out", "stderr": "err"}, 200))
		if done.Status != "done" || string(done.Result) != `{"answer":42}` || done.Stdout != "out" || done.Stderr != "err" ||
			done.FinishedAt == "" || done.ClaimedBy != "" || done.AttemptID != "" || done.Attempts != 1 {
			t.Fatalf("completed: %+v", done)
		}
		if g := apiGetJob(t, L, apiHead, j.ID, ""); g.Status != "done" || string(g.Result) != `{"answer":42}` {
			t.Errorf("GET after complete: %+v", g)
		}
		var at struct {
			Attempts []struct {
				ID, Owner, WorkerID, Outcome string
			} `json:"attempts"`
		}
		apiDecode(t, apiWant(t, apiDo(t, "GET", F1+"/jobs/"+j.ID+"/attempts", apiHead, nil), 200), &at)
		if len(at.Attempts) != 1 || at.Attempts[0].ID != cl.AttemptID || at.Attempts[0].Outcome != "completed" || at.Attempts[0].Owner != "left_claw" {
			t.Errorf("attempts: %+v", at)
		}
	})

	t.Run("FencedCompleteIsIdempotent", func(t *testing.T) {
		j := apiCreate(t, F2, nil)
		cl := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiRight, nil, 200))
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+j.ID+"/complete", apiRight,
			map[string]string{"leaseToken": "not-the-token", "attemptId": cl.AttemptID}), 409, "stale_lease")
		body := map[string]interface{}{"leaseToken": cl.LeaseToken, "attemptId": cl.AttemptID, "result": "r1"}
		a := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/complete", apiRight, body, 200))
		b := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/complete", apiRight, body, 200))
		if a.Status != "done" || b.Status != "done" || a.ModifyIndex != b.ModifyIndex {
			t.Errorf("repeated complete: first %+v, repeat %+v", a, b)
		}
		n := 0
		for _, e := range apiEvents(t, L, apiHead, j.ID) {
			if e.Type == "completed" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d completed events, want 1", n)
		}
	})

	t.Run("FailRequeues", func(t *testing.T) {
		j := apiCreate(t, F1, map[string]interface{}{"maxAttempts": 3})
		apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
		f := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/fail", apiLeft, map[string]interface{}{"error": "boom"}, 200))
		if f.Status != "queued" || f.Attempts != 1 || f.Error == nil || f.Error.Message != "boom" || f.ClaimedBy != "" {
			t.Fatalf("fail with default requeue: %+v", f)
		}
		apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiRight, nil, 200)
		f = apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/fail", apiRight, map[string]interface{}{
			"error": map[string]interface{}{"code": "E_TIMEOUT", "message": "took too long", "stack": "main.go:1", "retryable": true}}, 200))
		if f.Status != "queued" || f.Attempts != 2 || f.Error == nil || f.Error.Code != "E_TIMEOUT" || f.Error.Stack != "main.go:1" || !f.Error.Retryable {
			t.Fatalf("fail with structured error: %+v", f)
		}
	})

	t.Run("FailNoRequeueIsFailed", func(t *testing.T) {
		j := apiCreate(t, F1, nil)
		apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
		f := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/fail", apiLeft, map[string]interface{}{"error": "fatal", "requeue": false}, 200))
		if f.Status != "failed" || f.Attempts != 1 || f.FinishedAt == "" {
			t.Fatalf("fail requeue=false: %+v", f)
		}
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+j.ID+"/claim", apiLeft, nil), 409, "illegal_transition")
		if g := apiGetJob(t, F1, apiHead, j.ID, ""); g.Status != "failed" || g.Attempts != 1 {
			t.Errorf("refused claim changed the job: %+v", g)
		}
	})

	t.Run("MaxAttempts1", func(t *testing.T) {
		j := apiCreate(t, F1, map[string]interface{}{"maxAttempts": 1})
		if j.MaxAttempts != 1 {
			t.Fatalf("maxAttempts %d", j.MaxAttempts)
		}
		apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
		f := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/fail", apiLeft, map[string]interface{}{"error": "once"}, 200))
		if f.Status != "dead" || f.Attempts != 1 {
			t.Fatalf("fail at the limit: %+v, want dead", f)
		}
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+j.ID+"/claim", apiRight, nil), 409, "illegal_transition")
		ev := apiEvents(t, F2, apiHead, j.ID)
		if got := apiEventTypes(ev); got != "created,claimed,failed" || ev[2].To != "dead" {
			t.Errorf("events %s (last to %q)", got, ev[len(ev)-1].To)
		}
	})

	t.Run("MaxAttempts2", func(t *testing.T) {
		j := apiCreate(t, F2, map[string]interface{}{"maxAttempts": 2})
		for i, want := range []string{"queued", "dead"} {
			c := apiJobOf(t, apiPost(t, all[i], "/jobs/"+j.ID+"/claim", apiLeft, nil, 200))
			if c.Attempts != i+1 {
				t.Fatalf("claim %d: attempts %d", i+1, c.Attempts)
			}
			f := apiJobOf(t, apiPost(t, all[i+1], "/jobs/"+j.ID+"/fail", apiLeft, nil, 200))
			if f.Status != want || f.Attempts != i+1 {
				t.Fatalf("fail %d: %+v, want %s", i+1, f, want)
			}
		}
	})

	t.Run("MaxAttemptsValidation", func(t *testing.T) {
		for _, v := range []interface{}{0, -1, 1001, "3", 1.5} {
			r := apiDo(t, "POST", F1+"/jobs", apiHead, map[string]interface{}{"payload": 1, "maxAttempts": v})
			apiWantError(t, r, 400, "invalid_request")
		}
	})

	t.Run("ReleaseDoesNotCountAttempts", func(t *testing.T) {
		j := apiCreate(t, F1, map[string]interface{}{"maxAttempts": 1})
		for i := 0; i < 3; i++ {
			apiPost(t, all[i], "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
			r := apiJobOf(t, apiPost(t, all[(i+1)%3], "/jobs/"+j.ID+"/release", apiLeft, map[string]string{"reason": "busy"}, 200))
			if r.Status != "queued" || r.Attempts != 0 || r.ClaimedBy != "" {
				t.Fatalf("release %d: %+v", i, r)
			}
		}
		c1 := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiRight, nil, 200))
		if c1.Attempts != 1 || c1.Status != "running" {
			t.Fatalf("claim after releases: %+v", c1)
		}
		apiPost(t, F1, "/jobs/"+j.ID+"/complete", apiRight, nil, 200)
		ev := apiEvents(t, F1, apiLeft, j.ID)
		if got := apiEventTypes(ev); got != "created,claimed,released,claimed,released,claimed,released,claimed,completed" {
			t.Errorf("events %s", got)
		}
		if ev[2].Text != "busy" || ev[2].To != "queued" {
			t.Errorf("released event %+v", ev[2])
		}
	})

	t.Run("HeadOverrides", func(t *testing.T) {
		j := apiCreate(t, F1, nil)
		c1 := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200))
		// Moments after the claim the lease is fresh: the heartbeat is
		// answered from the committed lease, with no entry and no event
		// (SPINE_LEASE_RENEW_FRACTION).
		hb := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/heartbeat", apiHead, nil, 200))
		if hb.Status != "running" || hb.ClaimedBy != "left_claw" || hb.LeaseExpiresAt != c1.LeaseExpiresAt {
			t.Errorf("head heartbeat: %+v, want the claim's lease %s", hb, c1.LeaseExpiresAt)
		}
		if r := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/release", apiHead, nil, 200)); r.Status != "queued" || r.Attempts != 0 {
			t.Errorf("head release: %+v", r)
		}
		apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiRight, nil, 200)
		if f := apiJobOf(t, apiPost(t, L, "/jobs/"+j.ID+"/fail", apiHead, map[string]string{"error": "head says no"}, 200)); f.Status != "queued" || f.Attempts != 1 {
			t.Errorf("head fail: %+v", f)
		}
		apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
		if d := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/complete", apiHead, map[string]int{"result": 7}, 200)); d.Status != "done" || string(d.Result) != "7" {
			t.Errorf("head complete: %+v", d)
		}
		ev := apiEvents(t, F2, apiHead, j.ID)
		want := []struct{ typ, actor string }{{"created", "head"}, {"claimed", "left_claw"}, {"released", "head"},
			{"claimed", "right_claw"}, {"failed", "head"}, {"claimed", "left_claw"}, {"completed", "head"}}
		if len(ev) != len(want) {
			t.Fatalf("events %s", apiEventTypes(ev))
		}
		for i, w := range want {
			if ev[i].Type != w.typ || ev[i].Actor != w.actor {
				t.Errorf("event %d = %s by %s, want %s by %s", i+1, ev[i].Type, ev[i].Actor, w.typ, w.actor)
			}
		}
	})

	t.Run("ClawCannotActOnOthersJob", func(t *testing.T) {
		j := apiCreate(t, F1, nil)
		c1 := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200))
		for i, verb := range []string{"heartbeat", "complete", "fail", "release"} {
			apiWantError(t, apiDo(t, "POST", all[i%3]+"/jobs/"+j.ID+"/"+verb, apiRight, map[string]interface{}{}), 403, "not_owner")
		}
		g := apiGetJob(t, F1, apiHead, j.ID, "")
		if g.Status != "running" || g.ClaimedBy != "left_claw" || g.Attempts != 1 || g.AttemptID != c1.AttemptID || g.ModifyIndex != c1.ModifyIndex {
			t.Errorf("refused calls changed the job: %+v", g)
		}
	})

	t.Run("IllegalTransitions", func(t *testing.T) {
		q := apiCreate(t, F1, nil)
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+q.ID+"/complete", apiHead, nil), 409, "illegal_transition")
		apiWantError(t, apiDo(t, "POST", F1+"/jobs/"+q.ID+"/heartbeat", apiHead, nil), 409, "illegal_transition")
		apiWantError(t, apiDo(t, "POST", L+"/jobs/"+q.ID+"/fail", apiHead, nil), 409, "illegal_transition")
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+q.ID+"/release", apiHead, nil), 409, "illegal_transition")

		apiPost(t, F1, "/jobs/"+q.ID+"/claim", apiLeft, nil, 200)
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+q.ID+"/claim", apiLeft, nil), 409, "illegal_transition")
		apiWantError(t, apiDo(t, "POST", F1+"/jobs/"+q.ID+"/claim", apiRight, nil), 409, "illegal_transition")
		apiPost(t, F2, "/jobs/"+q.ID+"/complete", apiLeft, nil, 200)
		for _, verb := range []string{"release", "complete", "fail", "heartbeat", "claim"} {
			tok := apiLeft
			if verb != "claim" {
				tok = apiHead
			}
			apiWantError(t, apiDo(t, "POST", F1+"/jobs/"+q.ID+"/"+verb, tok, nil), 409, "illegal_transition")
		}
		if g := apiGetJob(t, F2, apiHead, q.ID, ""); g.Status != "done" || g.Attempts != 1 {
			t.Errorf("refused transitions changed the job: %+v", g)
		}
	})

	t.Run("Targets", func(t *testing.T) {
		s := apiUnique("tg")
		open := apiCreate(t, F1, map[string]interface{}{"stream": s})
		left := apiCreate(t, F2, map[string]interface{}{"stream": s, "target": "left_claw"})
		right := apiCreate(t, L, map[string]interface{}{"stream": s, "target": "right_claw"})
		if left.Target == nil || *left.Target != "left_claw" {
			t.Fatalf("target not kept: %+v", left)
		}
		ids := func(js []apiJob) string {
			var out []string
			for _, j := range js {
				out = append(out, j.ID)
			}
			return strings.Join(out, ",")
		}
		q := url.Values{"stream": {s}}
		if got, want := ids(apiListAll(t, F1, apiLeft, q)), open.ID+","+left.ID; got != want {
			t.Errorf("left_claw lists %s, want %s", got, want)
		}
		if got, want := ids(apiListAll(t, F2, apiRight, q)), open.ID+","+right.ID; got != want {
			t.Errorf("right_claw lists %s, want %s", got, want)
		}
		if got, want := ids(apiListAll(t, L, apiHead, q)), open.ID+","+left.ID+","+right.ID; got != want {
			t.Errorf("head lists %s, want %s", got, want)
		}
		if got, want := ids(apiListAll(t, F1, apiHead, url.Values{"stream": {s}, "target": {"right_claw"}})), right.ID; got != want {
			t.Errorf("target filter lists %s, want %s", got, want)
		}
		apiWantError(t, apiDo(t, "GET", F1+"/jobs/"+right.ID, apiLeft, nil), 404, "not_found")
		apiWantError(t, apiDo(t, "GET", F2+"/jobs/"+right.ID+"/events", apiLeft, nil), 404, "not_found")
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+right.ID+"/comment", apiLeft, map[string]string{"text": "peek"}), 404, "not_found")
		apiWantError(t, apiDo(t, "GET", F2+"/jobs/"+left.ID, apiRight, nil), 404, "not_found")
		// A claim of a job the claw may not read is not found, as the read
		// is, and the refusal shows no job: forwarded from a follower too.
		for _, r := range []*apiResp{
			apiDo(t, "POST", F2+"/jobs/"+right.ID+"/claim", apiLeft, nil),
			apiDo(t, "POST", F1+"/jobs/"+left.ID+"/claim", apiRight, nil),
		} {
			apiWantError(t, r, 404, "not_found")
			if strings.Contains(string(r.Body), `"job"`) {
				t.Errorf("a refused claim shows the job: %s", r.Body)
			}
		}
		if g := apiGetJob(t, L, apiHead, right.ID, ""); g.Status != "queued" || g.Attempts != 0 {
			t.Errorf("refused claim changed the job: %+v", g)
		}
		apiGetJob(t, F1, apiLeft, open.ID, "")
		apiGetJob(t, F1, apiLeft, left.ID, "")
		apiPost(t, F1, "/jobs/"+right.ID+"/claim", apiRight, nil, 200)
		apiPost(t, F2, "/jobs/"+left.ID+"/claim", apiLeft, nil, 200)
		for _, v := range []string{"-bad", "a b", strings.Repeat("x", 200)} {
			apiWantError(t, apiDo(t, "POST", F1+"/jobs", apiHead, map[string]interface{}{"payload": 1, "target": v}), 400, "invalid_request")
		}
	})

	t.Run("CommentsAndEvents", func(t *testing.T) {
		j := apiCreate(t, F1, nil)
		apiPost(t, F2, "/jobs/"+j.ID+"/comment", apiHead, map[string]string{"text": "hello"}, 200)
		c1 := apiJobOf(t, apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiLeft, map[string]string{"workerId": "w-7"}, 200))
		cm := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/comment", apiLeft, map[string]string{"text": "working on it"}, 200))
		if len(cm.Comments) != 2 || cm.Comments[0].Text != "hello" || cm.Comments[0].Actor != "head" ||
			cm.Comments[1].Text != "working on it" || !strings.HasPrefix(cm.Comments[1].Actor, "left_claw") || cm.Comments[1].At == "" {
			t.Errorf("comments %+v", cm.Comments)
		}
		apiPost(t, L, "/jobs/"+j.ID+"/heartbeat", apiLeft, nil, 200) // fresh lease: no entry, no event
		apiPost(t, F1, "/jobs/"+j.ID+"/release", apiLeft, map[string]string{"reason": "later"}, 200)
		c2 := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiRight, nil, 200))
		apiPost(t, F1, "/jobs/"+j.ID+"/complete", apiRight, nil, 200)
		apiWantError(t, apiDo(t, "POST", F1+"/jobs/"+j.ID+"/comment", apiLeft, map[string]string{"text": "  "}), 400, "invalid_request")
		apiWantError(t, apiDo(t, "POST", F1+"/jobs/00000000-0000-0000-0000-000000000000/comment", apiHead, map[string]string{"text": "x"}), 404, "not_found")

		type w struct{ typ, actor, from, to, attempt, text string }
		want := []w{
			{"created", "head", "", "queued", "", ""},
			{"comment", "head", "", "", "", "hello"},
			{"claimed", "left_claw", "queued", "running", c1.AttemptID, ""},
			{"comment", "left_claw", "", "", "", "working on it"},
			{"released", "left_claw", "running", "queued", c1.AttemptID, "later"},
			{"claimed", "right_claw", "queued", "running", c2.AttemptID, ""},
			{"completed", "right_claw", "running", "done", c2.AttemptID, ""},
		}
		for _, base := range []string{F1, F2, L} {
			ev := apiEvents(t, base, apiLeft, j.ID)
			if len(ev) != len(want) {
				t.Fatalf("events via %s: %s", base, apiEventTypes(ev))
			}
			prev := ""
			for i, x := range want {
				e := ev[i]
				if e.Seq != i+1 || e.Type != x.typ || !strings.HasPrefix(e.Actor, x.actor) || e.From != x.from || e.To != x.to ||
					(x.attempt != "" && e.AttemptID != x.attempt) || (x.text != "" && e.Text != x.text) {
					t.Errorf("event %d = %+v, want %+v", i+1, e, x)
				}
				if e.At == "" || e.At < prev {
					t.Errorf("event %d at %q after %q", i+1, e.At, prev)
				}
				prev = e.At
			}
			if ev[2].WorkerID != "w-7" {
				t.Errorf("claim event workerId %q", ev[2].WorkerID)
			}
		}
	})

	t.Run("ListFiltersAndPagination", func(t *testing.T) {
		s := apiUnique("lf")
		var made []apiJob
		for i := 0; i < 7; i++ {
			made = append(made, apiCreate(t, all[i%3], map[string]interface{}{"stream": s, "payload": i}))
		}
		other := apiCreate(t, F1, map[string]interface{}{"stream": apiUnique("lf-other")})
		apiPost(t, F1, "/jobs/"+made[1].ID+"/claim", apiLeft, nil, 200)
		apiPost(t, F2, "/jobs/"+made[4].ID+"/claim", apiRight, nil, 200)
		apiPost(t, F2, "/jobs/"+made[4].ID+"/complete", apiRight, nil, 200)

		// Pages of 3 through a follower: 3, 3, 1, in creation order.
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			q := url.Values{"stream": {s}, "limit": {"3"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var l apiList
			apiDecode(t, apiWant(t, apiDo(t, "GET", F2+"/jobs?"+q.Encode(), apiHead, nil), 200), &l)
			if wantN := []int{3, 3, 1}[min(page, 2)]; len(l.Jobs) != wantN {
				t.Fatalf("page %d has %d jobs, want %d", page, len(l.Jobs), wantN)
			}
			for _, j := range l.Jobs {
				got = append(got, j.ID)
			}
			if l.NextCursor == nil {
				if page != 2 {
					t.Fatalf("pagination ended after page %d", page)
				}
				break
			}
			if page == 2 {
				t.Fatalf("page 3 has a nextCursor %q", *l.NextCursor)
			}
			cursor = *l.NextCursor
		}
		for i, id := range got {
			if id != made[i].ID {
				t.Fatalf("paged ids %v, want creation order", got)
			}
		}
		count := func(q url.Values) int { return len(apiListAll(t, F1, apiHead, q)) }
		if n := count(url.Values{"stream": {s}, "status": {"running"}}); n != 1 {
			t.Errorf("status=running: %d", n)
		}
		if n := count(url.Values{"stream": {s}, "status": {"done"}}); n != 1 {
			t.Errorf("status=done: %d", n)
		}
		if n := count(url.Values{"stream": {s}, "status": {"queued"}}); n != 5 {
			t.Errorf("status=queued: %d", n)
		}
		for _, j := range apiListAll(t, F1, apiHead, url.Values{"status": {"queued"}}) {
			if j.Status != "queued" {
				t.Errorf("status=queued listed a %s job", j.Status)
			}
		}
		if js := apiListAll(t, F2, apiHead, url.Values{"stream": {other.Stream}}); len(js) != 1 || js[0].ID != other.ID {
			t.Errorf("stream filter: %+v", js)
		}
		for _, bad := range []string{"status=sleeping", "limit=0", "limit=1001", "limit=x", "cursor=abc"} {
			apiWantError(t, apiDo(t, "GET", F1+"/jobs?"+bad, apiHead, nil), 400, "invalid_request")
		}
	})

	t.Run("RacingClaims", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			j := apiCreate(t, all[round], nil)
			var wg sync.WaitGroup
			start := make(chan struct{})
			results := make([]*apiResp, 10)
			errs := make([]error, 10)
			for i := 0; i < 10; i++ {
				tok := apiLeft
				if i%2 == 1 {
					tok = apiRight
				}
				wg.Add(1)
				go func(i int, tok string) {
					defer wg.Done()
					<-start
					results[i], errs[i] = apiRequest("POST", all[i%3]+"/jobs/"+j.ID+"/claim", tok, map[string]string{"workerId": fmt.Sprint("racer-", i)})
				}(i, tok)
			}
			close(start)
			wg.Wait()
			wins := 0
			winner := ""
			for i, r := range results {
				if errs[i] != nil {
					t.Fatalf("racer %d: %v", i, errs[i])
				}
				switch r.Status {
				case 200:
					wins++
					winner = fmt.Sprint("racer-", i)
				case 409:
					apiWantError(t, r, 409, "illegal_transition")
				default:
					t.Errorf("racer %d: %s", i, r)
				}
			}
			if wins != 1 {
				t.Fatalf("%d claims won, want exactly 1", wins)
			}
			g := apiGetJob(t, L, apiHead, j.ID, "")
			if g.Attempts != 1 || g.WorkerID != winner {
				t.Errorf("after the race: attempts %d worker %q, want 1 and %s", g.Attempts, g.WorkerID, winner)
			}
		}
	})

	t.Run("ReadYourWrites", func(t *testing.T) {
		for i := 0; i < 15; i++ {
			a, b := fs[i%2].URL, fs[(i+1)%2].URL
			j := apiCreate(t, a, map[string]interface{}{"payload": i})
			if g := apiGetJob(t, b, apiHead, j.ID, ""); string(g.Payload) != fmt.Sprint(i) {
				t.Fatalf("read through the other follower: %+v", g)
			}
			apiPost(t, b, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
			apiPost(t, a, "/jobs/"+j.ID+"/complete", apiLeft, nil, 200)
			if g := apiGetJob(t, b, apiLeft, j.ID, ""); g.Status != "done" {
				t.Fatalf("read after complete: %s", g.Status)
			}
			if g := apiGetJob(t, a, apiLeft, j.ID, "?consistent"); g.Status != "done" {
				t.Fatalf("consistent read after complete: %s", g.Status)
			}
		}
	})

	t.Run("Idempotency", func(t *testing.T) {
		key := apiUnique("key")
		s := apiUnique("idem")
		body := map[string]interface{}{"payload": "once", "stream": s}
		r1 := apiWant(t, apiDo(t, "POST", F1+"/jobs", apiHead, body, "Idempotency-Key", key), 201)
		r2 := apiWant(t, apiDo(t, "POST", F2+"/jobs", apiHead, body, "Idempotency-Key", key), 200)
		body3 := map[string]interface{}{"payload": "once", "stream": s, "idempotencyKey": key}
		r3 := apiWant(t, apiDo(t, "POST", L+"/jobs", apiHead, body3), 200)
		j1, j2, j3 := apiJobOf(t, r1), apiJobOf(t, r2), apiJobOf(t, r3)
		if j1.ID != j2.ID || j1.ID != j3.ID || j2.IdempotencyKey != key {
			t.Fatalf("ids %s %s %s (key %q)", j1.ID, j2.ID, j3.ID, j2.IdempotencyKey)
		}
		if n := len(apiListAll(t, F2, apiHead, url.Values{"stream": {s}})); n != 1 {
			t.Fatalf("%d jobs exist, want 1", n)
		}
		apiWantError(t, apiDo(t, "POST", F1+"/jobs", apiHead, body3, "Idempotency-Key", key+"-other"), 400, "invalid_request")

		// Concurrent creates with one new key through every node: one 201.
		key2 := apiUnique("key")
		var wg sync.WaitGroup
		var created atomic.Int32
		ids := make([]string, 9)
		for i := 0; i < 9; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r, err := apiRequest("POST", all[i%3]+"/jobs", apiHead, map[string]interface{}{"payload": i, "stream": s}, "Idempotency-Key", key2)
				if err != nil || (r.Status != 201 && r.Status != 200) {
					t.Errorf("concurrent create %d: %v %v", i, r, err)
					return
				}
				if r.Status == 201 {
					created.Add(1)
				}
				var j apiJob
				_ = json.Unmarshal(r.Body, &j)
				ids[i] = j.ID
			}(i)
		}
		wg.Wait()
		if created.Load() != 1 {
			t.Errorf("%d concurrent creates answered 201, want 1", created.Load())
		}
		for _, id := range ids {
			if id != ids[0] {
				t.Errorf("concurrent creates answered ids %v", ids)
				break
			}
		}
		if n := len(apiListAll(t, F1, apiHead, url.Values{"stream": {s}})); n != 2 {
			t.Errorf("%d jobs exist, want 2", n)
		}
	})

	t.Run("Blobs", func(t *testing.T) {
		data := make([]byte, 600<<10+123) // three 256 KiB chunks
		_, _ = rand.Read(data)
		sum := sha256.Sum256(data)
		id := hex.EncodeToString(sum[:])
		body, ct := apiMultipart(t, "file", "model.bin", "application/x-spine-test", data)
		r := apiWant(t, apiDo(t, "POST", F1+"/blobs", apiLeft, body, "Content-Type", ct), 201)
		var b struct {
			ID          string `json:"id"`
			Size        int64  `json:"size"`
			ContentType string `json:"contentType"`
		}
		apiDecode(t, r, &b)
		if b.ID != id || b.Size != int64(len(data)) || b.ContentType != "application/x-spine-test" {
			t.Fatalf("upload answered %+v, want id %s size %d", b, id, len(data))
		}
		apiWantHeaders(t, r)
		// Same bytes again, through another node: 200, same id.
		r2 := apiWant(t, apiDo(t, "POST", F2+"/blobs", apiHead, body, "Content-Type", ct), 200)
		apiDecode(t, r2, &b)
		if b.ID != id {
			t.Fatalf("re-upload id %s", b.ID)
		}
		get := func(base, query, tok string) {
			t.Helper()
			g := apiWant(t, apiDo(t, "GET", base+"/blobs/"+id+query, tok, nil), 200)
			if !bytes.Equal(g.Body, data) {
				t.Fatalf("GET %s/blobs%s: %d bytes differ from the %d uploaded", base, query, len(g.Body), len(data))
			}
			if got := g.Header.Get("Content-Type"); got != "application/x-spine-test" {
				t.Errorf("GET blob Content-Type %q", got)
			}
		}
		get(F2, "", apiRight) // immediately, default consistency, another node
		apiCaughtUp(t, c)
		for _, n := range c.Nodes {
			get(n.URL, "?stale", apiHead)
			get(n.URL, "", apiLeft)
		}
		// A small text file gets its content type kept too.
		tb, tct := apiMultipart(t, "file", "notes.txt", "text/plain; charset=utf-8", []byte("hello blob"))
		apiDecode(t, apiWant(t, apiDo(t, "POST", F2+"/blobs", apiHead, tb, "Content-Type", tct), 201), &b)
		g := apiWant(t, apiDo(t, "GET", F1+"/blobs/"+b.ID, apiHead, nil), 200)
		if string(g.Body) != "hello blob" || g.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("text blob: %q %q", g.Body, g.Header.Get("Content-Type"))
		}

		nb, nct := apiMultipart(t, "", "", "", nil)
		apiWantError(t, apiDo(t, "POST", F1+"/blobs", apiHead, nb, "Content-Type", nct), 400, "invalid_request")
		apiWantError(t, apiDo(t, "POST", F1+"/blobs", apiHead, `{"file":"x"}`, "Content-Type", "application/json"), 400, "invalid_request")
		apiWantError(t, apiDo(t, "GET", F2+"/blobs/"+strings.Repeat("0", 64), apiHead, nil), 404, "not_found")
		apiWantError(t, apiDo(t, "GET", F2+"/blobs/"+id, "", nil), 401, "unauthorized")

		// Over the default 8 MiB limit.
		big := make([]byte, 8<<20+1)
		bb, bct := apiMultipart(t, "file", "big.bin", "application/octet-stream", big)
		apiWantError(t, apiDo(t, "POST", F1+"/blobs", apiHead, bb, "Content-Type", bct), 413, "too_large")
	})

	t.Run("Errors", func(t *testing.T) {
		j := apiCreate(t, F1, nil)
		cases := []struct {
			name        string
			method, url string
			token       string
			body        interface{}
			status      int
			code        string
		}{
			{"malformed JSON", "POST", F1 + "/jobs", apiHead, `{"payload":`, 400, "invalid_json"},
			{"malformed JSON on a job route", "POST", F2 + "/jobs/" + j.ID + "/claim", apiLeft, `{workerId`, 400, "invalid_json"},
			{"missing payload", "POST", F2 + "/jobs", apiHead, `{"stream":"x"}`, 400, "invalid_request"},
			{"null payload", "POST", F2 + "/jobs", apiHead, `{"payload":null}`, 400, "invalid_request"},
			{"wrong field type", "POST", F1 + "/jobs", apiHead, `{"payload":1,"stream":5}`, 400, "invalid_request"},
			{"unknown job", "GET", F1 + "/jobs/does-not-exist", apiHead, nil, 404, "not_found"},
			{"unknown job events", "GET", F2 + "/jobs/does-not-exist/events", apiHead, nil, 404, "not_found"},
			{"claim unknown job", "POST", F2 + "/jobs/does-not-exist/claim", apiLeft, nil, 404, "not_found"},
			{"complete unknown job", "POST", L + "/jobs/does-not-exist/complete", apiHead, nil, 404, "not_found"},
			{"bad token", "GET", F1 + "/jobs", apiBad, nil, 401, "unauthorized"},
			{"no token", "POST", F2 + "/jobs", "", `{"payload":1}`, 401, "unauthorized"},
			{"wrong role", "POST", F1 + "/jobs", apiLeft, `{"payload":1}`, 403, "forbidden"},
			{"illegal transition", "POST", F2 + "/jobs/" + j.ID + "/complete", apiHead, nil, 409, "illegal_transition"},
			{"JSON body over 1 MiB", "POST", F1 + "/jobs", apiHead, `{"payload":"` + strings.Repeat("a", 1<<20+10) + `"}`, 413, "too_large"},
			{"unknown route", "GET", F1 + "/no/such/route", apiHead, nil, 404, "not_found"},
			{"unknown route, no token", "POST", F2 + "/nope", "", nil, 404, "not_found"},
			{"wrong method", "DELETE", F1 + "/jobs", apiHead, nil, 405, "method_not_allowed"},
			{"wrong method on a job", "PUT", F2 + "/jobs/" + j.ID, apiHead, `{}`, 405, "method_not_allowed"},
			{"wrong method on health", "POST", L + "/health", "", nil, 405, "method_not_allowed"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				apiWantError(t, apiDo(t, tc.method, tc.url, tc.token, tc.body), tc.status, tc.code)
			})
		}
		if g := apiGetJob(t, L, apiHead, j.ID, ""); g.Status != "queued" || g.Attempts != 0 {
			t.Errorf("refused requests changed the job: %+v", g)
		}
		// Successful answers carry the headers too; a forwarded write names
		// the node the caller talked to and the write's index.
		// (Leadership can move on a loaded machine: look for one consistent view.)
		var nj apiJob
		apiEventually(t, 20*time.Second, "a forwarded create names node, leader and index", func() error {
			l, fl := apiRoles(t, c)
			r := apiWant(t, apiDo(t, "POST", fl[0].URL+"/jobs", apiHead, map[string]int{"payload": 1}), 201)
			apiWantHeaders(t, r)
			nj = apiJobOf(t, r)
			if r.Header.Get("X-Spine-Node") != fl[0].ID || r.Header.Get("X-Spine-Leader") != l.ID || apiIndex(r) != nj.CreateIndex {
				return fmt.Errorf("forwarded create via %s (leader %s): headers node=%q leader=%q index=%q (createIndex %d)", fl[0].ID, l.ID,
					r.Header.Get("X-Spine-Node"), r.Header.Get("X-Spine-Leader"), r.Header.Get("X-Spine-Index"), nj.CreateIndex)
			}
			return nil
		})
		apiCaughtUp(t, c)
		g := apiWant(t, apiDo(t, "GET", F1+"/jobs/"+nj.ID+"?stale", apiHead, nil), 200)
		apiWantHeaders(t, g)
		if g.Header.Get("X-Spine-Node") != fs[0].ID {
			t.Errorf("stale read served by %q", g.Header.Get("X-Spine-Node"))
		}
	})
}

func apiEventTypes(ev []apiEvent) string {
	var s []string
	for _, e := range ev {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

// apiAuthMatrix checks every route against every kind of caller. Requests
// rotate over all nodes, so most are forwarded with the caller's token.
func apiAuthMatrix(t *testing.T, c *testcluster.Cluster, L string, all []string) {
	roles := []string{"head", "left_claw", "right_claw", "none", "bad"}
	tokens := map[string]string{"head": apiHead, "left_claw": apiLeft, "right_claw": apiRight, "none": "", "bad": apiBad}
	shared := apiCreate(t, L, nil)
	blobBody, blobCT := apiMultipart(t, "file", "a.txt", "text/plain", []byte("auth matrix blob"))
	var blob struct{ ID string }
	apiDecode(t, apiWant(t, apiDo(t, "POST", L+"/blobs", apiHead, blobBody, "Content-Type", blobCT), 201), &blob)

	// running returns a fresh job claimed by left_claw.
	running := func(t *testing.T) string {
		j := apiCreate(t, L, nil)
		apiPost(t, L, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200)
		return j.ID
	}
	type want struct {
		status int
		code   string
	}
	ok := func(s int) want { return want{status: s} }
	forb := want{403, "forbidden"}
	notOwner := want{403, "not_owner"}
	type route struct {
		method, name string
		// prep returns the path and body for one call by role.
		prep   func(t *testing.T, role string) (path string, body interface{}, hdr []string)
		want   map[string]want // by role; none/bad default to 401 unless public
		public bool
	}
	fixed := func(path string, body interface{}) func(*testing.T, string) (string, interface{}, []string) {
		return func(*testing.T, string) (string, interface{}, []string) { return path, body, nil }
	}
	onRunning := func(verb string) func(*testing.T, string) (string, interface{}, []string) {
		return func(t *testing.T, role string) (string, interface{}, []string) {
			if tokens[role] == "" || tokens[role] == apiBad {
				return "/jobs/" + shared.ID + "/" + verb, map[string]string{}, nil
			}
			return "/jobs/" + running(t) + "/" + verb, map[string]string{}, nil
		}
	}
	blobSeq := 0
	routes := []route{
		{method: "GET", name: "/health", prep: fixed("/health", nil), public: true},
		{method: "GET", name: "/skill.md", prep: fixed("/skill.md", nil), public: true},
		{method: "POST", name: "/jobs", prep: fixed("/jobs", map[string]int{"payload": 1}),
			want: map[string]want{"head": ok(201), "left_claw": forb, "right_claw": forb}},
		{method: "GET", name: "/jobs", prep: fixed("/jobs?limit=5", nil),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "GET", name: "/jobs/{id}", prep: fixed("/jobs/"+shared.ID, nil),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "GET", name: "/jobs/{id}/events", prep: fixed("/jobs/"+shared.ID+"/events", nil),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "GET", name: "/jobs/{id}/attempts", prep: fixed("/jobs/"+shared.ID+"/attempts", nil),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "POST", name: "/jobs/{id}/claim", prep: func(t *testing.T, role string) (string, interface{}, []string) {
			return "/jobs/" + apiCreate(t, L, nil).ID + "/claim", map[string]string{}, nil
		}, want: map[string]want{"head": forb, "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "POST", name: "/jobs/{id}/heartbeat", prep: onRunning("heartbeat"),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": notOwner}},
		{method: "POST", name: "/jobs/{id}/complete", prep: onRunning("complete"),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": notOwner}},
		{method: "POST", name: "/jobs/{id}/fail", prep: onRunning("fail"),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": notOwner}},
		{method: "POST", name: "/jobs/{id}/release", prep: onRunning("release"),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": notOwner}},
		{method: "POST", name: "/jobs/{id}/comment", prep: fixed("/jobs/"+shared.ID+"/comment", map[string]string{"text": "hi"}),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "POST", name: "/blobs", prep: func(t *testing.T, role string) (string, interface{}, []string) {
			blobSeq++
			b, ct := apiMultipart(t, "file", "f.txt", "text/plain", []byte(fmt.Sprintf("blob %d %s %s", blobSeq, role, apiUnique(""))))
			return "/blobs", b, []string{"Content-Type", ct}
		}, want: map[string]want{"head": ok(201), "left_claw": ok(201), "right_claw": ok(201)}},
		{method: "GET", name: "/blobs/{id}", prep: fixed("/blobs/"+blob.ID, nil),
			want: map[string]want{"head": ok(200), "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "POST", name: "/internal/worker/claim", prep: fixed("/internal/worker/claim",
			map[string]interface{}{"worker_id": "w-auth", "streams": []string{apiUnique("empty")}, "max_wait_ms": 0}),
			want: map[string]want{"head": forb, "left_claw": ok(200), "right_claw": ok(200)}},
		{method: "POST", name: "/internal/worker/heartbeat", prep: fixed("/internal/worker/heartbeat", map[string]string{}),
			want: map[string]want{"head": forb, "left_claw": {400, "invalid_request"}, "right_claw": {400, "invalid_request"}}},
		{method: "POST", name: "/internal/worker/complete", prep: fixed("/internal/worker/complete", map[string]string{}),
			want: map[string]want{"head": forb, "left_claw": {400, "invalid_request"}, "right_claw": {400, "invalid_request"}}},
		{method: "POST", name: "/internal/worker/fail", prep: fixed("/internal/worker/fail", map[string]string{}),
			want: map[string]want{"head": forb, "left_claw": {400, "invalid_request"}, "right_claw": {400, "invalid_request"}}},
		{method: "GET", name: "/dlq", prep: fixed("/dlq", nil),
			want: map[string]want{"head": ok(200), "left_claw": forb, "right_claw": forb}},
		{method: "POST", name: "/dlq/{id}/redrive", prep: func(t *testing.T, role string) (string, interface{}, []string) {
			id := running(t)
			apiPost(t, L, "/jobs/"+id+"/fail", apiLeft, map[string]bool{"requeue": false}, 200)
			return "/dlq/" + id + "/redrive", nil, nil
		}, want: map[string]want{"head": ok(200), "left_claw": forb, "right_claw": forb}},
		{method: "GET", name: "/cluster/status", prep: fixed("/cluster/status", nil),
			want: map[string]want{"head": ok(200), "left_claw": forb, "right_claw": forb}},
		{method: "POST", name: "/cluster/join", prep: fixed("/cluster/join", map[string]string{}),
			want: map[string]want{"head": {400, "invalid_request"}, "left_claw": forb, "right_claw": forb}},
		{method: "POST", name: "/cluster/remove", prep: fixed("/cluster/remove", map[string]string{"node_id": "ghost-node"}),
			want: map[string]want{"head": ok(200), "left_claw": forb, "right_claw": forb}},
		// head may transfer leadership (covered by the CLI test); here only refusals.
		{method: "POST", name: "/cluster/transfer-leader", prep: fixed("/cluster/transfer-leader", map[string]string{}),
			want: map[string]want{"left_claw": forb, "right_claw": forb}},
	}
	k := 0
	for _, rt := range routes {
		for _, role := range roles {
			w, ok := rt.want[role]
			switch {
			case rt.public:
				w = want{status: 200}
			case role == "none" || role == "bad":
				w = want{401, "unauthorized"}
			case !ok:
				continue
			}
			base := all[k%len(all)]
			k++
			t.Run(rt.method+" "+rt.name+" as "+role, func(t *testing.T) {
				path, body, hdr := rt.prep(t, role)
				r := apiDo(t, rt.method, base+path, tokens[role], body, hdr...)
				if w.code != "" {
					apiWantError(t, r, w.status, w.code)
					return
				}
				apiWant(t, r, w.status)
				if !rt.public || rt.name == "/health" {
					apiWantHeaders(t, r)
				}
			})
		}
	}
}

// TestAPITuned covers behaviours that need settings: short leases with a
// fast reaper, token rotation, and a small blob limit.
func TestAPITuned(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		"LEASE_SECONDS": "1", "REAPER_INTERVAL_MS": "100", "SPINE_LEASE_GRACE_MS": "0",
		"HEAD_TOKENS": "head-old,head-new", "LEFT_CLAW_TOKENS": "left-old, left-new",
		"SPINE_MAX_BLOB_BYTES": "65536",
	})
	leader, fs := apiRoles(t, c)
	L, F1, F2 := leader.URL, fs[0].URL, fs[1].URL

	t.Run("TokenRotation", func(t *testing.T) {
		var ids []string
		for i, tok := range []string{"head-old", "head-new", apiHead} {
			r := apiWant(t, apiDo(t, "POST", []string{F1, F2, L}[i]+"/jobs", tok, map[string]int{"payload": i}), 201)
			ids = append(ids, apiJobOf(t, r).ID)
		}
		for _, tok := range []string{"head-old", "head-new", apiHead} {
			apiGetJob(t, F2, tok, ids[0], "")
		}
		c1 := apiJobOf(t, apiPost(t, F1, "/jobs/"+ids[0]+"/claim", "left-new", nil, 200))
		if c1.ClaimedBy != "left_claw" {
			t.Errorf("rotated claw token acts as %q", c1.ClaimedBy)
		}
		apiPost(t, F2, "/jobs/"+ids[0]+"/complete", "left-old", nil, 200) // same role, other token
		apiWantError(t, apiDo(t, "POST", F2+"/jobs/"+ids[1]+"/claim", "head-new", nil), 403, "forbidden")
		for _, tok := range []string{"head-older", "head-old,head-new", "left-", apiLeft + "x"} {
			apiWantError(t, apiDo(t, "GET", F1+"/jobs", tok, nil), 401, "unauthorized")
		}
	})

	t.Run("ReaperRequeuesThenKills", func(t *testing.T) {
		j := apiCreate(t, F1, map[string]interface{}{"maxAttempts": 2})
		c1 := apiJobOf(t, apiPost(t, F2, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200))
		var g apiJob
		apiEventually(t, 15*time.Second, "reaped back to queued", func() error {
			g = apiGetJob(t, F1, apiHead, j.ID, "")
			if g.Status != "queued" {
				return fmt.Errorf("status %s", g.Status)
			}
			return nil
		})
		if g.Attempts != 1 || g.ClaimedBy != "" {
			t.Errorf("after first reap: %+v", g)
		}
		ev := apiEvents(t, F2, apiHead, j.ID)
		last := ev[len(ev)-1]
		if apiEventTypes(ev) != "created,claimed,reaped" || last.Actor != "reaper" || last.From != "running" || last.To != "queued" || last.AttemptID != c1.AttemptID {
			t.Errorf("events %s, last %+v", apiEventTypes(ev), last)
		}
		// The reaped claimant's lease is gone.
		apiWantError(t, apiDo(t, "POST", F1+"/jobs/"+j.ID+"/complete", apiLeft,
			map[string]string{"leaseToken": c1.LeaseToken, "attemptId": c1.AttemptID}), 409, "illegal_transition")
		var at struct {
			Attempts []struct{ Outcome string } `json:"attempts"`
		}
		apiDecode(t, apiWant(t, apiDo(t, "GET", L+"/jobs/"+j.ID+"/attempts", apiHead, nil), 200), &at)
		if len(at.Attempts) != 1 || at.Attempts[0].Outcome != "expired" {
			t.Errorf("attempts %+v", at)
		}

		apiPost(t, F1, "/jobs/"+j.ID+"/claim", apiRight, nil, 200)
		apiEventually(t, 15*time.Second, "reaped to dead at the limit", func() error {
			g = apiGetJob(t, F2, apiHead, j.ID, "")
			if g.Status != "dead" {
				return fmt.Errorf("status %s", g.Status)
			}
			return nil
		})
		ev = apiEvents(t, F1, apiHead, j.ID)
		if last := ev[len(ev)-1]; g.Attempts != 2 || last.Type != "reaped" || last.To != "dead" {
			t.Errorf("dead job %+v, events %s", g, apiEventTypes(ev))
		}
	})

	t.Run("HeartbeatedJobIsNotReaped", func(t *testing.T) {
		j := apiCreate(t, F2, map[string]interface{}{"maxAttempts": 1})
		c1 := apiJobOf(t, apiPost(t, L, "/jobs/"+j.ID+"/claim", apiLeft, nil, 200))
		end := time.Now().Add(3 * time.Second)
		for time.Now().Before(end) {
			apiPost(t, L, "/jobs/"+j.ID+"/heartbeat", apiLeft, map[string]string{"leaseToken": c1.LeaseToken}, 200)
			<-time.After(200 * time.Millisecond) // the worker's heartbeat cadence, not a wait for state
		}
		g := apiGetJob(t, F1, apiHead, j.ID, "")
		if g.Status != "running" || g.Attempts != 1 || g.AttemptID != c1.AttemptID {
			t.Fatalf("heartbeated job after 3 lease lengths: %+v", g)
		}
		for _, e := range apiEvents(t, F1, apiHead, j.ID) {
			if e.Type == "reaped" {
				t.Fatalf("heartbeated job was reaped: %+v", e)
			}
		}
		apiPost(t, F2, "/jobs/"+j.ID+"/complete", apiLeft, map[string]string{"leaseToken": c1.LeaseToken, "attemptId": c1.AttemptID}, 200)
	})

	t.Run("BlobOverLimit", func(t *testing.T) {
		at := make([]byte, 65536)
		_, _ = rand.Read(at)
		b, ct := apiMultipart(t, "file", "at-limit.bin", "application/octet-stream", at)
		apiWant(t, apiDo(t, "POST", F1+"/blobs", apiHead, b, "Content-Type", ct), 201)
		over := append(at, 1)
		b, ct = apiMultipart(t, "file", "over.bin", "application/octet-stream", over)
		apiWantError(t, apiDo(t, "POST", F2+"/blobs", apiLeft, b, "Content-Type", ct), 413, "too_large")
		sum := sha256.Sum256(over)
		apiWantError(t, apiDo(t, "GET", L+"/blobs/"+hex.EncodeToString(sum[:]), apiHead, nil), 404, "not_found")
	})
}

// TestAPIFailover kills nodes: a blob survives the loss of the node it was
// uploaded to, and client traffic keeps flowing across a leader SIGKILL.
func TestAPIFailover(t *testing.T) {
	c := startCluster(t, 3, nil)

	t.Run("BlobSurvivesKillOfUploader", func(t *testing.T) {
		_, fs := apiRoles(t, c)
		up := fs[0]
		data := make([]byte, 700<<10)
		_, _ = rand.Read(data)
		b, ct := apiMultipart(t, "file", "weights.bin", "application/x-weights", data)
		var blob struct{ ID string }
		apiDecode(t, apiWant(t, apiDo(t, "POST", up.URL+"/blobs", apiLeft, b, "Content-Type", ct), 201), &blob)
		if err := c.Kill(up); err != nil {
			t.Fatal(err)
		}
		check := func(n *testcluster.Node, query string) {
			t.Helper()
			g := apiWant(t, apiDo(t, "GET", n.URL+"/blobs/"+blob.ID+query, apiRight, nil), 200)
			if !bytes.Equal(g.Body, data) || g.Header.Get("Content-Type") != "application/x-weights" {
				t.Fatalf("blob via %s%s: %d bytes, type %q", n.ID, query, len(g.Body), g.Header.Get("Content-Type"))
			}
		}
		for _, n := range c.Nodes {
			if n.Running() {
				check(n, "")
			}
		}
		if err := c.Restart(up); err != nil {
			t.Fatal(err)
		}
		apiCaughtUp(t, c)
		for _, n := range c.Nodes {
			check(n, "?stale")
		}
	})

	t.Run("LongPagesAcrossLeaderKill", func(t *testing.T) { apiLongPagesAcrossLeaderKill(t, c) })

	t.Run("LongPagesAcrossLeaderPause", func(t *testing.T) { apiLongPagesAcrossLeaderPause(t, c) })

	t.Run("KeepsServingAcrossLeaderKill", func(t *testing.T) {
		if err := c.WaitVoters(3, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		leader, _ := apiRoles(t, c)
		retry := client.RetryPolicy{MaxAttempts: 30, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, MaxElapsed: 30 * time.Second}
		head, err := client.New(c.URLs(), client.WithToken(apiHead), client.WithRetry(retry), client.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		claw, err := client.New(c.URLs(), client.WithToken(apiLeft), client.WithRetry(retry), client.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		stream := apiUnique("ks")
		var (
			mu             sync.Mutex
			created        []string
			completed      []string
			createErr      []error
			killedAt       atomic.Int64 // number of creates acknowledged when the leader died
			afterKill      atomic.Int64 // creates acknowledged after it
			completesAfter atomic.Int64
		)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					j, err := head.JobCreate(ctx, &client.JobCreateParams{Payload: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)), Stream: stream})
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						mu.Lock()
						createErr = append(createErr, err)
						mu.Unlock()
						continue
					}
					mu.Lock()
					created = append(created, j.ID)
					mu.Unlock()
					if killedAt.Load() > 0 {
						afterKill.Add(1)
					}
					cl, err := claw.JobClaim(ctx, j.ID, &client.JobClaimParams{WorkerID: fmt.Sprint("ks-", w)})
					if err != nil {
						continue // a claim whose outcome is unknown is not retried
					}
					_, err = claw.JobComplete(ctx, j.ID, &client.JobCompleteParams{LeaseToken: cl.LeaseToken, AttemptID: cl.AttemptID,
						Result: json.RawMessage(`"ok"`)})
					if err == nil {
						mu.Lock()
						completed = append(completed, j.ID)
						mu.Unlock()
						if killedAt.Load() > 0 {
							completesAfter.Add(1)
						}
					}
				}
			}(w)
		}
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(created) }
		apiEventually(t, 30*time.Second, "traffic before the kill", func() error {
			if n := count(); n < 30 {
				return fmt.Errorf("%d creates", n)
			}
			return nil
		})
		killedAt.Store(int64(count()))
		if err := c.Kill(leader); err != nil {
			t.Fatal(err)
		}
		apiEventually(t, 45*time.Second, "traffic after the kill", func() error {
			if afterKill.Load() < 30 || completesAfter.Load() < 10 {
				return fmt.Errorf("%d creates, %d completes since the kill", afterKill.Load(), completesAfter.Load())
			}
			return nil
		})
		cancel()
		wg.Wait()
		if len(createErr) > 0 {
			t.Errorf("%d creates failed across the kill, first: %v", len(createErr), createErr[0])
		}
		nl, err := c.WaitLeader(20 * time.Second)
		if err != nil || nl == leader {
			t.Fatalf("new leader %v: %v", nl, err)
		}
		// Every acknowledged create exists and every acknowledged complete is done.
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			got := map[string]string{}
			for _, j := range apiListAll(t, n.URL, apiHead, url.Values{"stream": {stream}, "limit": {"1000"}}) {
				got[j.ID] = j.Status
			}
			for _, id := range created {
				if _, ok := got[id]; !ok {
					t.Errorf("acknowledged job %s missing on %s", id, n.ID)
				}
			}
			for _, id := range completed {
				if got[id] != "done" {
					t.Errorf("acknowledged complete of %s is %q on %s", id, got[id], n.ID)
				}
			}
		}
		t.Logf("%d creates (%d after the kill), %d completes", len(created), afterKill.Load(), len(completed))
		// Each survivor answers reads and writes on its own.
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			apiEventually(t, 15*time.Second, "survivor "+n.ID+" serves", func() error {
				r, err := apiRequest("POST", n.URL+"/jobs", apiHead, map[string]interface{}{"payload": 1, "stream": stream}, "Idempotency-Key", "survivor-"+n.ID)
				if err != nil {
					return err
				}
				if r.Status != 201 && r.Status != 200 {
					return errors.New(r.String())
				}
				return nil
			})
			apiWant(t, apiDo(t, "GET", n.URL+"/health", "", nil), 200)
		}
	})
}
