package chaos

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The sequential specification of one job that the porcupine check
// (linearize.go) holds each job's history to. It follows fsm/apply.go, apply_attempt.go and apply_expire.go:
//
//   - create: a job that does not exist is created queued with 0 attempts
//     (201); an existing one is answered again (200, idempotency key);
//   - claim (by id, or claim-next naming the job): only a queued job; a
//     claim increments attempts and starts a lease (attempt id + token); a
//     claim of a queued job out of attempts kills it (409 max_attempts);
//   - heartbeat, complete, fail, release: authorized only for the current
//     attempt of a running job (else 409 illegal_transition when the job is
//     not running, stale_lease when another attempt holds it; the worker
//     routes call both stale_lease); complete → done, fail → queued while
//     attempts < maxAttempts with requeue, dead at the limit, failed without
//     requeue; release → queued with the attempt given back (attempts-1);
//   - a complete or fail that names an attempt (attempt id and token) which
//     already ended by its own complete or fail is answered again as the
//     first answer (Result.Duplicate, requeued/dlq of the first fail) and
//     changes nothing, whatever the job's state is now;
//   - redrive: a failed or dead job → queued with attempts 0;
//   - a consistent read shows the state as it is.
//
// Besides the operations the job may take internal steps, which the model
// may take before any operation (jobModel.internal):
//
//   - the reaper (the leader's, not a client's) ends an expired lease:
//     running → queued, or dead at the limit. A lease cannot expire before
//     it was granted or last extended plus its length, so the model allows
//     a reap only before an operation that returned after the lease's
//     earliest expiry (Floor, see jobModel.slack);
//   - a worker claim-next whose answer was lost names no job: it may have
//     claimed this one, at any time after its call. The model for the
//     second check (jobModel.hiddenCalls) lets such a lost claim take the
//     queued job before an operation that returned after the claim's call,
//     each lost claim at most once;
//   - a worker claim-next whose caller left before the answer is given back
//     by the server at once (queue.Service.giveBack): running → queued,
//     attempts-1, for a lease taken by such a lost claim only.
//
// Unknown outcomes of the operations that name the job (no answer, 503
// outcome_unknown, 5xx) are porcupine's pending operations: their return is
// at the end of time and the model accepts them in any state, with their
// effect applied or not (jobModel.step).

// Job states.
const (
	stQueued  = "queued"
	stRunning = "running"
	stDone    = "done"
	stFailed  = "failed"
	stDead    = "dead"
)

// Refusal codes the model produces (docs/api.md).
const (
	codeNotFound    = "not_found"
	codeIllegal     = "illegal_transition"
	codeStale       = "stale_lease"
	codeMaxAttempts = "max_attempts"
	codeNothing     = "nothing_to_claim" // a claim-next that did not take this job
)

// Who took the job's current lease, when no client learned its attempt.
const (
	hiddenNone   uint8 = iota
	hiddenClaim        // a claim by id whose answer was lost
	hiddenWorker       // a claim-next whose answer was lost: may also have been given back
)

// jobState is the state of one job in the model. It is a comparable value:
// porcupine compares states with ==.
type jobState struct {
	Exists   bool
	Status   string
	Attempts int
	Max      int
	// Attempt is the attempt id of the current lease ("" when not running,
	// or for a hidden lease whose id no answer has shown yet).
	Attempt string
	Hidden  uint8
	// Floor is the earliest time (ns from the start of the load) the
	// current lease can expire: the reaper may end it only before an
	// operation that returned at or after Floor.
	Floor int64
	// Ended lists the attempts their holder ended by complete or fail,
	// each with what a repeat is answered: "id=c" completed, "id=f<requeued><dlq>"
	// failed (f10: requeued, f01: dead-lettered); sorted, ';'-separated.
	Ended string
	// Used counts the lost worker claims that took the job.
	Used int
	// Now is the latest call of the operations linearized so far: what
	// happens next happens no earlier (ns from the start of the load). It
	// is a function of which operations are linearized, so it does not
	// multiply porcupine's cache entries.
	Now int64
}

func endedGet(ended, attempt string) (string, bool) {
	for _, e := range strings.Split(ended, ";") {
		if id, v, ok := strings.Cut(e, "="); ok && id == attempt {
			return v, true
		}
	}
	return "", false
}

func endedPut(ended, attempt, v string) string {
	var es []string
	if ended != "" {
		es = strings.Split(ended, ";")
	}
	es = append(es, attempt+"="+v)
	sort.Strings(es)
	return strings.Join(es, ";")
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// linJob is what the model knows of one job beyond its operations.
type linJob struct {
	id     string
	number int // #n of the report
	max    int // maxAttempts, from the create's arguments or any answer
	// known are the attempt ids acknowledged claims granted: a hidden
	// lease is never one of them.
	known map[string]bool
	// first is the call of the job's first operation; last the latest
	// return of one with an answer (ns from the start of the load).
	first, last int64
}

// linOp is one operation of a job's history, as the model reads it: the
// porcupine operation's input.
type linOp struct {
	op   *Op // the recorded operation; nil for the synthetic create
	job  *linJob
	kind OpKind
	// attempt is the attempt id of the lease the call used, or the one an
	// acknowledged claim granted.
	attempt string
	// worker: a worker-contract route; consistent: a heartbeat with
	// ?consistent; requeue: a fail's.
	worker, consistent, requeue bool
	call, ret                   int64
}

// linOut is the answer of an operation: the porcupine operation's output.
// Only what is linearizable is kept (see linearize.go).
type linOut struct {
	unknown bool
	ok      bool
	code    string // a refusal's code
	dup     bool   // a create answered 200: the job existed
	// view is the job the answer carried, when the answer reflects the
	// state at a point within the call (not a heartbeat answered from a
	// follower's state, not a repeated create answered from local state).
	view *JobView
	// ack: a worker fail's answer, requeued/dlq.
	ack, requeued, dlq bool
	// claimAttempts/claimMax: a worker claim's "attempt n/m" (0: none).
	claimAttempts, claimMax int
}

// jobModel is the porcupine model of one job.
type jobModel struct {
	lease int64 // the lease length, ns
	// slack absorbs the difference between the clients' and the nodes'
	// clocks (one machine) in the lease's earliest expiry.
	slack int64
	// hiddenCalls are the calls (sorted, ns from the start of the load) of
	// the worker claims whose answer was lost: each may have taken the job
	// at any time after it. None in the first check.
	hiddenCalls []int64
	p           printer
	began       time.Time
}

func newJobModel(leaseSeconds int, p printer) *jobModel {
	return &jobModel{lease: int64(leaseSeconds) * int64(time.Second), slack: int64(250 * time.Millisecond), p: p, began: p.began}
}

// withHidden is m allowing the lost worker claims called at calls.
func (m *jobModel) withHidden(calls []int64) *jobModel {
	m2 := *m
	m2.hiddenCalls = append([]int64(nil), calls...)
	sort.Slice(m2.hiddenCalls, func(i, j int) bool { return m2.hiddenCalls[i] < m2.hiddenCalls[j] })
	return &m2
}

// hiddenBefore is how many lost worker claims were called at or before t.
func (m *jobModel) hiddenBefore(t int64) int {
	return sort.Search(len(m.hiddenCalls), func(i int) bool { return m.hiddenCalls[i] > t })
}

// step is the nondeterministic step function: every state the job may be
// in after in answered out, from s.
func (m *jobModel) step(s jobState, in *linOp, out *linOut) []jobState {
	var next []jobState
	for _, c := range m.internal(s, in.ret) {
		switch {
		case out.unknown:
			// Applied or not, at any point after the call.
			next = append(next, c, m.fsm(c, in).next)
		case in.kind == OpHeartbeat && out.ok && !in.consistent:
			// Perhaps answered from a follower's state (docs/api.md): it
			// proves nothing about the job now. If it is the current
			// lease, that lease lasts at least half a lease from the call.
			if authorized(c, in) {
				c.Floor = max(c.Floor, m.leaseFloor(in.call, false))
			}
			next = append(next, c)
		default:
			if n, ok := answers(in, out, m.fsm(c, in)); ok {
				next = append(next, n)
			}
		}
	}
	// The operation is linearized at its call or later.
	for i := range next {
		next[i].Now = max(s.Now, in.call)
	}
	return next
}

func (m *jobModel) hash(s jobState) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%t|%s|%d|%d|%s|%d|%d|%s|%d|%d", s.Exists, s.Status, s.Attempts, s.Max, s.Attempt, s.Hidden, s.Floor, s.Ended, s.Used, s.Now)
	return h.Sum64()
}

// model is the porcupine model, partitioned by job. The job model is
// nondeterministic (unknown outcomes, internal steps); porcupine's model is
// its power set construction, as porcupine.NondeterministicModel.ToModel
// builds it, with one more reduction: of two states that differ only in
// how early their lease may be reaped and how many lost worker claims they
// used, the one that allows no more than the other is dropped (dominated).
// A porcupine state is a stateSet.
func (m *jobModel) model() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByJob,
		Init:      func() interface{} { return stateSet{jobState{}} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			var next stateSet
			for _, s := range state.(stateSet) {
				next = append(next, m.step(s, input.(*linOp), output.(*linOut))...)
			}
			next = next.reduce()
			return len(next) > 0, next
		},
		Equal: func(a, b interface{}) bool { return slices.Equal(a.(stateSet), b.(stateSet)) },
		Hash: func(state interface{}) uint64 {
			var h uint64
			for _, s := range state.(stateSet) {
				h ^= m.hash(s)
			}
			return h
		},
		DescribeOperation: func(input, output interface{}) string { return m.describeOp(input.(*linOp), output.(*linOut)) },
		DescribeState: func(state interface{}) string {
			var d []string
			for _, s := range state.(stateSet) {
				d = append(d, m.describeState(s))
			}
			return "{" + strings.Join(d, " | ") + "}"
		},
		DescribeOperationMetadata: func(info interface{}) string { s, _ := info.(string); return s },
	}
}

// stateSet is a set of job states, sorted, without duplicates or
// dominated states.
type stateSet []jobState

// dominates: a allows every future b allows (b is a with a later reap or
// fewer lost worker claims left).
func dominates(a, b jobState) bool {
	x, y := a, b
	x.Floor, y.Floor, x.Used, y.Used = 0, 0, 0, 0
	return x == y && a.Floor <= b.Floor && a.Used <= b.Used
}

func (ss stateSet) reduce() stateSet {
	var out stateSet
	for i, s := range ss {
		drop := false
		for k, o := range ss {
			// Of equal states the first is kept.
			if k != i && dominates(o, s) && (o != s || k < i) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b jobState) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), cmp.Compare(a.Attempts, b.Attempts), cmp.Compare(a.Attempt, b.Attempt),
			cmp.Compare(a.Hidden, b.Hidden), cmp.Compare(a.Floor, b.Floor), cmp.Compare(a.Ended, b.Ended), cmp.Compare(a.Used, b.Used),
			cmp.Compare(a.Max, b.Max), cmp.Compare(a.Now, b.Now), boolCmp(a.Exists, b.Exists))
	})
	return out
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// partitionByJob splits a history by job, in the order the jobs first
// appear in it.
func partitionByJob(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[*linJob]int{}
	var out [][]porcupine.Operation
	for _, o := range history {
		j := o.Input.(*linOp).job
		i, ok := idx[j]
		if !ok {
			i = len(out)
			idx[j] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], o)
	}
	return out
}

func (m *jobModel) secs(ns int64) string {
	return fmt.Sprintf("%.3fs", time.Duration(ns).Seconds())
}

func (m *jobModel) describeState(s jobState) string {
	if !s.Exists {
		return "no job"
	}
	d := fmt.Sprintf("%s %d/%d", s.Status, s.Attempts, s.Max)
	if s.Status == stRunning {
		switch {
		case s.Hidden == hiddenWorker && s.Attempt == "":
			d += " (lease of a lost worker claim)"
		case s.Hidden != hiddenNone && s.Attempt == "":
			d += " (lease of a lost claim)"
		case s.Hidden != hiddenNone:
			d += " " + m.p.label(s.Attempt) + " (lost claim)"
		default:
			d += " " + m.p.label(s.Attempt)
		}
		d += ", reapable from " + m.secs(s.Floor)
	}
	if s.Ended != "" {
		var es []string
		for _, e := range strings.Split(s.Ended, ";") {
			id, v, _ := strings.Cut(e, "=")
			what := "completed"
			if strings.HasPrefix(v, "f") {
				what = "failed"
			}
			es = append(es, m.p.label(id)+" "+what)
		}
		d += "; ended: " + strings.Join(es, ", ")
	}
	if s.Used > 0 {
		d += fmt.Sprintf("; taken by %d lost worker claims", s.Used)
	}
	return d
}

func (m *jobModel) describeOp(in *linOp, out *linOut) string {
	var d string
	switch {
	case in.op == nil:
		d = "create (not in the history)"
	default:
		who := "c" + fmt.Sprint(in.op.Client)
		if in.op.Final {
			who = "final"
		}
		d = fmt.Sprintf("%s %s(%s) @%s -> %s", who, in.op.Kind, in.op.Args, in.op.Node, m.p.answer(in.op))
	}
	if out.unknown && in.op != nil {
		d += " (may take effect at any time)"
	}
	return d
}
