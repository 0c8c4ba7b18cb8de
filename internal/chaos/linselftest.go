package chaos

import (
	"fmt"
	"time"
)

// selfTest checks the checker on the run's own history: it copies the
// history of a job whose complete was acknowledged and adds a consistent
// read, just after that answer, that shows the job running the completed
// attempt again; and the history of a job whose create was acknowledged
// with a read just after it that answers 404. No server can answer either,
// whatever else happened; the check of each copy must find it. It returns
// how many such broken histories were built and which were missed.
func selfTest(ops []*Op, nums map[string]int, mk func() *linChecker) (tried int, missed []string) {
	var done, created *Op
	for _, op := range ops {
		switch {
		case done == nil && op.Kind == OpComplete && op.Outcome == OK && op.Attempt != "" && op.JobID != "":
			done = op
		case created == nil && op.Kind == OpCreate && op.Outcome == OK && !isDup(op) && op.JobID != "":
			created = op
		}
	}
	try := func(what string, base *Op, forged *Op) {
		var h []*Op
		for _, op := range ops {
			if op.JobID == base.JobID {
				h = append(h, op)
			}
		}
		h = append(h, forged)
		c := mk()
		if c.load(h, nums); len(c.jobs) == 0 {
			return // a job the check leaves out (maxAttempts unknown)
		}
		tried++
		res := c.run()
		if len(res.check.Illegal) != 1 {
			missed = append(missed, fmt.Sprintf("%s of job %s (%s)", what, base.JobID, res.check.summary()))
		}
	}
	read := func(base *Op) *Op {
		return &Op{Seq: -1, Client: 0, Kind: OpGet, Node: base.Node, JobID: base.JobID, Args: "consistent",
			Start: base.End.Add(time.Millisecond), End: base.End.Add(2 * time.Millisecond)}
	}
	if done != nil {
		r := read(done)
		r.Outcome, r.Status = OK, 200
		r.View = &JobView{Status: stRunning, Attempts: 1, MaxAttempts: 1, AttemptID: done.Attempt}
		for _, op := range ops {
			if op.JobID == done.JobID && op.View != nil {
				r.View.MaxAttempts = op.View.MaxAttempts
			}
		}
		try("a read showing the completed attempt running again", done, r)
	}
	if created != nil {
		r := read(created)
		r.Outcome, r.Status, r.Code = Refused, 404, codeNotFound
		try("a read answering 404 for the created job", created, r)
	}
	return tried, missed
}
