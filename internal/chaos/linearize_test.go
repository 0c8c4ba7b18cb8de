package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check on injected histories: histories a correct
// server can produce pass, broken ones are caught. Times are in seconds
// from t0; the lease is 2 s (the workload's), so a lease granted by a
// claim called at s may be reaped from s+1.75 (250 ms of clock slack).

func linCheck(t *testing.T, h *hb, timeout time.Duration) linResult {
	t.Helper()
	ops := append([]*Op(nil), h.ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start.Before(ops[j].Start) })
	fillCreateJobs(ops)
	p := printer{began: t0, labels: map[string]string{"a1": "L100", "a2": "L200", "a3": "L300"}}
	c := newLinChecker(2, p, 12, nodes3, timeout)
	skipped := c.load(ops, jobNumbers(ops))
	res := c.run()
	res.check.Skipped = skipped
	return res
}

func wantLinearizable(t *testing.T, h *hb) linResult {
	t.Helper()
	res := linCheck(t, h, 5*time.Second)
	if len(res.check.Illegal) > 0 || len(res.check.Unknown) > 0 || len(res.problems) > 0 || res.check.Skipped > 0 {
		var texts []string
		for _, p := range res.problems {
			texts = append(texts, p.Text)
		}
		t.Fatalf("want linearizable, got %s\n%s", res.check.summary(), strings.Join(texts, "\n"))
	}
	return res
}

func wantIllegal(t *testing.T, h *hb, job string, want ...string) linResult {
	t.Helper()
	res := linCheck(t, h, 5*time.Second)
	if len(res.check.Illegal) != 1 || res.check.Illegal[0] != job || len(res.problems) != 1 {
		t.Fatalf("want job %s not linearizable, got %s", job, res.check.summary())
	}
	pr := res.problems[0]
	for _, w := range want {
		if !strings.Contains(pr.Text, w) {
			t.Errorf("problem %q\nlacks %q", pr.Text, w)
		}
	}
	if len(pr.Anchors) == 0 {
		t.Errorf("problem names no operation: %q", pr.Text)
	}
	if res.viz == nil {
		t.Errorf("no visualization for a non-linearizable job")
	}
	return res
}

// Operations of the tests, by kind. Views use maxAttempts 50 (view()).
func claimOp(h *hb, job, attempt string, attempts int, start float64) *Op {
	return h.op(Op{Client: 2, Kind: OpClaim, Node: "n2", JobID: job, Attempt: attempt, Outcome: OK, Status: 200, Answer: "L",
		View: view("running", attempts, attempt)}, start, start+0.01)
}

func leaseOp(h *hb, kind OpKind, job, attempt, args string, outcome Outcome, status int, code string, v *JobView, start float64) *Op {
	o := Op{Client: 3, Kind: kind, Node: "n1", JobID: job, Attempt: attempt, Args: "L," + args, Outcome: outcome, Status: status, Code: code, View: v}
	end := start + 0.01
	if outcome == Unknown {
		end = start + 2
	}
	return h.op(o, start, end)
}

func getOp(h *hb, job string, v *JobView, start float64) *Op {
	o := Op{Client: 4, Kind: OpGet, Node: "n3", JobID: job, Args: "consistent", Outcome: OK, Status: 200, View: v}
	if v == nil {
		o.Outcome, o.Status, o.Code = Refused, 404, "not_found"
	}
	return h.op(o, start, start+0.01)
}

func TestLinearizableHistories(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		leaseOp(h, OpHeartbeat, "j1", "a1", "+attempt,min-index", OK, 200, "", view("running", 1, "a1"), 2.5)
		leaseOp(h, OpHeartbeat, "j1", "a1", "consistent", OK, 200, "", view("running", 1, "a1"), 2.6)
		leaseOp(h, OpComplete, "j1", "a1", "+attempt", OK, 200, "", view("done", 1, ""), 3)
		// A repeat of the complete is answered as the first, with the job as it is.
		leaseOp(h, OpComplete, "j1", "a1", "+attempt,worker", OK, 200, "", nil, 4)
		h.op(Op{Client: 5, Kind: OpClaim, Node: "n1", JobID: "j1", Outcome: Refused, Status: 409, Code: "illegal_transition", View: view("done", 1, "")}, 5, 5.01)
		// Without the attempt id too: the lease token names its attempt.
		leaseOp(h, OpComplete, "j1", "a1", "", OK, 200, "", nil, 6)
		getOp(h, "j1", view("done", 1, ""), 7)
		h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
		res := wantLinearizable(t, h)
		if res.check.Jobs != 1 || res.check.Ops != 12 || res.viz != nil {
			t.Errorf("check %+v", res.check)
		}
	})
	t.Run("reaped lease, then fenced", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		getOp(h, "j1", view("queued", 1, ""), 4) // the lease expired at 4 at the earliest: reaped
		leaseOp(h, OpComplete, "j1", "a1", "+attempt", Refused, 409, "illegal_transition", view("queued", 1, ""), 5)
		claimOp(h, "j1", "a2", 2, 6)
		leaseOp(h, OpHeartbeat, "j1", "a1", "worker", Refused, 409, "stale_lease", nil, 6.5)
		leaseOp(h, OpComplete, "j1", "a2", "+attempt,worker", OK, 200, "", nil, 7)
		h.finals("j1", view("done", 2, ""), view("done", 2, ""), view("done", 2, ""))
		wantLinearizable(t, h)
	})
	t.Run("fail, dead, redrive, release", func(t *testing.T) {
		h := &hb{}
		h.op(Op{Client: 1, Kind: OpCreate, Node: "n1", JobID: "j1", Key: "k1", Args: "max=3", Outcome: OK, Status: 201,
			View: &JobView{Status: "queued", MaxAttempts: 3}}, 1, 1.01)
		v := func(st string, att int, a string) *JobView {
			return &JobView{Status: st, Attempts: att, MaxAttempts: 3, AttemptID: a}
		}
		h.op(Op{Client: 2, Kind: OpClaim, Node: "n2", JobID: "j1", Attempt: "a1", Outcome: OK, Status: 200, View: v("running", 1, "a1")}, 2, 2.01)
		// A release gives the attempt back.
		leaseOp(h, OpRelease, "j1", "a1", "+attempt", OK, 200, "", v("queued", 0, ""), 2.5)
		h.op(Op{Client: 2, Kind: OpWorkerClaim, Node: "n2", JobID: "j1", Attempt: "a2", Args: "worker", Outcome: OK, Status: 200, Answer: "claimed L200 attempt 1/3"}, 3, 3.01)
		leaseOp(h, OpFail, "j1", "a2", "requeue=true,+attempt,worker", OK, 200, "", nil, 3.5).Answer = "requeued=true dlq=false"
		h.op(Op{Client: 2, Kind: OpClaim, Node: "n2", JobID: "j1", Attempt: "a3", Outcome: OK, Status: 200, View: v("running", 2, "a3")}, 4, 4.01)
		leaseOp(h, OpFail, "j1", "a3", "requeue=false,+attempt", OK, 200, "", v("failed", 2, ""), 4.5)
		h.op(Op{Client: 6, Kind: OpRedrive, Node: "n3", JobID: "j1", Outcome: OK, Status: 200, View: v("queued", 0, "")}, 5, 5.01)
		// The repeat of the first fail answers the first answer, though the
		// job has moved on.
		leaseOp(h, OpFail, "j1", "a2", "requeue=true,+attempt,worker", OK, 200, "", nil, 5.5).Answer = "requeued=true dlq=false"
		h.op(Op{Client: 6, Kind: OpRedrive, Node: "n3", JobID: "j1", Outcome: Refused, Status: 409, Code: "illegal_transition", View: v("queued", 0, "")}, 6, 6.01)
		h.finals("j1", v("queued", 0, ""), v("queued", 0, ""), v("queued", 0, ""))
		wantLinearizable(t, h)
	})
	t.Run("idempotent create", func(t *testing.T) {
		h := &hb{}
		h.op(Op{Client: 1, Kind: OpCreate, Node: "n1", Key: "k1", Args: "max=50", Outcome: Unknown, Code: "timeout"}, 1, 3)
		h.op(Op{Client: 1, Kind: OpCreate, Node: "n2", JobID: "j1", Key: "k1", Args: "max=50", Outcome: OK, Status: 200, Answer: "dup",
			View: view("running", 1, "a9")}, 4, 4.01) // a repeat's view may be stale: not checked
		getOp(h, "j1", view("queued", 0, ""), 5)
		h.finals("j1", view("queued", 0, ""), view("queued", 0, ""), view("queued", 0, ""))
		wantLinearizable(t, h)
	})
	t.Run("job known only from a worker claim", func(t *testing.T) {
		h := &hb{}
		h.op(Op{Client: 2, Kind: OpWorkerClaim, Node: "n2", JobID: "j1", Attempt: "a1", Args: "worker", Outcome: OK, Status: 200, Answer: "claimed L100 attempt 1/50"}, 3, 3.01)
		leaseOp(h, OpComplete, "j1", "a1", "+attempt,worker", OK, 200, "", nil, 4)
		h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
		wantLinearizable(t, h)
	})
}

// A complete whose outcome is unknown may have applied, at any time after
// its call, or not at all: every one of these is accepted.
func TestLinearizableUnknownOutcomes(t *testing.T) {
	base := func() *hb {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		leaseOp(h, OpComplete, "j1", "a1", "+attempt", Unknown, 0, "timeout", nil, 3)
		return h
	}
	t.Run("applied", func(t *testing.T) {
		h := base()
		h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
		wantLinearizable(t, h)
	})
	t.Run("not applied, lease reaped", func(t *testing.T) {
		h := base()
		h.finals("j1", view("queued", 1, ""), view("queued", 1, ""), view("queued", 1, ""))
		wantLinearizable(t, h)
	})
	t.Run("applied after a read that missed it", func(t *testing.T) {
		h := base()
		getOp(h, "j1", view("running", 1, "a1"), 3.5)
		getOp(h, "j1", view("done", 1, ""), 6)
		h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
		wantLinearizable(t, h)
	})
	t.Run("503 outcome_unknown of a claim", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		h.op(Op{Client: 2, Kind: OpClaim, Node: "n2", JobID: "j1", Outcome: Unknown, Status: 503, Code: "outcome_unknown"}, 2, 2.5)
		// The claim applied: its lease (whose id no client knows) shows, and is reaped.
		getOp(h, "j1", view("running", 1, "x1"), 3)
		getOp(h, "j1", view("running", 1, "x1"), 3.2)
		h.finals("j1", view("queued", 1, ""), view("queued", 1, ""), view("queued", 1, ""))
		wantLinearizable(t, h)
	})
	t.Run("worker claim without an answer", func(t *testing.T) {
		// A claim-next whose answer was lost names no job: it may have
		// taken any job, and the job is checked again with it.
		h := &hb{}
		h.create("j1", 1)
		h.create("j2", 1.5)
		h.op(Op{Client: 7, Kind: OpWorkerClaim, Node: "n1", Args: "worker", Outcome: Unknown, Code: "timeout"}, 2, 4.3)
		getOp(h, "j1", view("running", 1, "x1"), 2.5)
		getOp(h, "j1", view("queued", 0, ""), 4.5) // given back by the server, its caller gone
		h.finals("j1", view("queued", 0, ""), view("queued", 0, ""), view("queued", 0, ""))
		h.finals("j2", view("queued", 0, ""), view("queued", 0, ""), view("queued", 0, ""))
		res := wantLinearizable(t, h)
		if res.check.HiddenClaims != 1 || res.check.Rechecked != 1 {
			t.Errorf("check %+v", res.check)
		}
	})
}

// Each lost worker claim takes a job at most once, and only after its
// call.
func TestLostWorkerClaimsBudget(t *testing.T) {
	build := func(lost ...float64) *hb {
		h := &hb{}
		h.create("j1", 1)
		for _, at := range lost {
			h.op(Op{Client: 7, Kind: OpWorkerClaim, Node: "n1", Args: "worker", Outcome: Unknown, Code: "timeout"}, at, at+2)
		}
		getOp(h, "j1", view("running", 1, "x1"), 2.5)
		getOp(h, "j1", view("running", 2, "x2"), 5) // x1 reaped, then taken again
		return h
	}
	wantLinearizable(t, build(2, 2.1))
	wantIllegal(t, build(2), "j1", "running 1/50 Ax1 (lost claim), reapable from 3.750s; taken by 1 lost worker claims")
	// A lost claim called after the read cannot explain it.
	wantIllegal(t, build(2, 5.2), "j1")
}

// Of states that differ only in how early they may be reaped and how many
// lost claims they used, the set keeps the one that allows the most.
func TestStateSetReduce(t *testing.T) {
	a := jobState{Exists: true, Status: stRunning, Attempts: 1, Max: 50, Attempt: "a1", Floor: 10, Used: 1}
	b := a
	b.Floor, b.Used = 20, 2 // dominated by a
	c := a
	c.Floor, c.Used = 5, 3 // neither
	d := a
	d.Attempts = 2 // another state
	got := stateSet{b, a, c, d, a}.reduce()
	if len(got) != 3 || !slices.Contains(got, a) || !slices.Contains(got, c) || !slices.Contains(got, d) {
		t.Fatalf("reduce: %+v", got)
	}
	if again := (stateSet{d, c, a}).reduce(); !slices.Equal(again, got) {
		t.Fatalf("not canonical: %+v vs %+v", again, got)
	}
}

func TestNotLinearizableHistories(t *testing.T) {
	t.Run("two attempts both completed", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		getOp(h, "j1", view("queued", 1, ""), 4.5) // a1's lease reaped
		claimOp(h, "j1", "a2", 2, 5)
		leaseOp(h, OpComplete, "j1", "a2", "+attempt,worker", OK, 200, "", nil, 6)
		leaseOp(h, OpComplete, "j1", "a1", "+attempt,worker", OK, 200, "", nil, 7)
		wantIllegal(t, h, "j1", "cannot answer c3 complete(L,+attempt,worker) @n1 at 7.000s..7.010s: 200", "done 2/50")
	})
	t.Run("consistent read after an acknowledged complete shows it running", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		leaseOp(h, OpComplete, "j1", "a1", "+attempt", OK, 200, "", view("done", 1, ""), 3)
		getOp(h, "j1", view("running", 1, "a1"), 3.5)
		wantIllegal(t, h, "j1", "cannot answer c4 get(consistent) @n3 at 3.500s..3.510s: 200 [running 1/50 L100]")
	})
	t.Run("complete with a stale token accepted", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		leaseOp(h, OpRelease, "j1", "a1", "", OK, 200, "", view("queued", 0, ""), 2.5)
		claimOp(h, "j1", "a2", 1, 3)
		leaseOp(h, OpComplete, "j1", "a1", "", OK, 200, "", view("done", 1, ""), 3.5)
		wantIllegal(t, h, "j1", "complete(L,) @n1")
	})
	t.Run("acknowledged create missing from a later read", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		getOp(h, "j1", nil, 2)
		wantIllegal(t, h, "j1", "leaves the job {queued 0/50}", "get(consistent) @n3 at 2.000s..2.010s: 404 not_found")
		// In the final reads.
		h = &hb{}
		h.create("j1", 1)
		h.finals("j1", nil, view("queued", 0, ""), view("queued", 0, ""))
		wantIllegal(t, h, "j1", "final get(consistent) @n1")
	})
	t.Run("lease reaped before it could expire", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		getOp(h, "j1", view("queued", 1, ""), 2.5)
		wantIllegal(t, h, "j1", "reapable from 3.750s")
	})
	t.Run("claim counted twice", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 2, 2)
		wantIllegal(t, h, "j1", "claim() @n2")
	})
	t.Run("repeated fail answered differently", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		leaseOp(h, OpFail, "j1", "a1", "requeue=true,+attempt,worker", OK, 200, "", nil, 3).Answer = "requeued=true dlq=false"
		leaseOp(h, OpFail, "j1", "a1", "requeue=true,+attempt,worker", OK, 200, "", nil, 4).Answer = "requeued=false dlq=true"
		wantIllegal(t, h, "j1", "requeued=false dlq=true")
	})
	t.Run("an unknown outcome does not excuse a job going back", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		claimOp(h, "j1", "a1", 1, 2)
		leaseOp(h, OpComplete, "j1", "a1", "+attempt", Unknown, 0, "timeout", nil, 3)
		getOp(h, "j1", view("done", 1, ""), 3.5)
		getOp(h, "j1", view("running", 1, "a1"), 3.6)
		wantIllegal(t, h, "j1", "get(consistent) @n3 at 3.600s")
	})
	t.Run("a lost worker claim does not explain a known attempt", func(t *testing.T) {
		h := &hb{}
		h.create("j1", 1)
		h.op(Op{Client: 7, Kind: OpWorkerClaim, Node: "n1", Args: "worker", Outcome: Unknown, Code: "timeout"}, 2, 4.3)
		getOp(h, "j1", view("running", 1, "a1"), 2.5) // a1 is client 2's claim, acknowledged later
		claimOp(h, "j1", "a1", 1, 3)
		res := wantIllegal(t, h, "j1")
		if res.check.Rechecked != 1 {
			t.Errorf("check %+v", res.check)
		}
	})
}

// A check that runs out of time is unknown: neither a pass nor a violation.
func TestLinearizeTimeoutIsUnknown(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	// Many operations of unknown outcome, and a read no order explains:
	// the search must try every subset of them.
	for i := 0; i < 40; i++ {
		h.op(Op{Client: i % 12, Kind: OpRedrive, Node: "n1", JobID: "j1", Outcome: Unknown, Code: "timeout"}, 1.1+float64(i)/100, 5)
		h.op(Op{Client: i % 12, Kind: OpClaim, Node: "n1", JobID: "j1", Outcome: Unknown, Code: "timeout"}, 1.1+float64(i)/100, 5)
	}
	getOp(h, "j1", view("done", 7, ""), 20)
	res := linCheck(t, h, 200*time.Millisecond)
	if len(res.check.Unknown) != 1 || len(res.check.Illegal) != 0 || len(res.problems) != 0 {
		t.Fatalf("want unknown, got %s", res.check.summary())
	}
	if s := res.check.summary(); !strings.Contains(s, "UNKNOWN for 1 jobs") || !strings.Contains(s, "not a pass") {
		t.Errorf("summary %q", s)
	}
	if res.check.Elapsed > 10*time.Second {
		t.Errorf("the check took %v", res.check.Elapsed)
	}
}

// The whole path of a run's check: a broken history fails the run, the job
// is a failing job with an excerpt, and the evidence directory gets the
// visualization, which the report names.
func TestRunnerLinearizabilityEvidence(t *testing.T) {
	r := &runner{cfg: Config{Binary: "x"}.withDefaults(), began: t0, hist: newHistory(t0),
		nodes: []node{{"n1", ""}, {"n2", ""}, {"n3", ""}},
		rep:   &Report{Ops: map[OpKind][3]int{}, FinalStates: map[string]int{}, FinalReads: map[string]int{}}}
	h := &hb{}
	h.create("j1", 1)
	claimOp(h, "j1", "a1", 1, 2)
	leaseOp(h, OpComplete, "j1", "a1", "+attempt", OK, 200, "", view("done", 1, ""), 3)
	// A consistent read that shows the job running again: the broken
	// server answers it (the hand-written checker sees it too, as a job
	// seen running after its complete).
	getOp(h, "j1", view("running", 2, "a2"), 4)
	h.create("j2", 1.2)
	h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
	h.finals("j2", view("queued", 0, ""), view("queued", 0, ""), view("queued", 0, ""))
	for _, op := range h.ops {
		r.hist.add(op)
	}
	r.check()
	r.rep.Verified, r.rep.HashesAgree = true, true
	l := r.rep.Linearizability
	if !l.Ran || l.Jobs != 2 || len(l.Illegal) != 1 || l.Illegal[0] != "j1" {
		t.Fatalf("linearizability %+v", l)
	}
	if r.rep.OK() || len(r.rep.FailingJobs) != 1 {
		t.Fatalf("run passes: %s", r.rep)
	}
	found := false
	for _, pr := range r.rep.FailingJobs[0].Problems {
		found = found || strings.Contains(pr, "not linearizable")
	}
	if !found {
		t.Errorf("failing job lacks the linearizability problem: %v", r.rep.FailingJobs[0].Problems)
	}
	dir := t.TempDir()
	r.rep.Dir = dir
	if err := r.writeFiles(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, VisualizationFile)
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no visualization: %v", err)
	}
	if !strings.Contains(string(html), "<html") || !strings.Contains(string(html), "get(consistent)") {
		t.Errorf("visualization does not show the history (%d bytes)", len(html))
	}
	summary, _ := os.ReadFile(filepath.Join(dir, "summary.txt"))
	for _, want := range []string{"linearizability (porcupine, per job): 2 jobs", "NOT LINEARIZABLE: 1 jobs", "linearizability visualization (porcupine): " + path, "VIOLATION: job #1 j1: not linearizable"} {
		if !strings.Contains(string(summary), want) || !strings.Contains(r.rep.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, summary)
		}
	}

	// A passing history: no visualization, "ok".
	r2 := &runner{cfg: r.cfg, began: t0, hist: newHistory(t0), nodes: r.nodes,
		rep: &Report{Ops: map[OpKind][3]int{}, FinalStates: map[string]int{}, FinalReads: map[string]int{}}}
	h = &hb{}
	h.create("j2", 1.2)
	h.finals("j2", view("queued", 0, ""), view("queued", 0, ""), view("queued", 0, ""))
	for _, op := range h.ops {
		r2.hist.add(op)
	}
	r2.check()
	r2.rep.Verified, r2.rep.HashesAgree = true, true
	if l := r2.rep.Linearizability; !l.Ran || len(l.Illegal)+len(l.Unknown) != 0 || r2.linViz != nil || !r2.rep.OK() ||
		!strings.Contains(l.summary(), ": ok; self-test: 1 of 1 broken copies of job histories caught") {
		t.Fatalf("clean run: %+v %s", l, l.summary())
	}
}

// The self-test breaks copies of real histories; a checker that accepts
// everything misses them, and says so.
func TestLinearizeSelfTest(t *testing.T) {
	h := &hb{}
	h.create("j1", 1)
	claimOp(h, "j1", "a1", 1, 2)
	leaseOp(h, OpComplete, "j1", "a1", "+attempt", OK, 200, "", view("done", 1, ""), 3)
	h.finals("j1", view("done", 1, ""), view("done", 1, ""), view("done", 1, ""))
	p := printer{began: t0}
	nums := jobNumbers(h.ops)
	tried, missed := selfTest(h.ops, nums, func() *linChecker { return newLinChecker(2, p, 12, nodes3, 5*time.Second) })
	if tried != 2 || len(missed) != 0 {
		t.Fatalf("self-test: %d tried, missed %v", tried, missed)
	}
	lax := func() *linChecker {
		c := newLinChecker(2, p, 12, nodes3, 5*time.Second)
		c.model = porcupine.Model{Partition: partitionByJob, Init: func() interface{} { return 0 },
			Step: func(s, in, out interface{}) (bool, interface{}) { return true, s }}
		return c
	}
	tried, missed = selfTest(h.ops, nums, lax)
	if tried != 2 || len(missed) != 2 || !strings.Contains(missed[0], "running again of job j1") {
		t.Fatalf("a checker that accepts everything: %d tried, missed %v", tried, missed)
	}
}
