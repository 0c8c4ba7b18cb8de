package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one broken guarantee about one job.
type Problem struct {
	JobID string
	Text  string
	// Class sorts the problem for the verdict line: lost (an acknowledged
	// job missing), double (completed twice, or run again after an
	// acknowledged complete), or "" for the rest.
	Class string
	// Anchors are the operations that show it (quoted in the excerpt).
	Anchors []*Op
}

// observed is the state an operation proves the job was in at some instant
// between its start and its end ("" when it proves none). Only answers
// that are linearizable count: consistent reads, claims granted (the job
// was queued, then running), and refusals of writes, which carry the job
// as the leader applied it. Heartbeat answers may come from a follower's
// state (docs/api.md), and a repeated complete or fail of one attempt is
// answered with the first answer again, so neither counts.
func observed(op *Op) string {
	if op.Outcome == Unknown || op.JobID == "" {
		return ""
	}
	switch op.Kind {
	case OpGet:
		if op.Outcome == OK && op.View != nil {
			return op.View.Status
		}
	case OpClaim, OpWorkerClaim:
		if op.Outcome == OK && op.Attempt != "" {
			return "running"
		}
	}
	if op.Status == 409 && op.View != nil {
		switch op.Kind {
		case OpClaim, OpComplete, OpFail, OpRelease, OpRedrive:
			return op.View.Status
		}
	}
	return ""
}

// analyze checks a run's history, the final reads included (ops with
// Final set, one per job per node), and returns the problems found,
// sorted by job:
//
//   - the nodes, each read as leader, hold different states for a job
//     (status, attempts, attempt id, worker, lease expiry, indexes);
//   - a job known to exist (an acknowledged create, or any 2xx answer
//     naming it) is answered 404, during the run or in the final reads;
//   - a job whose complete was acknowledged is seen queued or running
//     afterwards, with no acknowledged redrive in between;
//   - a job acknowledged complete for two different attempts;
//   - an idempotency key acknowledged with two different jobs.
//
// nodes lists the node ids every job must have a final read from.
func analyze(ops []*Op, nodes []string, p printer) []Problem {
	var probs []Problem
	class := ""
	add := func(job, text string, anchors ...*Op) {
		probs = append(probs, Problem{JobID: job, Text: text, Class: class, Anchors: anchors})
	}
	byJob := map[string][]*Op{}
	known := map[string]*Op{} // job → the first acknowledged answer naming it (earliest end)
	keyJob := map[string]*Op{}
	for _, op := range ops {
		if op.JobID == "" {
			continue
		}
		byJob[op.JobID] = append(byJob[op.JobID], op)
		if op.Outcome == OK && !op.Final {
			if k := known[op.JobID]; k == nil || op.End.Before(k.End) {
				known[op.JobID] = op
			}
		}
		if op.Kind == OpCreate && op.Outcome == OK && op.Key != "" {
			if prev, ok := keyJob[op.Key]; ok && prev.JobID != op.JobID {
				add(op.JobID, fmt.Sprintf("idempotency key %s was acknowledged with job %s and then with job %s", op.Key, prev.JobID, op.JobID), prev, op)
			} else if !ok {
				keyJob[op.Key] = op
			}
		}
	}
	jobs := make([]string, 0, len(byJob))
	for id := range byJob {
		jobs = append(jobs, id)
	}
	sort.Strings(jobs)

	for _, id := range jobs {
		jops := byJob[id]
		// The final reads: one per node.
		finals := map[string]*Op{}
		for _, op := range jops {
			if op.Final {
				finals[op.Node] = op
			}
		}
		if len(finals) > 0 {
			var missing []string
			for _, n := range nodes {
				if finals[n] == nil {
					missing = append(missing, n)
				}
			}
			if len(missing) > 0 {
				add(id, fmt.Sprintf("no final read through %s", strings.Join(missing, ", ")))
			}
			if diff := finalDiff(nodes, finals, p); diff != "" {
				var anchors []*Op
				for _, n := range nodes {
					if finals[n] != nil {
						anchors = append(anchors, finals[n])
					}
				}
				add(id, "the nodes hold different states: "+diff, anchors...)
			}
		}

		// 404 for a job known to exist.
		if k := known[id]; k != nil {
			for _, op := range jops {
				if op.Status == 404 && op.Start.After(k.End) {
					what := "answered 404 not_found"
					if op.Final {
						what = "is missing (404) in the final read"
					}
					class = ClassLost
					add(id, fmt.Sprintf("job %s through %s at %s although it was acknowledged at %s", what, op.Node,
						strings.TrimSpace(p.secs(op.Start)), strings.TrimSpace(p.secs(k.End))), k, op)
					class = ""
					break
				}
			}
		}

		// Completes.
		var completes, redrives []*Op
		for _, op := range jops {
			if op.Outcome != OK {
				continue
			}
			switch op.Kind {
			case OpComplete:
				completes = append(completes, op)
			case OpRedrive:
				redrives = append(redrives, op)
			}
		}
		attempts := map[string]*Op{}
		for _, c := range completes {
			if c.Attempt == "" {
				continue
			}
			if _, ok := attempts[c.Attempt]; ok {
				continue
			}
			class = ClassDouble
			for a, prev := range attempts {
				add(id, fmt.Sprintf("complete was acknowledged for two attempts, %s and %s", p.label(a), p.label(c.Attempt)), prev, c)
			}
			attempts[c.Attempt] = c
			class = ""
		}
	completed:
		for _, c := range completes {
			for _, o := range jops {
				st := observed(o)
				if (st != "queued" && st != "running") || !o.Start.After(c.End) {
					continue
				}
				excused := false
				for _, r := range redrives {
					if r.Start.Before(o.End) && r.End.After(c.Start) {
						excused = true
						break
					}
				}
				if !excused {
					class = ClassDouble
					add(id, fmt.Sprintf("complete of %s was acknowledged at %s, but the job was seen %s at %s (%s through %s) with no acknowledged redrive in between",
						p.label(c.Attempt), strings.TrimSpace(p.secs(c.End)), st, strings.TrimSpace(p.secs(o.Start)), o.Kind, o.Node), c, o)
					class = ""
					break completed
				}
			}
		}
	}
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].JobID < probs[j].JobID })
	return probs
}

// finalDiff describes how the nodes' final reads of a job differ ("" when
// they agree).
func finalDiff(nodes []string, finals map[string]*Op, p printer) string {
	var ref *Op
	same := true
	for _, n := range nodes {
		f := finals[n]
		if f == nil {
			continue
		}
		if ref == nil {
			ref = f
			continue
		}
		if !sameView(ref.View, f.View) {
			same = false
		}
	}
	if same {
		return ""
	}
	var parts []string
	for _, n := range nodes {
		if f := finals[n]; f != nil {
			parts = append(parts, n+": "+p.detail(f.View))
		}
	}
	return strings.Join(parts, "; ")
}

func sameView(a, b *JobView) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Status == b.Status && a.Attempts == b.Attempts && a.MaxAttempts == b.MaxAttempts &&
		a.AttemptID == b.AttemptID && a.WorkerID == b.WorkerID && a.ClaimedBy == b.ClaimedBy &&
		a.LeaseExpiresAt.Equal(b.LeaseExpiresAt) && a.CreateIndex == b.CreateIndex && a.ModifyIndex == b.ModifyIndex
}

// excerpt renders the history of one job for a report: its first
// operation, the operations around each anchor, and the final reads, with
// "..." where operations were left out. At most maxLines operation lines.
func excerpt(jops []*Op, anchors []*Op, p printer, maxLines int) []string {
	keep := make([]bool, len(jops))
	idx := map[*Op]int{}
	for i, op := range jops {
		idx[op] = i
	}
	const around = 4
	for _, a := range anchors {
		i, ok := idx[a]
		if !ok || a.Final {
			continue
		}
		for j := max(0, i-around); j <= min(len(jops)-1, i+around); j++ {
			keep[j] = true
		}
	}
	nonFinal := 0
	for i, op := range jops {
		if op.Final {
			keep[i] = true
		} else {
			nonFinal++
		}
	}
	if len(jops) > 0 {
		keep[0] = true
	}
	// Without anchors during the run (a divergence found in the final
	// reads), the last operations before them.
	anchored := false
	for _, a := range anchors {
		if !a.Final {
			anchored = true
		}
	}
	if !anchored {
		seen := 0
		for i := len(jops) - 1; i >= 0 && seen < 20; i-- {
			if !jops[i].Final {
				keep[i] = true
				seen++
			}
		}
	}
	var out []string
	gap := false
	lines := 0
	for i, op := range jops {
		if !keep[i] || lines >= maxLines && !op.Final {
			gap = true
			continue
		}
		if gap {
			out = append(out, "   ...")
			gap = false
		}
		out = append(out, p.line(op))
		lines++
	}
	if gap {
		out = append(out, "   ...")
	}
	return out
}

// jobNumbers numbers the jobs in the order they first appear in the
// history (sorted by start), as #1, #2, ...
func jobNumbers(ops []*Op) map[string]int {
	num := map[string]int{}
	for _, op := range ops {
		if op.JobID != "" {
			if _, ok := num[op.JobID]; !ok {
				num[op.JobID] = len(num) + 1
			}
		}
	}
	return num
}

// fillCreateJobs names the job of create operations whose answer was lost,
// from a later create with the same idempotency key that was answered.
func fillCreateJobs(ops []*Op) {
	byKey := map[string]string{}
	for _, op := range ops {
		if op.Kind == OpCreate && op.Outcome == OK && op.Key != "" && op.JobID != "" {
			if _, ok := byKey[op.Key]; !ok {
				byKey[op.Key] = op.JobID
			}
		}
	}
	for _, op := range ops {
		if op.Kind == OpCreate && op.JobID == "" && op.Key != "" {
			op.JobID = byKey[op.Key]
		}
	}
}
