package drill

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// jobState is what the nodes must agree on.
type jobState struct {
	Status      client.JobStatus
	Attempts    int
	ModifyIndex uint64
}

// listAll pages through GET /jobs (limit 1000, cursor) as head.
func listAll(ctx context.Context, c *client.Client, stale bool) ([]*client.Job, error) {
	var out []*client.Job
	cursor := ""
	for page := 0; ; page++ {
		if page > 100000 {
			return nil, fmt.Errorf("list: more than %d pages; cursor not advancing?", page)
		}
		res, err := c.JobList(ctx, &client.JobListParams{Limit: 1000, Cursor: cursor, Stale: stale})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Jobs...)
		if res.NextCursor == "" || len(res.Jobs) == 0 {
			return out, nil
		}
		if string(res.NextCursor) == cursor {
			return nil, fmt.Errorf("list: cursor %q did not advance", cursor)
		}
		cursor = string(res.NextCursor)
	}
}

var verifyRetry = client.RetryPolicy{MaxAttempts: 20, BaseDelay: 50 * time.Millisecond,
	MaxDelay: time.Second, MaxElapsed: 20 * time.Second}

// drain waits until every job in the cluster is done (the workers keep
// running), and the job count stopped moving.
func (d *drill) drain(ctx context.Context) error {
	hc := d.cs.head("drain", 5*time.Second, verifyRetry)
	deadline := time.Now().Add(d.cfg.DrainTimeout)
	prevTotal, lastLog := -1, time.Now()
	var last string
	for {
		jobs, err := listAll(ctx, hc, false)
		if err == nil {
			by := map[client.JobStatus]int{}
			for _, j := range jobs {
				by[j.Status]++
			}
			notDone := len(jobs) - by[client.JobStatusDone]
			last = fmt.Sprintf("%d of %d jobs not done (queued %d, running %d, failed %d, dead %d)",
				notDone, len(jobs), by[client.JobStatusQueued], by[client.JobStatusRunning],
				by[client.JobStatusFailed], by[client.JobStatusDead])
			if len(jobs) == prevTotal {
				if notDone == 0 {
					return nil
				}
				if stuck := by[client.JobStatusFailed] + by[client.JobStatusDead]; stuck == notDone {
					return fmt.Errorf("drain stopped: %s", last)
				}
			}
			prevTotal = len(jobs)
			if time.Since(lastLog) > 5*time.Second {
				d.cfg.Logf("drill: draining: %s", last)
				lastLog = time.Now()
			}
		} else {
			last = "list: " + err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained within %v: %s", d.cfg.DrainTimeout, last)
		}
		if !testcluster.SleepCtx(ctx, 300*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// verify checks the final state: every acknowledged create exists and is
// done, no double completion, exactly one completed event per job, all
// nodes hold the same jobs, and their state hashes agree.
func (d *drill) verify(ctx context.Context) error {
	rep, rec := d.rep, d.rec
	rec.mu.Lock()
	rep.Jobs = len(rec.created)
	rep.ProbeJobs = len(rec.probe)
	rep.Claims = rec.claims
	rep.ClaimErrors = rec.claimErrs
	rep.CreateRetries = rec.createErrs
	rep.ProbeErrors = rec.probeErrs
	rep.DuplicateAnswers = rec.duplicates
	rep.StaleRefused = rec.staleRefused
	for _, n := range rec.completeErrs {
		rep.CompleteErrors += n
	}
	for _, a := range rec.completed {
		rep.Completes += len(a)
	}
	for _, s := range rec.keyClashes {
		rep.violation("idempotency: %s", s)
	}
	rec.mu.Unlock()
	for i := range rep.Kills {
		rep.Kills[i].ProducerGap, _ = rec.producerGap(rep.Kills[i].killAt)
	}

	doubles := rec.doubles()
	rep.DoubleCompletions = len(doubles)
	for i, s := range doubles {
		if i == 10 {
			rep.violation("double completion: ... and %d more", len(doubles)-10)
			break
		}
		rep.violation("double completion: %s", s)
	}

	// Every node caught up with the leader's commit index.
	leader, err := d.c.WaitLeader(d.cfg.RecoveryTimeout)
	if err != nil {
		return fmt.Errorf("verify: no leader: %w", err)
	}
	h, err := d.c.Health(leader)
	if err != nil {
		return fmt.Errorf("verify: leader health: %w", err)
	}
	rep.FinalIndex = h.CommitIndex
	if err := d.c.WaitCaughtUp(h.CommitIndex, d.cfg.RecoveryTimeout); err != nil {
		rep.violation("nodes did not catch up with commit index %d: %v", h.CommitIndex, err)
	}

	// Each node's own state (stale reads), all pages.
	views := make([][]*client.Job, len(d.c.Nodes))
	var ref []*client.Job
	for i, n := range d.c.Nodes {
		nc, err := client.New([]string{n.URL}, client.WithToken(testcluster.HeadToken),
			client.WithTimeout(10*time.Second), client.WithRetry(verifyRetry))
		if err != nil {
			return err
		}
		if views[i], err = listAll(ctx, nc, true); err != nil {
			return fmt.Errorf("verify: list %s: %w", n.ID, err)
		}
		if n == leader {
			ref = views[i]
		}
	}
	rep.JobsInCluster = len(ref)
	refMap := map[string]jobState{}
	keys := map[string][]string{}
	for _, j := range ref {
		refMap[j.ID] = jobState{j.Status, j.Attempts, j.ModifyIndex}
		if j.IdempotencyKey != "" {
			keys[j.IdempotencyKey] = append(keys[j.IdempotencyKey], j.ID)
		}
	}
	for k, ids := range keys {
		if len(ids) > 1 {
			rep.violation("idempotency: key %s made %d jobs %v", k, len(ids), ids)
		}
	}

	// Nodes agree.
	rep.NodesAgree = true
	for i, n := range d.c.Nodes {
		if n == leader {
			continue
		}
		diff := diffViews(refMap, views[i])
		if len(diff) > 0 {
			rep.NodesAgree = false
			rep.Disagreements += len(diff)
			ex := diff
			if len(ex) > 5 {
				ex = ex[:5]
			}
			rep.violation("node %s disagrees with leader %s on %d jobs, e.g. %s", n.ID, leader.ID, len(diff), strings.Join(ex, "; "))
		}
	}

	// Every acknowledged create exists and every job is done.
	rec.mu.Lock()
	var lost []string
	for id := range rec.created {
		if _, ok := refMap[id]; !ok {
			lost = append(lost, id)
		}
	}
	rec.mu.Unlock()
	sort.Strings(lost)
	rep.Lost = len(lost)
	if len(lost) > 0 {
		rep.violation("lost: %d acknowledged creates are missing, e.g. %v", len(lost), lost[:min(len(lost), 5)])
	}
	var notDone []string
	for _, j := range ref {
		if j.Status != client.JobStatusDone {
			notDone = append(notDone, j.ID+"="+string(j.Status))
		}
	}
	sort.Strings(notDone)
	rep.NotDone = len(notDone)
	if len(notDone) > 0 {
		rep.violation("not done: %d jobs, e.g. %v", len(notDone), notDone[:min(len(notDone), 5)])
	}

	d.checkEvents(ctx, ref)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// The replicas' running hashes of the commands they applied agree.
	if err := d.c.CheckConverged(d.cfg.RecoveryTimeout); err != nil {
		rep.violation("state hashes: %v", err)
	} else {
		rep.HashesAgree = true
	}
	rep.Verified = true
	return nil
}

// diffViews lists the jobs where a node's view differs from the leader's.
func diffViews(ref map[string]jobState, view []*client.Job) []string {
	var out []string
	seen := make(map[string]bool, len(view))
	for _, j := range view {
		seen[j.ID] = true
		got := jobState{j.Status, j.Attempts, j.ModifyIndex}
		want, ok := ref[j.ID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s only on this node", j.ID))
		case got != want:
			out = append(out, fmt.Sprintf("%s %+v vs leader %+v", j.ID, got, want))
		}
	}
	for id := range ref {
		if !seen[id] {
			out = append(out, fmt.Sprintf("%s missing on this node", id))
		}
	}
	sort.Strings(out)
	return out
}

// checkEvents reads the event history of every job (or, above
// EventsCheckMax, of every job with an unusual history plus a seeded random
// sample) and checks that it has exactly one completed event, of the
// attempt a worker was told had completed.
func (d *drill) checkEvents(ctx context.Context, ref []*client.Job) {
	rep, rec := d.rep, d.rec
	rec.mu.Lock()
	acked := make(map[string]map[string]bool, len(rec.completed))
	for id, a := range rec.completed {
		acked[id] = a
	}
	unusual := map[string]bool{}
	for id, n := range rec.claimsByJob {
		if n > 1 {
			unusual[id] = true
		}
	}
	for id := range rec.completeErrs {
		unusual[id] = true
	}
	rec.mu.Unlock()

	ids := make([]string, 0, len(ref))
	for _, j := range ref {
		ids = append(ids, j.ID)
		if j.Attempts > 1 {
			unusual[j.ID] = true
		}
	}
	sort.Strings(ids)
	check := ids
	if len(ids) > d.cfg.EventsCheckMax {
		check = nil
		var rest []string
		for _, id := range ids {
			if unusual[id] {
				check = append(check, id)
			} else {
				rest = append(rest, id)
			}
		}
		d.rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		check = append(check, rest[:max(0, min(len(rest), d.cfg.EventsCheckMax-len(check)))]...)
	}
	rep.EventsChecked = len(check)

	hc := d.cs.head("events", 10*time.Second, verifyRetry)
	var mu sync.Mutex
	var bad []string
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range work {
				msg, reaped := eventProblem(ctx, hc, id, acked[id])
				mu.Lock()
				if msg != "" {
					bad = append(bad, msg)
				}
				rep.Reaped += reaped
				mu.Unlock()
			}
		})
	}
	for _, id := range check {
		if ctx.Err() != nil {
			break
		}
		work <- id
	}
	close(work)
	wg.Wait()
	sort.Strings(bad)
	rep.EventViolations = len(bad)
	for i, s := range bad {
		if i == 10 {
			rep.violation("events: ... and %d more", len(bad)-10)
			break
		}
		rep.violation("events: %s", s)
	}
}

// eventProblem checks one job's history; it also counts its reaped events.
func eventProblem(ctx context.Context, c *client.Client, id string, acked map[string]bool) (string, int) {
	evs, err := c.JobEvents(ctx, id)
	if err != nil {
		return fmt.Sprintf("job %s: read events: %v", id, err), 0
	}
	var completed []string
	reaped := 0
	for _, e := range evs {
		switch e.Type {
		case "completed":
			completed = append(completed, e.AttemptID)
		case "reaped":
			reaped++
		}
	}
	if len(completed) != 1 {
		return fmt.Sprintf("job %s has %d completed events (attempts %v)", id, len(completed), completed), reaped
	}
	// A worker told "completed" for attempt A must see A be the one.
	for a := range acked {
		if completed[0] != "" && a != completed[0] {
			return fmt.Sprintf("job %s: complete of attempt %s was acknowledged, but attempt %s completed it", id, a, completed[0]), reaped
		}
	}
	return "", reaped
}
