package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// FailingJob is a job with at least one problem, with an excerpt of its
// history.
type FailingJob struct {
	Number   int // #n: order of first appearance in the history
	ID       string
	Problems []string
	Excerpt  []string
}

// Report is the outcome of a run.
type Report struct {
	Seed     int64
	Nodes    int
	Clients  int
	Jobs     int
	Duration time.Duration // of the load
	Elapsed  time.Duration // of the whole run

	Faults []Fault

	// Ops counts the operations by kind and outcome ([OK, Refused, Unknown]).
	Ops map[OpKind][3]int
	// Next counts the worker claims a complete's "next" made (among the
	// wclaim ones), NextJobs those that took a job.
	Next     [3]int
	NextJobs int
	// Internal counts 500 answers (recorded as unknown outcomes).
	Internal int
	// Acknowledged creates, and jobs read at the end.
	Acked, JobsRead int
	// FinalStates counts the jobs by state, as the first node read them.
	FinalStates map[string]int
	// FinalReads is how many jobs were read through each node as leader.
	FinalReads map[string]int

	// FailingJobs are the jobs with problems; HashesAgree is the outcome of
	// testcluster.CheckConverged.
	FailingJobs []FailingJob
	HashesAgree bool
	// Lost counts the problems of acknowledged jobs found missing, Double
	// those of jobs completed twice or run again after an acknowledged
	// complete (both are among FailingJobs).
	Lost, Double int
	// Linearizability is the outcome of the porcupine check of every job's
	// history against the job model (linearize.go). Its non-linearizable
	// jobs are among FailingJobs and Violations; jobs it could not decide
	// in time are only listed in it.
	Linearizability LinCheck
	// Verified is set when the final checks ran to the end.
	Verified bool
	// Violations lists every broken guarantee (those of FailingJobs
	// included); Err says why the run could not be carried out.
	Violations []string
	Err        string
	// Dir holds the nodes' data and logs and, after a failure, summary.txt,
	// histories.txt (the failing jobs), history.txt (every operation) and,
	// if the linearizability check failed or did not finish for some jobs,
	// linearizability.html (Linearizability.Visualization); empty once
	// removed.
	Dir string
}

// OK reports whether the run finished and found nothing wrong.
func (r *Report) OK() bool { return r.Err == "" && r.Verified && len(r.Violations) == 0 }

// maxReported bounds the failing jobs quoted in String (all of them are in
// the files left in Dir).
const maxReported = 10

// String is the human report: every fault, the operations, and at most
// maxReported failing jobs with their excerpts (all of them with All).
func (r *Report) String() string { return r.text(false) }

// All is String with every failing job and violation.
func (r *Report) All() string { return r.text(true) }

func (r *Report) text(all bool) string {
	limit := maxReported
	if all {
		limit = len(r.FailingJobs) + len(r.Violations)
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("== Spine chaos workload ==")
	p("seed %d (CHAOS_SEED=%d to replay), %d clients, %d live jobs, %s of load, %s in all",
		r.Seed, r.Seed, r.Clients, r.Jobs, r.Duration.Round(100*time.Millisecond), r.Elapsed.Round(100*time.Millisecond))
	counts := map[FaultKind]int{}
	for _, f := range r.Faults {
		counts[f.Kind]++
	}
	var kc []string
	for _, k := range append(append([]FaultKind{}, FaultKinds...), PartitionKinds...) {
		if counts[k] > 0 {
			kc = append(kc, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	p("faults on %d nodes: %d (%s)", r.Nodes, len(r.Faults), strings.Join(kc, ", "))
	for _, f := range r.Faults {
		if len(f.Cut) > 0 {
			p("  %3d. %-18s %-20s %6.1fs..%6.1fs leader before the heal: %s; cut %s", f.N, f.Kind, f.Node, f.Start.Seconds(), f.End.Seconds(), f.Leaders, strings.Join(f.Cut, " "))
			continue
		}
		p("  %3d. %-18s %-20s pid %-7d %6.1fs..%6.1fs", f.N, f.Kind, f.Node, f.Pid, f.Start.Seconds(), f.End.Seconds())
	}
	var kinds []string
	total := [3]int{}
	for k, c := range r.Ops {
		kinds = append(kinds, string(k))
		for i := range c {
			total[i] += c[i]
		}
	}
	sort.Strings(kinds)
	p("operations: %d (ok %d, refused %d, unknown %d; 500 internal %d)", total[0]+total[1]+total[2], total[0], total[1], total[2], r.Internal)
	for _, k := range kinds {
		c := r.Ops[OpKind(k)]
		p("  %-10s ok %6d  refused %6d  unknown %5d", k, c[0], c[1], c[2])
	}
	p("  of the wclaim, a complete's next: ok %d (%d took a job), unknown %d", r.Next[0], r.NextJobs, r.Next[2])
	p("jobs: %d creates acknowledged; %d jobs read at the end through every node as leader %v; states %v",
		r.Acked, r.JobsRead, r.FinalReads, r.FinalStates)
	if !r.Verified {
		p("final state NOT VERIFIED (the run did not get that far)")
	} else {
		yes := "yes"
		if !r.HashesAgree {
			yes = "NO"
		}
		p("failing jobs: %d; state hashes agree: %s", len(r.FailingJobs), yes)
	}
	if l := r.Linearizability; l.Ran {
		p("linearizability (porcupine, per job): %s", l.summary())
		if l.Visualization != "" {
			p("linearizability visualization (porcupine): %s", l.Visualization)
		}
	}
	for i, fj := range r.FailingJobs {
		if i == limit {
			p("... and %d more failing jobs (summary.txt and histories.txt in the directory below)", len(r.FailingJobs)-limit)
			break
		}
		p("")
		p("== job #%d %s", fj.Number, fj.ID)
		for _, pr := range fj.Problems {
			p("-- %s", pr)
		}
		for _, l := range fj.Excerpt {
			p("%s", l)
		}
	}
	if len(r.FailingJobs) > 0 {
		p("")
	}
	for i, v := range r.Violations {
		if i == 2*limit {
			p("VIOLATION: ... and %d more (summary.txt in the directory below lists them all)", len(r.Violations)-i)
			break
		}
		p("VIOLATION: %s", v)
	}
	if r.Err != "" {
		p("ERROR: %s", r.Err)
	}
	if r.Dir != "" {
		p("data, node logs (nN.log) and histories in %s", r.Dir)
	}
	if r.OK() {
		p("RESULT: PASS")
	} else {
		p("RESULT: FAIL (replay: CHAOS_SEED=%d)", r.Seed)
	}
	return b.String()
}

// summary is the check's outcome in one line.
func (l LinCheck) summary() string {
	s := fmt.Sprintf("%d jobs, %d operations, %d worker claims of unknown outcome", l.Jobs, l.Ops, l.HiddenClaims)
	if l.Rechecked > 0 {
		s += fmt.Sprintf(", %d jobs checked again with them", l.Rechecked)
	}
	if l.Skipped > 0 {
		s += fmt.Sprintf(", %d jobs skipped (maxAttempts unknown)", l.Skipped)
	}
	s += fmt.Sprintf(", %s", l.Elapsed.Round(time.Millisecond))
	if l.Rechecked > 0 {
		s += fmt.Sprintf(" (first check %s)", l.First.Round(time.Millisecond))
	}
	s += ": "
	var verdict []string
	if len(l.Illegal) > 0 {
		verdict = append(verdict, fmt.Sprintf("NOT LINEARIZABLE: %d jobs (%s)", len(l.Illegal), shortIDs(l.Illegal)))
	}
	if len(l.Unknown) > 0 {
		verdict = append(verdict, fmt.Sprintf("UNKNOWN for %d jobs, the check ran out of time, not a pass (%s)", len(l.Unknown), shortIDs(l.Unknown)))
	}
	if len(verdict) == 0 {
		verdict = append(verdict, "ok")
	}
	s += strings.Join(verdict, "; ")
	if l.SelfTest != "" {
		s += "; self-test: " + l.SelfTest
	}
	return s
}

// shortIDs lists a few job ids by their first characters.
func shortIDs(ids []string) string {
	var out []string
	for i, id := range ids {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(ids)-i))
			break
		}
		out = append(out, short(id))
	}
	return strings.Join(out, ", ")
}
