package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/spine-queue/spine/client"
)

// OpKind names an operation of the workload.
type OpKind string

// The operations.
const (
	OpCreate      OpKind = "create"    // POST /jobs (head, idempotency key)
	OpClaim       OpKind = "claim"     // POST /jobs/{id}/claim (claw)
	OpWorkerClaim OpKind = "wclaim"    // POST /internal/worker/claim, long poll (claw)
	OpHeartbeat   OpKind = "heartbeat" // v0 or worker route
	OpComplete    OpKind = "complete"  // v0 or worker route
	OpFail        OpKind = "fail"      // v0 or worker route
	OpRelease     OpKind = "release"   // v0
	OpRedrive     OpKind = "redrive"   // POST /dlq/{id}/redrive (head)
	OpGet         OpKind = "get"       // GET /jobs/{id}?consistent (head)
)

// Outcome classifies an operation's answer.
type Outcome int

const (
	// OK: a 2xx answer.
	OK Outcome = iota
	// Refused: a definite answer that changed nothing (4xx, 503 no_leader),
	// or a request that certainly never left this process.
	Refused
	// Unknown: no answer (timeout, broken connection), 503 outcome_unknown
	// or a 5xx: the operation may have taken effect, at any time until the
	// end of the run.
	Unknown
)

// JobView is the part of a job the nodes must agree on.
type JobView struct {
	Status         string
	Attempts       int
	MaxAttempts    int
	AttemptID      string
	WorkerID       string
	ClaimedBy      string
	LeaseExpiresAt time.Time
	CreateIndex    uint64
	ModifyIndex    uint64
}

func viewOf(j *client.Job) *JobView {
	if j == nil || j.ID == "" {
		return nil
	}
	return &JobView{Status: string(j.Status), Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		AttemptID: j.AttemptID, WorkerID: j.WorkerID, ClaimedBy: j.ClaimedBy, LeaseExpiresAt: j.LeaseExpiresAt,
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex}
}

// Op is one operation as the client saw it.
type Op struct {
	// Seq numbers the operations in the order they were recorded.
	Seq int
	// Client is the client goroutine (0-based); -1 for the final reads.
	Client int
	Kind   OpKind
	// Node is the node the request was sent to.
	Node string
	// JobID is the job the operation named or was answered with ("" for a
	// worker claim that got nothing, or a create without an answer).
	JobID string
	// Args is the rendered arguments (lease label, route, flags).
	Args string
	// Attempt is the attempt id of the lease the operation used, or the
	// one a claim granted.
	Attempt string
	// Key is a create's idempotency key.
	Key        string
	Start, End time.Time
	Outcome    Outcome
	// Status is the HTTP status (0: no answer); Code the error code of the
	// answer, or what went wrong without one ("timeout", "not sent: ...").
	Status int
	Code   string
	// Answer is what else the answer said ("L1547", "claimed:false", ...).
	Answer string
	// View is the job the answer carried (a job answer, or a refusal's
	// error.job), if any.
	View *JobView
	// Index is the answer's X-Spine-Index (0: none).
	Index uint64
	// Final marks the reads made at the end, each node leader in turn.
	Final bool
}

// history records every operation of a run.
type history struct {
	began time.Time

	mu     sync.Mutex
	ops    []*Op
	labels map[string]string // attempt id → lease label (L<index of the claim>)
}

func newHistory(began time.Time) *history {
	return &history{began: began, labels: map[string]string{}}
}

// add records a finished operation.
func (h *history) add(op *Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Seq = len(h.ops)
	h.ops = append(h.ops, op)
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// leaseLabel names the lease of attempt, granted by a claim answered with
// index: "L<index>", or the attempt id's first characters without an index.
func (h *history) leaseLabel(attempt string, index uint64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.labels[attempt]; ok {
		return l
	}
	l := "L" + strconv.FormatUint(index, 10)
	if index == 0 {
		l = "A" + short(attempt)
	}
	h.labels[attempt] = l
	return l
}

// snapshot returns the operations sorted by start time, and the labels.
func (h *history) snapshot() ([]*Op, map[string]string) {
	h.mu.Lock()
	ops := append([]*Op(nil), h.ops...)
	labels := make(map[string]string, len(h.labels))
	for k, v := range h.labels {
		labels[k] = v
	}
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool {
		if !ops[i].Start.Equal(ops[j].Start) {
			return ops[i].Start.Before(ops[j].Start)
		}
		return ops[i].Seq < ops[j].Seq
	})
	return ops, labels
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// printer renders operations as history lines:
//
//	[   48.959s ..   48.961s] c3 claim() @n2 -> 200 L1547 [running 1/50 L1547]
//
// times in seconds from the start of the run, "end" for an operation whose
// outcome is unknown (it may take effect until the end of the run).
type printer struct {
	began  time.Time
	labels map[string]string
}

func (p printer) secs(t time.Time) string {
	return fmt.Sprintf("%9.3fs", t.Sub(p.began).Seconds())
}

func (p printer) label(attempt string) string {
	if attempt == "" {
		return ""
	}
	if l, ok := p.labels[attempt]; ok {
		return l
	}
	return "A" + short(attempt)
}

// view renders a job as [state attempts/max lease].
func (p printer) view(v *JobView) string {
	if v == nil {
		return ""
	}
	s := fmt.Sprintf("[%s %d/%d", v.Status, v.Attempts, v.MaxAttempts)
	if v.AttemptID != "" {
		s += " " + p.label(v.AttemptID)
	}
	return s + "]"
}

// detail renders everything the nodes are compared on.
func (p printer) detail(v *JobView) string {
	if v == nil {
		return "404 not found"
	}
	s := fmt.Sprintf("%s attempts %d/%d", v.Status, v.Attempts, v.MaxAttempts)
	if v.AttemptID != "" {
		s += fmt.Sprintf(" attempt %s (%s) worker %q claimedBy %q lease until %s", p.label(v.AttemptID), v.AttemptID,
			v.WorkerID, v.ClaimedBy, v.LeaseExpiresAt.UTC().Format("15:04:05.000"))
	}
	return s + fmt.Sprintf(" createIndex %d modifyIndex %d", v.CreateIndex, v.ModifyIndex)
}

func (p printer) answer(op *Op) string {
	var s string
	switch {
	case op.Outcome == Unknown && op.Status != 0:
		s = fmt.Sprintf("unknown (%d %s)", op.Status, op.Code)
	case op.Outcome == Unknown:
		s = fmt.Sprintf("unknown (%s)", op.Code)
	case op.Status == 0:
		s = op.Code
	default:
		s = strconv.Itoa(op.Status)
		if op.Code != "" {
			s += " " + op.Code
		}
	}
	if op.Answer != "" {
		s += " " + op.Answer
	}
	if v := p.view(op.View); v != "" {
		s += " " + v
	}
	return s
}

func (p printer) line(op *Op) string {
	end := fmt.Sprintf("%9s", "end")
	if op.Outcome != Unknown {
		end = fmt.Sprintf("%8.3fs", op.End.Sub(p.began).Seconds())
	}
	who := "c" + strconv.Itoa(op.Client)
	if op.Client < 0 {
		who = "final"
	}
	return fmt.Sprintf("[%s .. %s] %s %s(%s) @%s -> %s", p.secs(op.Start), end, who, op.Kind, op.Args, op.Node, p.answer(op))
}

// jobLine is line with the job named, for listings of the whole run.
func (p printer) jobLine(op *Op) string {
	job := op.JobID
	if job == "" {
		job = "-"
	}
	return fmt.Sprintf("%-36s %s", job, p.line(op))
}
