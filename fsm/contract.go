package fsm

import (
	"fmt"
	"sync"
)

// Result contracts: a job may carry a resultSchema (JobExtra.ResultSchema,
// the canonical JSON of a schema of the subset package contract checks),
// set at its create or from its stream's defaults, and fixed for the job's
// whole life. The state machine stores it and never validates: the node
// that receives a complete checks the result against it before proposing
// anything (queue/contract.go), and a complete that does not match is not
// proposed at all. What the log gets instead is a record of the refusal in
// the job's history (CompleteRefusedCommand), at most
// MaxRefusalsPerAttempt per attempt.

// CmdCompleteRefused records a complete refused because its result did
// not match the job's resultSchema. Its own command type, not a field of
// the complete: an entry that must never complete a job cannot be read as
// one by a reader that skips a field it does not know.
const CmdCompleteRefused CommandType = 53

const (
	// MaxRefusalsPerAttempt bounds the refused completes one attempt
	// records in its job's history: past it a refusal is still answered,
	// but nothing more is written (a looping worker cannot grow the
	// history, or the log, without end).
	MaxRefusalsPerAttempt = 10
	// MaxRefusalText caps the text of one refusal record.
	MaxRefusalText = 2048
)

// CompleteRefusedCommand records that the attempt Ref names sent a
// complete whose result did not match; Text says how. The job stays
// running under the same lease.
type CompleteRefusedCommand struct {
	Now   int64
	Ref   LeaseRef
	Actor Actor
	Text  string
}

func init() {
	register(CmdCompleteRefused, "complete-refused", func() command { return new(CompleteRefusedCommand) })
}

func (c *CompleteRefusedCommand) encode(e *enc) {
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.str(c.Text)
}

func (c *CompleteRefusedCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Text = d.str()
}

func (c *CompleteRefusedCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.ref(2, &c.Ref)
	f.actor(3, &c.Actor)
	f.str(4, &c.Text)
}

func (c *CompleteRefusedCommand) apply(a *applier) *Result {
	if a.t.level < LevelPolicies {
		return fail(fmt.Errorf("complete: %w: result contracts need cluster level %d", ErrInvalid, LevelPolicies))
	}
	if len(c.Text) > MaxRefusalText {
		return fail(fmt.Errorf("complete: %w: a refusal's text is over %d bytes", ErrInvalid, MaxRefusalText))
	}
	// The same checks as the complete it stands for: the caller must hold
	// the lease of a running job.
	old, r := a.lookupRunning("complete", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	at := old.Lease.AttemptID
	if RefusalsOf(old, at) >= MaxRefusalsPerAttempt {
		return &Result{Job: old}
	}
	j := copyJob(old)
	j.addEvent(Event{At: c.Now, Type: EventCompleteRefused, Actor: a.in.actor(c.Actor), From: StateRunning.Code(), To: StateRunning.Code(),
		AttemptID: at, WorkerID: c.Actor.WorkerID, Text: c.Text})
	a.put(old, j, c.Now)
	return &Result{Job: j}
}

// RefusalsOf counts the refused completes recorded for attempt id of j.
func RefusalsOf(j *Job, attempt string) int {
	n := 0
	h := j.events() // the created event is no refusal
	for i := len(h) - 1; i >= 0; i-- {
		if e := &h[i]; e.Type == EventCompleteRefused && e.AttemptID == attempt {
			n++
		}
	}
	return n
}

// applyContract gives a new job its result schema: the create's, or else
// its stream's default. From LevelPolicies only: below it, a build that
// does not know the field would skip it, and so must this one.
func (a *applier) applyContract(j *Job, schema string) {
	if a.t.level < LevelPolicies {
		return
	}
	if schema == "" {
		if d := a.t.defaults[j.Stream]; d != nil {
			schema = d.ResultSchema // shared with the defaults
		}
	}
	if schema != "" {
		j.extraMut().ResultSchema = internSchema(schema)
	}
}

// The schemas in use, shared: jobs created with equal schemas (a client
// that sends the same one with every create, a restore of many jobs) hold
// one copy. Sharing only saves memory; an interned schema equals the one
// it replaces. Bounded: past schemaInternMax distinct schemas, new ones
// are simply kept as they are.
var schemaIntern = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

const schemaInternMax = 1024

func internSchema(s string) string {
	if s == "" {
		return s
	}
	schemaIntern.Lock()
	defer schemaIntern.Unlock()
	if t, ok := schemaIntern.m[s]; ok {
		return t
	}
	if len(schemaIntern.m) < schemaInternMax {
		schemaIntern.m[s] = s
	}
	return s
}

// schema is a result schema field: a string, shared when read
// (internSchema).
func (f *fields) schema(n int, p *string) {
	f.str(n, p)
	if !f.w && *p != "" {
		*p = internSchema(*p)
	}
}
