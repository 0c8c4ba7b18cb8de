package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spine-queue/spine/internal/netns"
	"github.com/spine-queue/spine/internal/testcluster"
)

// Run runs the workload once and returns its report. The error is non-nil
// when the run could not be carried out (the cluster did not start, lost
// its leader for good, ctx ended, the hard timeout passed); the report then
// holds what was found so far. Broken guarantees are not errors: they are
// in the report (see [Report.OK]). Every process the run started is
// stopped, by pid, before Run returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	rep = &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Clients: cfg.Clients, Jobs: cfg.Jobs,
		Ops: map[OpKind][3]int{}, FinalStates: map[string]int{}, FinalReads: map[string]int{}}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	dir, tmp := cfg.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "spine-chaos-*"); err != nil {
			return rep, err
		}
		tmp = true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return rep, err
	}
	rep.Dir = dir
	r := &runner{cfg: cfg, rep: rep, pool: newPool()}
	defer func() {
		rep.Elapsed = time.Since(began)
		if err != nil {
			rep.Err = err.Error()
		}
		if rep.OK() {
			if tmp && !cfg.KeepDir {
				os.RemoveAll(dir)
				rep.Dir = ""
			}
			return
		}
		if werr := r.writeFiles(dir); werr != nil {
			cfg.Logf("chaos: writing the histories: %v", werr)
		}
	}()

	cfg.Logf("chaos: seed %d (CHAOS_SEED=%d to replay), %v of load, %d clients, %d live jobs; data and logs in %s",
		cfg.Seed, cfg.Seed, cfg.Duration, cfg.Clients, cfg.Jobs, dir)
	opts := testcluster.Options{Binary: cfg.Binary, Dir: dir, Nodes: cfg.Nodes, Env: cfg.nodeEnv(), Logf: cfg.Logf}
	if cfg.Net {
		nt, err := netns.New(cfg.Nodes)
		if err != nil {
			return rep, fmt.Errorf("network namespaces: %w", err)
		}
		// Runs after c.Stop below: a namespace goes once its node is gone.
		defer func() {
			if err := nt.Close(); err != nil {
				cfg.Logf("chaos: removing the network namespaces: %v", err)
			}
		}()
		opts.Net, r.net = nt, nt
	}
	c, err := testcluster.Start(opts)
	if err != nil {
		return rep, fmt.Errorf("start cluster: %w", err)
	}
	// Wakes and stops every node by pid, whatever happens below.
	defer c.Stop()
	r.c = c
	for _, n := range c.Nodes {
		r.nodes = append(r.nodes, node{n.ID, n.URL})
	}
	// The history's times count from the start of the load.
	r.began = time.Now()
	r.hist = newHistory(r.began)
	return rep, r.run(ctx)
}

type runner struct {
	cfg Config
	c   *testcluster.Cluster
	net *netns.Net // with Config.Net
	// stalled[i] hands client i a stall (PauseWorker): it stops for that
	// long, then goes on with the leases it held.
	stalled []chan time.Duration
	nodes   []node
	rep     *Report
	hist    *history // nil until the cluster is up
	pool    *pool
	began   time.Time // start of the load
	// linViz is the porcupine visualization of the jobs the
	// linearizability check failed (or did not decide), for writeFiles.
	linViz *linViz

	mu sync.Mutex // guards rep.Faults and rep.Violations while the load runs
}

func (r *runner) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.Violations = append(r.rep.Violations, fmt.Sprintf(format, args...))
}

func (r *runner) run(ctx context.Context) error {
	cfg := r.cfg
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()

	// The clients: half over one multiplexed connection per node (the Go
	// client's default), half over plain HTTP.
	muxHTTP, closeMux := newHTTP(true)
	plainHTTP, closePlain := newHTTP(false)
	defer closeMux()
	defer closePlain()
	var clients sync.WaitGroup
	r.stalled = make([]chan time.Duration, cfg.Clients)
	for i := range cfg.Clients {
		r.stalled[i] = make(chan time.Duration, 1)
		lc := &loadClient{r: r, id: i, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)+1)),
			token: testcluster.LeftToken, workerID: fmt.Sprintf("c%d", i), http: muxHTTP}
		if i%2 == 1 {
			lc.token, lc.http = testcluster.RightToken, plainHTTP
		}
		clients.Go(func() { lc.run(ctx, load) })
	}

	allKinds := make(chan struct{})
	faultErr := make(chan error, 1)
	go func() { faultErr <- r.faults(ctx, load, allKinds) }()

	// The load runs for Duration, and on until every kind of fault has
	// been injected once (bounded), unless the faults fail.
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	until := time.NewTimer(cfg.Duration)
	defer until.Stop()
	bound := time.NewTimer(cfg.Duration + time.Minute)
	defer bound.Stop()
	var ferr error
	faultsDone := false
	durationOver, kindsDone := false, false
wait:
	for !(durationOver && kindsDone) {
		select {
		case <-ctx.Done():
			break wait
		case ferr = <-faultErr:
			faultsDone = true
			break wait
		case <-until.C:
			durationOver = true
		case <-allKinds:
			kindsDone, allKinds = true, nil
		case <-bound.C:
			ferr = fmt.Errorf("not every kind of fault was injected within %v of load", cfg.Duration+time.Minute)
			break wait
		case <-progress.C:
			r.mu.Lock()
			nf := len(r.rep.Faults)
			r.mu.Unlock()
			cfg.Logf("chaos: %.0fs: %d operations, %d faults, %d live jobs", time.Since(r.began).Seconds(), r.hist.len(), nf, r.pool.size())
		}
	}
	stopLoad()
	clients.Wait()
	if !faultsDone {
		if err := <-faultErr; ferr == nil { // the fault under way is undone first
			ferr = err
		}
	}
	r.rep.Duration = time.Since(r.began)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ferr != nil {
		return ferr
	}
	cfg.Logf("chaos: load stopped after %d operations and %d faults; checking", r.hist.len(), len(r.rep.Faults))

	if err := r.settle(ctx); err != nil {
		return err
	}
	ops, _ := r.hist.snapshot()
	fillCreateJobs(ops)
	ids := knownJobs(ops)
	if err := r.finalReads(ctx, ids); err != nil {
		return err
	}
	r.rep.JobsRead = len(ids)
	r.check()
	if err := r.c.CheckConverged(cfg.RecoveryTimeout); err != nil {
		r.violation("state hashes: %v", err)
	} else {
		r.rep.HashesAgree = true
	}
	r.rep.Verified = true
	return nil
}

// check analyzes the history (final reads included) into the report.
func (r *runner) check() {
	ops, labels := r.hist.snapshot()
	p := printer{began: r.began, labels: labels}
	rep := r.rep
	for _, op := range ops {
		if op.Final {
			if op.Node == r.nodes[0].id {
				st := "missing"
				if op.View != nil {
					st = op.View.Status
				}
				rep.FinalStates[st]++
			}
			continue
		}
		c := rep.Ops[op.Kind]
		c[op.Outcome]++
		rep.Ops[op.Kind] = c
		if op.Kind == OpWorkerClaim && strings.Contains(op.Args, "next") {
			rep.Next[op.Outcome]++
			if op.JobID != "" {
				rep.NextJobs++
			}
		}
		if op.Status == 500 {
			rep.Internal++
		}
		if op.Kind == OpCreate && op.Outcome == OK {
			rep.Acked++
		}
	}
	nodes := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		nodes[i] = n.id
	}
	probs := analyze(ops, nodes, p)
	nums := jobNumbers(ops)
	// The linearizability check, in addition: its problems join the
	// others' (the same excerpts, the same failing jobs).
	if lin := r.linearizability(ops, p, nodes, nums); len(lin) > 0 {
		probs = append(probs, lin...)
		sort.SliceStable(probs, func(i, j int) bool { return probs[i].JobID < probs[j].JobID })
	}
	byJob := map[string][]*Op{}
	for _, op := range ops {
		if op.JobID != "" {
			byJob[op.JobID] = append(byJob[op.JobID], op)
		}
	}
	idx := map[string]int{}
	for _, pr := range probs {
		i, ok := idx[pr.JobID]
		if !ok {
			i = len(rep.FailingJobs)
			idx[pr.JobID] = i
			rep.FailingJobs = append(rep.FailingJobs, FailingJob{Number: nums[pr.JobID], ID: pr.JobID})
		}
		fj := &rep.FailingJobs[i]
		fj.Problems = append(fj.Problems, pr.Text)
		switch pr.Class {
		case ClassLost:
			rep.Lost++
		case ClassDouble:
			rep.Double++
		}
		r.violation("job #%d %s: %s", fj.Number, pr.JobID, pr.Text)
	}
	for i := range rep.FailingJobs {
		fj := &rep.FailingJobs[i]
		var anchors []*Op
		for _, pr := range probs {
			if pr.JobID == fj.ID {
				anchors = append(anchors, pr.Anchors...)
			}
		}
		fj.Excerpt = excerpt(byJob[fj.ID], anchors, p, 60)
	}
}

// linearizability runs the porcupine check of every job's history (the
// final reads included) into the report, and returns the problems of the
// jobs no linearization explains. A check that ran out of time is reported
// as unknown, neither a pass nor a violation.
func (r *runner) linearizability(ops []*Op, p printer, nodes []string, nums map[string]int) []Problem {
	lease, err := strconv.Atoi(r.cfg.nodeEnv()["LEASE_SECONDS"])
	if err != nil || lease <= 0 {
		lease = r.cfg.LeaseSeconds
	}
	c := newLinChecker(lease, p, r.cfg.Clients, nodes, r.cfg.LinearizeTimeout)
	skipped := c.load(ops, nums)
	res := c.run()
	res.check.Skipped = skipped
	res.check.Illegal = sortedByNumber(res.check.Illegal, nums)
	res.check.Unknown = sortedByNumber(res.check.Unknown, nums)
	// The checker must catch what no server may answer, in this run's
	// own histories.
	tried, missed := selfTest(ops, nums, func() *linChecker {
		return newLinChecker(lease, p, r.cfg.Clients, nodes, r.cfg.LinearizeTimeout)
	})
	res.check.SelfTest = fmt.Sprintf("%d of %d broken copies of job histories caught", tried-len(missed), tried)
	for _, m := range missed {
		r.violation("the linearizability check missed %s", m)
	}
	r.rep.Linearizability = res.check
	r.linViz = res.viz
	r.cfg.Logf("chaos: linearizability: %s", res.check.summary())
	return res.problems
}

// writeFiles leaves the evidence of a failed run in dir: summary.txt (the
// report), histories.txt (the whole history of each failing job),
// history.txt (every operation of the run) and, when the linearizability
// check failed or did not finish, linearizability.html (porcupine's
// visualization of those jobs' histories).
func (r *runner) writeFiles(dir string) error {
	if r.hist == nil {
		return os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(r.rep.All()), 0o644)
	}
	ops, labels := r.hist.snapshot()
	p := printer{began: r.began, labels: labels}
	if r.linViz != nil {
		path := filepath.Join(dir, VisualizationFile)
		if err := r.linViz.write(path, r.rep.Faults); err != nil {
			return fmt.Errorf("linearizability visualization: %w", err)
		}
		r.rep.Linearizability.Visualization = path
	}
	var hs strings.Builder
	fmt.Fprintf(&hs, "Seed %d. Each line: [start .. end] client op(args) @node the request was sent to -> answer [state attempts/max lease];\n", r.rep.Seed)
	fmt.Fprintf(&hs, "times in seconds from the start of the run (%s); \"end\": outcome unknown; L<n>: the lease a claim answered at index n; (old): a lease the client knew to be over.\n",
		r.began.UTC().Format(time.RFC3339Nano))
	byJob := map[string][]*Op{}
	for _, op := range ops {
		byJob[op.JobID] = append(byJob[op.JobID], op)
	}
	for _, fj := range r.rep.FailingJobs {
		fmt.Fprintf(&hs, "\n== job #%d %s\n", fj.Number, fj.ID)
		for _, pr := range fj.Problems {
			fmt.Fprintf(&hs, "-- %s\n", pr)
		}
		for _, op := range byJob[fj.ID] {
			fmt.Fprintln(&hs, p.line(op))
		}
	}
	var all strings.Builder
	for _, op := range ops {
		fmt.Fprintln(&all, p.jobLine(op))
	}
	for name, data := range map[string]string{
		"summary.txt":   r.rep.All(),
		"histories.txt": hs.String(),
		"history.txt":   all.String(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}
