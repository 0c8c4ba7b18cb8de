package chaos

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check: every job's history, final reads included, is
// checked with porcupine (github.com/anishathalye/porcupine) against the
// model of one job (linmodel.go, linfsm.go), partitioned by job. It complements
// analyze: analyze looks for named symptoms; this asks whether one order of
// the job's operations, each at a point between its call and its answer,
// explains every answer.

// LinCheck is the outcome of the linearizability check.
type LinCheck struct {
	// Ran is set once the check ran.
	Ran bool
	// Jobs and Ops count the jobs checked and the operations of their
	// histories; Skipped the jobs left out (their maxAttempts is known from
	// no answer).
	Jobs, Ops, Skipped int
	// HiddenClaims counts the worker claims whose outcome is unknown: each
	// may have claimed any job. Rechecked counts the jobs checked again
	// with them, after a first check without them failed.
	HiddenClaims, Rechecked int
	// Illegal lists the jobs whose history no linearization explains;
	// Unknown those whose check did not finish in time (not a pass).
	Illegal, Unknown []string
	// Elapsed is the time of the whole check, First that of the first
	// check of every job together.
	Elapsed, First time.Duration
	// Visualization is the porcupine HTML page of the failing jobs' histories,
	// written in Dir after a failed run ("" when none was written).
	Visualization string
	// SelfTest says how the checker fared on broken copies of the run's
	// own job histories (selfTest); a miss is a violation.
	SelfTest string
}

// VisualizationFile is the name of the porcupine visualization a failed
// run leaves in its directory.
const VisualizationFile = "linearizability.html"

// linChecker checks one run's history.
type linChecker struct {
	m       *jobModel
	model   porcupine.Model // the first check's: no lost worker claim
	timeout time.Duration   // of each porcupine call
	budget  time.Duration   // of the rechecks together
	clients int             // client ids of the visualization: the clients', then the nodes', then the synthetic ops'
	nodes   []string
	jobs    []*linJob
	ops     map[*linJob][]porcupine.Operation
	hidden  []*Op // worker claims with an unknown outcome
}

// linResult is the check's outcome for the report: the problems of the
// jobs that are not linearizable, and the history to visualize.
type linResult struct {
	check    LinCheck
	problems []Problem
	viz      *linViz
}

type linViz struct {
	model porcupine.Model
	info  porcupine.LinearizationInfo
	// from and to span the shown operations' calls and answers (ns from
	// the start of the load): the faults shown are those that overlap it.
	from, to int64
}

func newLinChecker(leaseSeconds int, p printer, clients int, nodes []string, timeout time.Duration) *linChecker {
	m := newJobModel(leaseSeconds, p)
	return &linChecker{m: m, model: m.model(), timeout: timeout, budget: 4 * timeout, clients: clients, nodes: nodes,
		ops: map[*linJob][]porcupine.Operation{}}
}

func (c *linChecker) ns(t time.Time) int64 { return t.Sub(c.m.began).Nanoseconds() }

// args reads the rendered arguments of an operation ("L12,+attempt,worker").
func args(op *Op) map[string]string {
	a := map[string]string{}
	for _, f := range strings.Split(op.Args, ",") {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return a
}

// modeled are the refusal codes the model answers; other refusals (bad
// requests, no_leader, a request never sent) changed nothing and show
// nothing, and are left out.
var modeled = map[string]bool{codeNotFound: true, codeIllegal: true, codeStale: true, codeMaxAttempts: true}

// linearizableView reports whether the job an answer carries is the state
// at a point within the call: a consistent read, a write's answer or
// refusal (the state the leader applied it to). Not a heartbeat answered
// from a follower's state, nor a repeated create answered from the
// leader's local state before any entry.
func linearizableView(op *Op, in *linOp) bool {
	switch op.Kind {
	case OpHeartbeat:
		return op.Outcome != OK || in.consistent
	case OpCreate:
		return !isDup(op)
	}
	return true
}

// isDup: a create answered 200 with the job its key had already made.
func isDup(op *Op) bool { return op.Answer == "dup" || op.Status == 200 }

// load turns the history into the model's operations, by job.
func (c *linChecker) load(ops []*Op, nums map[string]int) (skipped int) {
	byID := map[string]*linJob{}
	job := func(id string) *linJob {
		j := byID[id]
		if j == nil {
			j = &linJob{id: id, number: nums[id], known: map[string]bool{}, first: math.MaxInt64}
			byID[id] = j
			c.jobs = append(c.jobs, j)
		}
		return j
	}
	type pending struct {
		in  *linOp
		out *linOut
	}
	var list []pending
	for _, op := range ops {
		if op.JobID == "" {
			if op.Kind == OpWorkerClaim && op.Outcome == Unknown {
				c.hidden = append(c.hidden, op)
			}
			continue
		}
		j := job(op.JobID)
		a := args(op)
		_, worker := a["worker"]
		_, consistent := a["consistent"]
		in := &linOp{op: op, job: j, kind: op.Kind, attempt: op.Attempt, call: c.ns(op.Start),
			worker:     worker || op.Kind == OpWorkerClaim,
			consistent: op.Kind == OpHeartbeat && consistent, requeue: a["requeue"] == "true"}
		if op.Kind == OpCreate {
			if n, err := strconv.Atoi(a["max"]); err == nil && n > 0 && j.max == 0 {
				j.max = n
			}
		}
		if op.View != nil && op.View.MaxAttempts > 0 && j.max == 0 {
			j.max = op.View.MaxAttempts
		}
		out := &linOut{}
		switch op.Outcome {
		case Unknown:
			if op.Kind == OpHeartbeat || op.Kind == OpGet {
				continue // changes nothing the model holds, shows nothing
			}
			out.unknown = true
			in.ret = math.MaxInt64
		case Refused:
			if !modeled[op.Code] || op.Status == 0 {
				continue
			}
			out.code = op.Code
		case OK:
			out.ok = true
			out.dup = op.Kind == OpCreate && isDup(op)
			switch op.Kind {
			case OpClaim, OpWorkerClaim:
				if op.Attempt != "" {
					j.known[op.Attempt] = true
				}
			}
			if op.Kind == OpWorkerClaim {
				var lbl string
				if _, err := fmt.Sscanf(op.Answer, "claimed %s attempt %d/%d", &lbl, &out.claimAttempts, &out.claimMax); err != nil {
					out.claimAttempts, out.claimMax = 0, 0
				} else if j.max == 0 {
					j.max = out.claimMax
				}
			}
			if op.Kind == OpFail && in.worker {
				if _, err := fmt.Sscanf(op.Answer, "requeued=%t dlq=%t", &out.requeued, &out.dlq); err == nil {
					out.ack = true
				}
			}
		}
		if !out.unknown {
			in.ret = max(c.ns(op.End), in.call)
			j.last = max(j.last, in.ret)
		}
		j.first = min(j.first, in.call)
		if op.View != nil && !out.unknown && linearizableView(op, in) {
			out.view = op.View
		}
		list = append(list, pending{in, out})
	}
	hasCreate := map[*linJob]bool{}
	for _, p := range list {
		if p.in.kind == OpCreate {
			hasCreate[p.in.job] = true
		}
	}
	// A job without a create in the history (its answer lost, and never
	// asked again with the key): created at some time by an operation the
	// history does not hold.
	for _, j := range c.jobs {
		if !hasCreate[j] && j.max > 0 {
			list = append(list, pending{&linOp{job: j, kind: OpCreate, call: 0, ret: math.MaxInt64}, &linOut{unknown: true}})
		}
	}
	kept := c.jobs[:0]
	skip := map[*linJob]bool{}
	for _, j := range c.jobs {
		if j.max == 0 {
			skip[j] = true
			skipped++
			continue
		}
		kept = append(kept, j)
	}
	c.jobs = kept
	for _, p := range list {
		if skip[p.in.job] {
			continue
		}
		c.ops[p.in.job] = append(c.ops[p.in.job], c.operation(p.in, p.out))
	}
	return skipped
}

// operation is the porcupine operation of in.
func (c *linChecker) operation(in *linOp, out *linOut) porcupine.Operation {
	client := c.clients + len(c.nodes)
	meta := "not in the history: the job's create, whose answer was lost"
	if in.op != nil {
		client = in.op.Client
		if in.op.Final {
			client = c.clients
			for i, n := range c.nodes {
				if n == in.op.Node {
					client += i
				}
			}
		}
		meta = c.m.p.line(in.op)
	}
	var o interface{} = out
	return porcupine.Operation{ClientId: client, Input: in, Call: in.call, Output: o, Return: in.ret, Metadata: meta}
}

// complete reports whether a partial linearization covers all n
// operations of a partition.
func complete(partials [][]int, n int) bool {
	for _, p := range partials {
		if len(p) == n {
			return true
		}
	}
	return false
}

// run checks every job: all at once first, partitioned by job; then each
// job that failed (or did not finish) again on its own, with a model that
// lets the worker claims whose answer was lost take it. A job that fails
// that too is not linearizable; one whose check ran out of time is
// unknown.
func (c *linChecker) run() linResult {
	began := time.Now()
	var res linResult
	res.check.Ran = true
	var all []porcupine.Operation
	for _, j := range c.jobs {
		all = append(all, c.ops[j]...)
	}
	res.check.Jobs, res.check.Ops, res.check.HiddenClaims = len(c.jobs), len(all), len(c.hidden)
	verdict, info := porcupine.CheckOperationsVerbose(c.model, all, c.timeout)
	res.check.First = time.Since(began)
	var again []*linJob
	if verdict != porcupine.Ok {
		parts := partitionByJob(all)
		partials := info.PartialLinearizations()
		for i, part := range parts {
			if !complete(partials[i], len(part)) {
				again = append(again, part[0].Input.(*linOp).job)
			}
		}
	}
	type failed struct {
		job  *linJob
		hist []porcupine.Operation
		info porcupine.LinearizationInfo
	}
	var illegal, unknown []failed
	var calls []int64
	for _, op := range c.hidden {
		calls = append(calls, c.ns(op.Start))
	}
	second := c.m.withHidden(calls).model()
	deadline := time.Now().Add(c.budget)
	for _, j := range again {
		if time.Now().After(deadline) {
			unknown = append(unknown, failed{job: j, hist: c.ops[j]})
			continue
		}
		res.check.Rechecked++
		h := c.ops[j]
		v, info := porcupine.CheckOperationsVerbose(second, h, min(c.timeout, time.Until(deadline)+time.Millisecond))
		switch v {
		case porcupine.Illegal:
			illegal = append(illegal, failed{j, h, info})
		case porcupine.Unknown:
			unknown = append(unknown, failed{job: j, hist: h})
		}
	}
	for _, f := range illegal {
		res.check.Illegal = append(res.check.Illegal, f.job.id)
		res.problems = append(res.problems, c.problem(second, f.job, f.hist, f.info))
	}
	for _, f := range unknown {
		res.check.Unknown = append(res.check.Unknown, f.job.id)
	}
	// The visualization: the jobs that are not linearizable (else those
	// not decided), a few at most, checked together once more.
	show := illegal
	if len(show) == 0 {
		show = unknown
	}
	if len(show) > 0 {
		var h []porcupine.Operation
		for i, f := range show {
			if i == maxReported {
				break
			}
			h = append(h, f.hist...)
		}
		_, info := porcupine.CheckOperationsVerbose(second, h, c.timeout)
		res.viz = &linViz{model: second, info: info, from: math.MaxInt64}
		for _, o := range h {
			if in := o.Input.(*linOp); in.op != nil {
				res.viz.from = min(res.viz.from, o.Call)
				if o.Return != math.MaxInt64 {
					res.viz.to = max(res.viz.to, o.Return)
				}
			}
		}
	}
	res.check.Elapsed = time.Since(began)
	return res
}

// problem explains why job j's history h is not linearizable under model:
// the first answer (by return) that the longest linearization porcupine
// found does not explain, and the states that linearization leaves the job
// in.
func (c *linChecker) problem(model porcupine.Model, j *linJob, h []porcupine.Operation, info porcupine.LinearizationInfo) Problem {
	var longest []porcupine.Operation
	for _, ps := range info.PartialLinearizationsOperations() {
		for _, p := range ps {
			if len(p) > len(longest) {
				longest = p
			}
		}
	}
	in := map[*linOp]bool{}
	for _, o := range longest {
		in[o.Input.(*linOp)] = true
	}
	var first *porcupine.Operation
	for i := range h {
		o := &h[i]
		if in[o.Input.(*linOp)] || o.Output.(*linOut).unknown {
			continue
		}
		if first == nil || o.Return < first.Return {
			first = o
		}
	}
	// The states after the longest linearization.
	state := model.Init()
	for _, o := range longest {
		_, state = model.Step(state, o.Input, o.Output)
	}
	text := fmt.Sprintf("not linearizable (porcupine, the job model of docs/drill.md): the longest order found explains %d of its %d operations", len(longest), len(h))
	var anchors []*Op
	if first != nil {
		fin := first.Input.(*linOp)
		text += fmt.Sprintf(" and leaves the job %s, which cannot answer %s %s(%s) @%s at %s..%s: %s", c.states(state),
			clientName(fin.op), fin.op.Kind, fin.op.Args, fin.op.Node, c.m.secs(first.Call), c.m.secs(first.Return), c.m.p.answer(fin.op))
		anchors = append(anchors, fin.op)
	}
	return Problem{JobID: j.id, Text: text, Anchors: anchors}
}

// states describes a porcupine state (a stateSet), at most 4 of its states.
func (c *linChecker) states(state interface{}) string {
	ss, _ := state.(stateSet)
	var d []string
	for i, s := range ss {
		if i == 4 {
			d = append(d, fmt.Sprintf("and %d more states", len(ss)-i))
			break
		}
		d = append(d, c.m.describeState(s))
	}
	return "{" + strings.Join(d, " | ") + "}"
}

func clientName(op *Op) string {
	if op.Final {
		return "final"
	}
	return "c" + strconv.Itoa(op.Client)
}

// write writes the visualization to path, with the faults during the
// shown operations as annotations.
func (v *linViz) write(path string, faults []Fault) error {
	var notes []porcupine.Annotation
	for _, f := range faults {
		if f.End.Nanoseconds() < v.from || f.Start.Nanoseconds() > v.to {
			continue
		}
		notes = append(notes, porcupine.Annotation{Tag: "faults", Start: f.Start.Nanoseconds(), End: f.End.Nanoseconds(),
			Description: fmt.Sprintf("%s %s", f.Kind, f.Node),
			Details:     fmt.Sprintf("fault %d: %s of %s (pid %d), %.3fs..%.3fs", f.N, f.Kind, f.Node, f.Pid, f.Start.Seconds(), f.End.Seconds())})
	}
	info := v.info
	info.AddAnnotations(notes)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := porcupine.Visualize(v.model, info, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sortedByNumber orders job ids by their #n.
func sortedByNumber(ids []string, nums map[string]int) []string {
	out := append([]string(nil), ids...)
	sort.Slice(out, func(i, k int) bool { return nums[out[i]] < nums[out[k]] })
	return out
}
