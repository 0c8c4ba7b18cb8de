package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api/wire"
)

var t0 = time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// hb builds histories for the checker's tests.
type hb struct{ ops []*Op }

func (h *hb) op(o Op, start, end float64) *Op {
	o.Start, o.End = at(start), at(end)
	op := &o
	op.Seq = len(h.ops)
	h.ops = append(h.ops, op)
	return op
}

func view(status string, attempts int, attempt string) *JobView {
	return &JobView{Status: status, Attempts: attempts, MaxAttempts: 50, AttemptID: attempt, CreateIndex: 10, ModifyIndex: 20}
}

func (h *hb) create(job string, start float64) *Op {
	return h.op(Op{Client: 1, Kind: OpCreate, Node: "n1", JobID: job, Key: "k-" + job, Outcome: OK, Status: 201, View: view("queued", 0, "")}, start, start+0.01)
}

// finals adds the three final reads; views may differ per node (nil: 404).
func (h *hb) finals(job string, views ...*JobView) {
	for i, v := range views {
		o := Op{Client: -1, Kind: OpGet, Node: fmt.Sprintf("n%d", i+1), JobID: job, Args: "consistent", Final: true, Outcome: OK, Status: 200, View: v}
		if v == nil {
			o.Outcome, o.Status, o.Code = Refused, 404, "not_found"
		}
		h.op(o, 100+float64(i), 100.001+float64(i))
	}
}

var nodes3 = []string{"n1", "n2", "n3"}

func analyzeT(h *hb) []Problem {
	return analyze(h.ops, nodes3, printer{began: t0, labels: map[string]string{"a1": "L100", "a2": "L200"}})
}

func wantProblems(t *testing.T, probs []Problem, want ...string) {
	t.Helper()
	if len(probs) != len(want) {
		var got []string
		for _, p := range probs {
			got = append(got, p.Text)
		}
		t.Fatalf("%d problems, want %d:\n%s", len(probs), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(probs[i].Text, w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, probs[i].Text, w)
		}
	}
}

// A history where everything agrees has no problem.
func TestAnalyzeCleanHistory(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	h.op(Op{Client: 2, Kind: OpClaim, Node: "n2", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200, View: view("running", 1, "a1")}, 2, 2.01)
	h.op(Op{Client: 2, Kind: OpComplete, Node: "n3", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200, View: view("done", 1, "")}, 3, 3.01)
	// A stale complete of the same attempt is answered again: no problem.
	h.op(Op{Client: 2, Kind: OpComplete, Node: "n1", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200}, 4, 4.01)
	h.op(Op{Client: 3, Kind: OpClaim, Node: "n1", JobID: "j1", Outcome: Refused, Status: 409, Code: "illegal_transition", View: view("done", 1, "")}, 5, 5.01)
	// A 404 before the create was acknowledged proves nothing.
	h.op(Op{Client: 4, Kind: OpGet, Node: "n1", JobID: "j1", Outcome: Refused, Status: 404}, 0.5, 1.005)
	h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
	wantProblems(t, analyzeT(h))
}

// The divergence of the evidence: one node holds another attempt count.
func TestAnalyzeFinalReadsDisagree(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	h.finals("j1", view("done", 2, ""), view("done", 12, ""), view("done", 2, ""))
	probs := analyzeT(h)
	wantProblems(t, probs, "the nodes hold different states: n1: done attempts 2/50")
	if !strings.Contains(probs[0].Text, "n2: done attempts 12/50") || len(probs[0].Anchors) != 3 {
		t.Errorf("problem does not name every node's state: %+v", probs[0])
	}
	// Lease fields count too.
	h = &hb{}
	h.create("j2", 1)
	a, b := view("running", 1, "a1"), view("running", 1, "a1")
	b.LeaseExpiresAt = t0.Add(time.Second)
	h.finals("j2", a, a, b)
	wantProblems(t, analyzeT(h), "different states")
}

// An acknowledged job missing on a node (run2 of the evidence), at the end
// or during the run.
func TestAnalyzeMissingJob(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	h.op(Op{Client: 2, Kind: OpClaim, Node: "n1", JobID: "j1", Outcome: Refused, Status: 404, Code: "not_found"}, 2, 2.01)
	h.finals("j1", nil, view("queued", 0, ""), view("queued", 0, ""))
	probs := analyzeT(h)
	wantProblems(t, probs, "the nodes hold different states: n1: 404 not found", "job answered 404 not_found through n1 at 2.000s although it was acknowledged at 1.010s")

	// Only at the end: missing in the final read.
	h = &hb{}
	h.create("j1", 1)
	h.finals("j1", nil, nil, nil)
	wantProblems(t, analyzeT(h), "is missing (404) in the final read")

	// Known through a worker claim only (its create's answer was lost).
	h = &hb{}
	h.op(Op{Client: 1, Kind: OpWorkerClaim, Node: "n2", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200}, 1, 1.2)
	h.op(Op{Client: 3, Kind: OpGet, Node: "n3", JobID: "j1", Outcome: Refused, Status: 404}, 3, 3.1)
	wantProblems(t, analyzeT(h), "answered 404 not_found through n3")
}

// A job whose complete was acknowledged and that is later seen queued or
// running, without a redrive in between (job #272 of the evidence).
func TestAnalyzeCompletedThenQueued(t *testing.T) {
	base := func() *hb {
		h := &hb{}
		h.create("j1", 1)
		h.op(Op{Client: 2, Kind: OpWorkerClaim, Node: "n3", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200}, 2, 2.01)
		h.op(Op{Client: 2, Kind: OpComplete, Node: "n1", JobID: "j1", Attempt: "a1", Args: "L100,+attempt,worker", Outcome: OK, Status: 200}, 3, 3.01)
		return h
	}
	// Seen queued by a consistent read.
	h := base()
	h.op(Op{Client: 3, Kind: OpGet, Node: "n2", JobID: "j1", Outcome: OK, Status: 200, View: view("queued", 1, "")}, 5, 5.01)
	wantProblems(t, analyzeT(h), "complete of L100 was acknowledged at 3.010s, but the job was seen queued at 5.000s (get through n2)")

	// Claimed again.
	h = base()
	h.op(Op{Client: 3, Kind: OpClaim, Node: "n2", JobID: "j1", Attempt: "a2", Outcome: OK, Status: 200, View: view("running", 2, "a2")}, 5, 5.01)
	wantProblems(t, analyzeT(h), "seen running at 5.000s (claim through n2)")

	// Seen in a refusal's job, and in the final reads: one problem each
	// kind (the first sighting), plus nothing for the final reads' agreement.
	h = base()
	h.op(Op{Client: 3, Kind: OpRelease, Node: "n2", JobID: "j1", Outcome: Refused, Status: 409, Code: "illegal_transition", View: view("queued", 1, "")}, 5, 5.01)
	h.finals("j1", view("queued", 1, ""), view("queued", 1, ""), view("queued", 1, ""))
	wantProblems(t, analyzeT(h), "seen queued at 5.000s (release through n2)")

	// A redrive acknowledged in between excuses it.
	h = base()
	h.op(Op{Client: 4, Kind: OpRedrive, Node: "n1", JobID: "j1", Outcome: OK, Status: 200, View: view("queued", 0, "")}, 4, 4.01)
	h.op(Op{Client: 3, Kind: OpGet, Node: "n2", JobID: "j1", Outcome: OK, Status: 200, View: view("queued", 0, "")}, 5, 5.01)
	wantProblems(t, analyzeT(h))

	// Concurrent with the complete, or before its answer: no proof.
	h = base()
	h.op(Op{Client: 3, Kind: OpGet, Node: "n2", JobID: "j1", Outcome: OK, Status: 200, View: view("running", 1, "a1")}, 2.9, 3.02)
	// Heartbeat answers and unknown outcomes are not observations.
	h.op(Op{Client: 2, Kind: OpHeartbeat, Node: "n2", JobID: "j1", Outcome: OK, Status: 200, View: view("running", 1, "a1")}, 6, 6.01)
	h.op(Op{Client: 5, Kind: OpClaim, Node: "n2", JobID: "j1", Outcome: Unknown, Code: "timeout"}, 7, 9)
	wantProblems(t, analyzeT(h))
}

func TestAnalyzeTwoCompletedAttempts(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	h.op(Op{Client: 2, Kind: OpComplete, Node: "n1", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200}, 3, 3.01)
	h.op(Op{Client: 3, Kind: OpComplete, Node: "n2", JobID: "j1", Attempt: "a2", Outcome: OK, Status: 200}, 4, 4.01)
	wantProblems(t, analyzeT(h), "complete was acknowledged for two attempts, L100 and L200")
}

func TestAnalyzeIdempotencyClash(t *testing.T) {
	h := &hb{}
	h.op(Op{Client: 1, Kind: OpCreate, Node: "n1", JobID: "j1", Key: "k", Outcome: OK, Status: 201}, 1, 1.01)
	h.op(Op{Client: 1, Kind: OpCreate, Node: "n2", JobID: "j2", Key: "k", Outcome: OK, Status: 200, Answer: "dup"}, 2, 2.01)
	wantProblems(t, analyzeT(h), "idempotency key k was acknowledged with job j1 and then with job j2")
}

// History lines read like the evidence's (docs/drill.md).
func TestHistoryLines(t *testing.T) {
	p := printer{began: t0, labels: map[string]string{"att-1547": "L1547"}}
	cases := []struct {
		op   Op
		want string
	}{
		{Op{Client: 12, Kind: OpCreate, Node: "n3", Args: "max=50", Outcome: OK, Status: 201, Start: at(48.268), End: at(48.269)},
			"[   48.268s ..   48.269s] c12 create(max=50) @n3 -> 201"},
		{Op{Client: 3, Kind: OpClaim, Node: "n2", Outcome: OK, Status: 200, Answer: "L1547", View: &JobView{Status: "running", Attempts: 1, MaxAttempts: 50, AttemptID: "att-1547"}, Start: at(48.959), End: at(48.961)},
			"[   48.959s ..   48.961s] c3 claim() @n2 -> 200 L1547 [running 1/50 L1547]"},
		{Op{Client: 11, Kind: OpRedrive, Node: "n3", Outcome: Refused, Status: 409, Code: "illegal_transition", View: &JobView{Status: "running", Attempts: 1, MaxAttempts: 50, AttemptID: "att-1547"}, Start: at(48.991), End: at(48.994)},
			"[   48.991s ..   48.994s] c11 redrive() @n3 -> 409 illegal_transition [running 1/50 L1547]"},
		{Op{Client: 7, Kind: OpClaim, Node: "n2", Outcome: Unknown, Status: 503, Code: "outcome_unknown", Start: at(51.363), End: at(53.4)},
			"[   51.363s ..       end] c7 claim() @n2 -> unknown (503 outcome_unknown)"},
		{Op{Client: 1, Kind: OpHeartbeat, Node: "n1", Args: "L1547,worker,min-index", Outcome: Unknown, Code: "timeout", Start: at(1), End: at(3)},
			"[    1.000s ..       end] c1 heartbeat(L1547,worker,min-index) @n1 -> unknown (timeout)"},
		{Op{Client: 0, Kind: OpGet, Node: "n2", Args: "consistent", Outcome: Refused, Code: "not sent (connection refused)", Start: at(2), End: at(2.001)},
			"[    2.000s ..    2.001s] c0 get(consistent) @n2 -> not sent (connection refused)"},
		{Op{Client: -1, Kind: OpGet, Node: "n1", Args: "consistent", Final: true, Outcome: OK, Status: 200, View: &JobView{Status: "done", Attempts: 2, MaxAttempts: 50}, Start: at(180.296), End: at(180.297)},
			"[  180.296s ..  180.297s] final get(consistent) @n1 -> 200 [done 2/50]"},
	}
	for _, c := range cases {
		if got := p.line(&c.op); got != c.want {
			t.Errorf("\ngot  %q\nwant %q", got, c.want)
		}
	}
}

// The excerpt keeps the first operation, the ones around each anchor and
// the final reads, and marks what it leaves out.
func TestExcerpt(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	for i := 0; i < 30; i++ {
		h.op(Op{Client: 2, Kind: OpGet, Node: "n1", JobID: "j1", Args: "consistent", Outcome: OK, Status: 200, View: view("queued", 0, "")}, 2+float64(i), 2.01+float64(i))
	}
	anchor := h.ops[15]
	h.finals("j1", view("queued", 0, ""), view("queued", 0, ""), view("queued", 0, ""))
	p := printer{began: t0}
	lines := excerpt(h.ops, []*Op{anchor}, p, 60)
	want := 1 + 1 + 9 + 1 + 3 // create, ..., anchor ±4, ..., finals
	if len(lines) != want || lines[1] != "   ..." || lines[11] != "   ..." || !strings.Contains(lines[0], "create") ||
		!strings.Contains(lines[len(lines)-1], "final get") {
		t.Fatalf("excerpt:\n%s", strings.Join(lines, "\n"))
	}
	// Without anchors before the final reads: the last 20 operations.
	lines = excerpt(h.ops, h.ops[len(h.ops)-3:], p, 60)
	if len(lines) != 1+1+20+3 {
		t.Fatalf("excerpt without run anchors (%d lines):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

func TestFillCreateJobsAndNumbers(t *testing.T) {
	h := &hb{}
	lost := h.op(Op{Client: 1, Kind: OpCreate, Node: "n1", Key: "k1", Outcome: Unknown, Code: "timeout"}, 1, 3)
	h.op(Op{Client: 1, Kind: OpCreate, Node: "n2", Key: "k2", JobID: "j2", Outcome: OK, Status: 201}, 2, 2.1)
	h.op(Op{Client: 1, Kind: OpCreate, Node: "n3", Key: "k1", JobID: "j1", Outcome: OK, Status: 200, Answer: "dup"}, 4, 4.1)
	fillCreateJobs(h.ops)
	if lost.JobID != "j1" {
		t.Fatalf("lost create not named: %q", lost.JobID)
	}
	if n := jobNumbers(h.ops); n["j1"] != 1 || n["j2"] != 2 {
		t.Fatalf("numbers %v", n)
	}
	if ids := knownJobs(h.ops); len(ids) != 2 || ids[0] != "j1" || ids[1] != "j2" {
		t.Fatalf("known %v", ids)
	}
}

// The first faults of every seed cover every kind, so that a short run
// has each at least once.
func TestFaultPlanCoversEveryKind(t *testing.T) {
	for seed := uint64(1); seed < 200; seed++ {
		plan := faultPlan(rand.New(rand.NewPCG(seed, 0xfa17)), FaultKinds, 10)
		seen := map[FaultKind]bool{}
		for _, k := range plan[:len(FaultKinds)] {
			seen[k] = true
		}
		if len(seen) != len(FaultKinds) || len(plan) != 10 {
			t.Fatalf("seed %d: plan %v", seed, plan)
		}
	}
	a := faultPlan(rand.New(rand.NewPCG(7, 0xfa17)), FaultKinds, 20)
	b := faultPlan(rand.New(rand.NewPCG(7, 0xfa17)), FaultKinds, 20)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("one seed, two plans")
	}
}

func TestPool(t *testing.T) {
	p := newPool()
	p.see("a", "queued")
	p.see("b", "failed")
	p.see("c", "")
	p.see("a", "running")
	if p.size() != 3 {
		t.Fatalf("size %d", p.size())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	failed := 0
	for i := 0; i < 1000; i++ {
		if p.pick(rng, "failed", "dead") == "b" {
			failed++
		}
	}
	if failed < 600 {
		t.Fatalf("preferred job picked %d of 1000 times", failed)
	}
	p.see("b", "done")
	p.see("zzz", "done")
	if p.size() != 2 {
		t.Fatalf("size after done %d", p.size())
	}
	for i := 0; i < 100; i++ {
		if id := p.pick(rng); id != "a" && id != "c" {
			t.Fatalf("picked %q", id)
		}
	}
	if newPool().pick(rng) != "" {
		t.Fatal("empty pool picked a job")
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   Outcome
	}{
		{200, "", OK}, {201, "", OK}, {409, "stale_lease", Refused}, {404, "not_found", Refused},
		{503, "no_leader", Refused}, {503, "outcome_unknown", Unknown}, {503, "", Unknown}, {500, "internal", Unknown},
	} {
		if got := classifyStatus(c.status, c.code); got != c.want {
			t.Errorf("%d %s: %v, want %v", c.status, c.code, got, c.want)
		}
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	if o, code := classifyTransport(fmt.Errorf("post: %w", dial)); o != Refused || !strings.HasPrefix(code, "not sent") {
		t.Errorf("dial error: %v %q", o, code)
	}
	if o, _ := classifyTransport(fmt.Errorf("x: %w", wire.ErrNotSent)); o != Refused {
		t.Errorf("wire not sent: %v", o)
	}
	if o, code := classifyTransport(fmt.Errorf("post: %w", context.DeadlineExceeded)); o != Unknown || code != "timeout" {
		t.Errorf("deadline: %v %q", o, code)
	}
	if o, _ := classifyTransport(errors.New("read: connection reset by peer")); o != Unknown {
		t.Errorf("reset: %v", o)
	}
}

func TestReport(t *testing.T) {
	r := &Report{Seed: 42, Verified: true, HashesAgree: true, Ops: map[OpKind][3]int{OpCreate: {3, 1, 0}},
		Faults: []Fault{{N: 1, Kind: PauseLeader, Node: "n2", Pid: 99, Start: time.Second, End: 3 * time.Second}}}
	if !r.OK() || !strings.Contains(r.String(), "RESULT: PASS") || !strings.Contains(r.String(), "CHAOS_SEED=42") {
		t.Fatalf("clean report:\n%s", r)
	}
	r.FailingJobs = []FailingJob{{Number: 7, ID: "j7", Problems: []string{"the nodes hold different states"}, Excerpt: []string{"[ line ]"}}}
	r.Violations = []string{"job #7 j7: the nodes hold different states"}
	s := r.String()
	for _, want := range []string{"== job #7 j7", "-- the nodes hold different states", "[ line ]", "VIOLATION: job #7", "RESULT: FAIL (replay: CHAOS_SEED=42)"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if (&Report{}).OK() {
		t.Fatal("unverified report is OK")
	}
	// Many failing jobs: the report quotes a few, All every one.
	r.FailingJobs, r.Violations = nil, nil
	for i := 0; i < 25; i++ {
		r.FailingJobs = append(r.FailingJobs, FailingJob{Number: i, ID: fmt.Sprintf("job%02d", i), Problems: []string{"p"}})
		r.Violations = append(r.Violations, fmt.Sprintf("job%02d: p", i))
	}
	if s := r.String(); !strings.Contains(s, "... and 15 more failing jobs") || strings.Contains(s, "== job #24 job24") ||
		!strings.Contains(s, "VIOLATION: job19: p") || !strings.Contains(s, "VIOLATION: ... and 5 more") {
		t.Errorf("long report not capped:\n%s", s)
	}
	if s := r.All(); !strings.Contains(s, "== job #24 job24") || !strings.Contains(s, "VIOLATION: job24: p") {
		t.Errorf("All leaves jobs out:\n%s", s)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Clients != 12 || c.Jobs != 40 || c.LeaseSeconds != 2 || c.ReaperIntervalMS != 200 || c.LeaseGraceMS != 1000 ||
		c.FaultGapMin != 3*time.Second || c.FaultGapMax != 6*time.Second || c.Seed == 0 || c.Timeout != c.Duration+5*time.Minute {
		t.Fatalf("defaults %+v", c)
	}
	env := c.nodeEnv()
	if env["LEASE_SECONDS"] != "2" || env["REAPER_INTERVAL_MS"] != "200" || env["SPINE_LEASE_GRACE_MS"] != "1000" {
		t.Fatalf("env %v", env)
	}
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Fatal("Run without a binary")
	}
}
