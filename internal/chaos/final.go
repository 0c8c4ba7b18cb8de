package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// settle brings the cluster to rest after the load: every node running and
// awake, a leader, no job running (the leases the clients held have expired
// and been reaped, so nothing changes while the nodes are read one after
// the other), and every node caught up with the leader.
func (r *runner) settle(ctx context.Context) error {
	c, cfg := r.c, r.cfg
	if r.net != nil {
		if err := r.net.Heal(); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := c.Resume(n); err != nil {
			return err
		}
		if !n.Running() {
			if err := c.Restart(n); err != nil {
				return err
			}
		}
	}
	leader, err := c.WaitLeader(cfg.RecoveryTimeout)
	if err != nil {
		return fmt.Errorf("no leader after the load: %w", err)
	}
	hc, err := client.New(c.URLs(), client.WithToken(testcluster.HeadToken), client.WithTimeout(5*time.Second),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 5, MaxElapsed: 10 * time.Second}))
	if err != nil {
		return err
	}
	// Leases last LeaseSeconds; the reaper waits LeaseGraceMS after an
	// election and runs every ReaperIntervalMS.
	quiet := time.Duration(cfg.LeaseSeconds)*time.Second + time.Duration(cfg.LeaseGraceMS+cfg.ReaperIntervalMS)*time.Millisecond
	var running []string
	var listErr error
	err = testcluster.Eventually(quiet+cfg.RecoveryTimeout, 200*time.Millisecond, func() error {
		if ctx.Err() != nil {
			return nil
		}
		res, err := hc.JobList(ctx, &client.JobListParams{Status: client.JobStatusRunning, Limit: 10})
		if listErr = err; err != nil {
			return err
		}
		running = running[:0]
		for _, j := range res.Jobs {
			running = append(running, j.ID)
		}
		if len(running) > 0 {
			return fmt.Errorf("jobs still running, e.g. %v", running)
		}
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		if listErr != nil {
			return fmt.Errorf("list running jobs: %w", err)
		}
		r.violation("jobs still running %v after the load stopped (their leases were not reaped): %v",
			quiet+cfg.RecoveryTimeout, running)
	}
	if leader, err = c.WaitLeader(cfg.RecoveryTimeout); err != nil {
		return fmt.Errorf("no leader after the load: %w", err)
	}
	h, err := c.Health(leader)
	if err != nil {
		return fmt.Errorf("leader health: %w", err)
	}
	if err := c.WaitCaughtUp(h.CommitIndex, cfg.RecoveryTimeout); err != nil {
		return fmt.Errorf("the nodes did not catch up with commit index %d: %w", h.CommitIndex, err)
	}
	return nil
}

// transferTo makes n the leader (POST /cluster/transfer-leader {"to": n}),
// retrying until it leads.
func (r *runner) transferTo(ctx context.Context, n *testcluster.Node) error {
	c := r.c
	hc, err := client.New(c.URLs(), client.WithToken(testcluster.HeadToken), client.WithTimeout(5*time.Second),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 3, MaxElapsed: 5 * time.Second}))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(r.cfg.RecoveryTimeout)
	var last error
	for try := 0; try < 50 && ctx.Err() == nil; try++ {
		if c.Leader() == n {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		if _, err := hc.ClusterTransferLeader(ctx, n.ID); err != nil {
			last = err
		}
		if testcluster.Eventually(5*time.Second, 50*time.Millisecond, func() error {
			if c.Leader() != n {
				return errors.New("not yet")
			}
			return nil
		}) == nil {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%s did not become leader within %v (last transfer error: %v)", n.ID, r.cfg.RecoveryTimeout, last)
}

// finalReads makes each node leader in turn and reads every job in ids
// through it with ?consistent; the reads join the history (Final). A pass
// during which the node did not stay leader (same term) is done again.
func (r *runner) finalReads(ctx context.Context, ids []string) error {
	hc := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	for _, n := range r.c.Nodes {
		var err error
		for pass := 1; pass <= 3; pass++ {
			var ops []*Op
			if ops, err = r.readThrough(ctx, hc, n, ids); err == nil {
				for _, op := range ops {
					r.hist.add(op)
				}
				r.rep.FinalReads[n.ID] = len(ops)
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.cfg.Logf("chaos: final reads through %s, pass %d: %v", n.ID, pass, err)
		}
		if err != nil {
			return fmt.Errorf("final reads through %s: %w", n.ID, err)
		}
	}
	return nil
}

func (r *runner) readThrough(ctx context.Context, hc *http.Client, n *testcluster.Node, ids []string) ([]*Op, error) {
	if err := r.transferTo(ctx, n); err != nil {
		return nil, err
	}
	st0, err := r.c.Status(n)
	if err != nil {
		return nil, err
	}
	if st0.State != "Leader" {
		return nil, fmt.Errorf("%s is %s, not leader", n.ID, st0.State)
	}
	ops := make([]*Op, len(ids))
	errs := make([]error, len(ids))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				ops[i], errs[i] = r.readOne(ctx, hc, n, ids[i])
			}
		})
	}
	for i := range ids {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	st1, err := r.c.Status(n)
	if err != nil {
		return nil, err
	}
	if st1.State != "Leader" || st1.Term != st0.Term {
		return nil, fmt.Errorf("%s did not stay leader during the reads (term %d %s, then term %d %s)", n.ID, st0.Term, st0.State, st1.Term, st1.State)
	}
	return ops, nil
}

// readOne reads one job through n with ?consistent: its view, or 404.
func (r *runner) readOne(ctx context.Context, hc *http.Client, n *testcluster.Node, id string) (*Op, error) {
	var last error
	for try := 1; try <= 10; try++ {
		if try > 1 && !testcluster.SleepCtx(ctx, 100*time.Millisecond) {
			return nil, ctx.Err()
		}
		op := &Op{Client: -1, Kind: OpGet, Node: n.ID, JobID: id, Args: "consistent", Final: true, Start: time.Now()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/jobs/"+url.PathEscape(id)+"?consistent", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+testcluster.HeadToken)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		op.End = time.Now()
		if err != nil {
			last = err
			continue
		}
		if by := resp.Header.Get(client.HeaderNode); by != n.ID {
			return nil, fmt.Errorf("GET /jobs/%s through %s was answered by %q", id, n.ID, by)
		}
		op.Status = resp.StatusCode
		switch resp.StatusCode {
		case http.StatusOK:
			var j client.Job
			if err := json.Unmarshal(data, &j); err != nil || j.ID != id {
				return nil, fmt.Errorf("GET /jobs/%s through %s: bad answer %.200s", id, n.ID, data)
			}
			op.Outcome, op.View = OK, viewOf(&j)
			return op, nil
		case http.StatusNotFound:
			op.Outcome, op.Code = Refused, "not_found"
			return op, nil
		}
		last = fmt.Errorf("GET /jobs/%s through %s: %d %.200s", id, n.ID, resp.StatusCode, data)
	}
	return nil, last
}

// knownJobs lists every job the history names, sorted.
func knownJobs(ops []*Op) []string {
	set := map[string]bool{}
	for _, op := range ops {
		if op.JobID != "" {
			set[op.JobID] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
