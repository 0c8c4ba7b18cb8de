// Package bench is `spine-bench`: it drives a Spine cluster through the
// same three phases as the NATS JetStream peer benchmark
// (shared/peerbench) — create, lifecycle (claim → heartbeat → complete) and
// mixed — and reports throughput, latency percentiles, server CPU per job
// and errors, ending with one JSON line.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config of one run. Zero values take the defaults of DefaultConfig.
type Config struct {
	Addrs                []string // node base URLs
	HeadToken, ClawToken string
	Jobs                 int // phase A/B jobs
	MixedJobs            int // phase C jobs (0 = Jobs)
	Producers, Workers   int
	Payload              int    // payload bytes per job
	Phase                string // create | lifecycle | mixed | all
	Connect              string // rr (goroutine i on node i%n) | request (each request to the next node) | leader
	Transport            string // mux (spine-mux/1, one connection per node, as the Go client) | http (HTTP/1.1 keep-alive, a connection per goroutine)
	// Heartbeat is how a worker sends its one heartbeat per job between
	// claim and complete: "async" (as peerbench's default -hb async, and as
	// a claw whose heartbeats run beside its work: the complete does not
	// wait for the answer, which is still checked and timed), "sync" (the
	// complete waits for the heartbeat's answer, as peerbench -hb sync) or
	// "off".
	Heartbeat      string
	Timeout        time.Duration
	PhaseTimeout   time.Duration
	RequestTimeout time.Duration
	ClaimWait      time.Duration // max_wait_ms of a worker claim
	MaxErrors      int           // a phase stops after this many errors
	Label          string
	Out            io.Writer // human-readable lines
}

// DefaultConfig mirrors peerbench's defaults.
func DefaultConfig() Config {
	return Config{Jobs: 20000, Producers: 16, Workers: 16, Payload: 256, Phase: "all", Connect: "rr",
		Transport: "mux", Heartbeat: "async", Timeout: 10 * time.Minute, PhaseTimeout: 5 * time.Minute,
		RequestTimeout: 10 * time.Second, ClaimWait: time.Second, MaxErrors: 1000}
}

const minPayload = 48 // {"t":<19 digits>,"i":<id>,"pad":""}

// Result is printed as the final JSON line. The first block of keys is the
// stable interface (see the issue); the rest is detail.
type Result struct {
	CreateJobsPerS    float64 `json:"create_jobs_per_s"`
	LifecycleJobsPerS float64 `json:"lifecycle_jobs_per_s"`
	MixedJobsPerS     float64 `json:"mixed_jobs_per_s"`
	CreateP99         float64 `json:"create_p99_ms"`
	ClaimP99          float64 `json:"claim_p99_ms"`
	CompleteP99       float64 `json:"complete_p99_ms"`
	MixedE2EP99       float64 `json:"mixed_e2e_p99_ms"`
	CPUMsPerJob       float64 `json:"cpu_ms_per_job"`
	Errors            int64   `json:"errors"`

	System      string `json:"system"`
	Label       string `json:"label,omitempty"`
	OK          bool   `json:"ok"`    // the run completed (no fatal error, no phase timeout)
	Clean       bool   `json:"clean"` // ok, errors == 0, no redeliveries: only clean runs are comparable
	Error       string `json:"error,omitempty"`
	GoVersion   string `json:"go_version"`
	Phase       string `json:"phase"`
	Nodes       int    `json:"nodes"`
	Local       bool   `json:"local"`
	Jobs        int    `json:"jobs"`
	MixedJobs   int    `json:"mixed_jobs"`
	Producers   int    `json:"producers"`
	Workers     int    `json:"workers"`
	Payload     int    `json:"payload_bytes"`
	Connect     string `json:"connect"`
	Transport   string `json:"transport"`
	Heartbeat   string `json:"heartbeat_mode"`
	ClaimWaitMs int64  `json:"claim_max_wait_ms"`
	RunID       string `json:"run_id"`
	Leader      string `json:"leader"`
	LeaderEnd   string `json:"leader_end"`

	WarmupErrors int64 `json:"warmup_errors"`

	CreateOK        int64   `json:"create_ok"`
	CreateErrors    int64   `json:"create_errors"`
	CreateSeconds   float64 `json:"create_s"`
	CreateP50       float64 `json:"create_p50_ms"`
	CreateMean      float64 `json:"create_mean_ms"`
	CreateMax       float64 `json:"create_max_ms"`
	CreateServerCPU float64 `json:"create_server_cpu_s"`
	CreateCPUPerJob float64 `json:"create_server_cpu_ms_per_job"`
	CreateBatch     float64 `json:"create_entries_per_fsync,omitempty"`
	CreateAppendMs  float64 `json:"create_append_ms,omitempty"`
	QueuedAfterA    int     `json:"queued_after_create"`

	LifecycleCompleted int64   `json:"lifecycle_completed"`
	LifecycleErrors    int64   `json:"lifecycle_errors"`
	LifecycleRedeliv   int64   `json:"lifecycle_redeliveries"`
	LifecycleEmpty     int64   `json:"lifecycle_empty_claims"`
	LifecycleSeconds   float64 `json:"lifecycle_s"`
	ClaimP50           float64 `json:"claim_p50_ms"`
	ClaimMax           float64 `json:"claim_max_ms"`
	HeartbeatP50       float64 `json:"heartbeat_p50_ms"`
	HeartbeatP99       float64 `json:"heartbeat_p99_ms"`
	HeartbeatMax       float64 `json:"heartbeat_max_ms"`
	CompleteP50        float64 `json:"complete_p50_ms"`
	CompleteMax        float64 `json:"complete_max_ms"`
	LifecycleJobP50    float64 `json:"lifecycle_job_p50_ms"`
	LifecycleJobP99    float64 `json:"lifecycle_job_p99_ms"`
	LifecycleServerCPU float64 `json:"lifecycle_server_cpu_s"`
	LifecycleCPUPerJob float64 `json:"lifecycle_server_cpu_ms_per_job"`
	LifecycleBatch     float64 `json:"lifecycle_entries_per_fsync,omitempty"`
	LifecycleAppendMs  float64 `json:"lifecycle_append_ms,omitempty"`
	// HeartbeatsLocal is the share of the lifecycle's heartbeats the node
	// they reached answered from its own state (no forward, no quorum round).
	HeartbeatsLocal float64 `json:"heartbeats_local_share"`
	// HeartbeatsOvertaken counts async heartbeats answered 409 because
	// their job's complete got there first (not errors).
	HeartbeatsOvertaken int64 `json:"heartbeats_overtaken"`
	LeftAfterB          int   `json:"jobs_not_done_after_lifecycle"`

	MixedCreated     int64   `json:"mixed_created"`
	MixedCompleted   int64   `json:"mixed_completed"`
	MixedErrors      int64   `json:"mixed_errors"`
	MixedRedeliv     int64   `json:"mixed_redeliveries"`
	MixedSeconds     float64 `json:"mixed_s"`
	MixedE2EP50      float64 `json:"mixed_e2e_p50_ms"`
	MixedE2EMax      float64 `json:"mixed_e2e_max_ms"`
	MixedCreateP50   float64 `json:"mixed_create_p50_ms"`
	MixedCreateP99   float64 `json:"mixed_create_p99_ms"`
	MixedClaimP50    float64 `json:"mixed_claim_p50_ms"`
	MixedClaimP99    float64 `json:"mixed_claim_p99_ms"`
	MixedCompleteP50 float64 `json:"mixed_complete_p50_ms"`
	MixedCompleteP99 float64 `json:"mixed_complete_p99_ms"`
	MixedServerCPU   float64 `json:"mixed_server_cpu_s"`
	MixedCPUPerJob   float64 `json:"mixed_server_cpu_ms_per_job"`
	MixedBatch       float64 `json:"mixed_entries_per_fsync,omitempty"`
	MixedAppendMs    float64 `json:"mixed_append_ms,omitempty"`
	LeftAfterC       int     `json:"jobs_not_done_after_mixed"`

	VerifyErrors     int64     `json:"verify_errors"`
	ServerCPUSeconds []float64 `json:"server_cpu_s,omitempty"` // per node, during the measured phases
	ServerPeakRSSMiB []float64 `json:"server_peak_rss_mib,omitempty"`
	// ServerTimerSlackNS is each node's timer slack as its /health reports
	// it (SPINE_TIMER_SLACK; -1: not reported).
	ServerTimerSlackNS []int64 `json:"server_timer_slack_ns,omitempty"`
	// ClientTimerSlackNS is the load generator's own timer slack (Linux).
	ClientTimerSlackNS int64   `json:"client_timer_slack_ns,omitempty"`
	ClientCPUSeconds   float64 `json:"client_cpu_s"`
	TotalSeconds       float64 `json:"total_s"`
}

// errBox keeps the first error seen by many goroutines.
type errBox struct {
	once sync.Once
	err  error
}

func (e *errBox) set(err error) { e.once.Do(func() { e.err = err }) }

type runner struct {
	cfg    Config
	a      *api
	out    io.Writer
	res    *Result
	epoch  time.Time
	leader int // index of the leader node at start
	runID  string
	cpuSum []float64
	minA   uint64 // create index of phase A's first job
	abort  errBox // set when a phase had to stop early (fatal error or too many errors)
}

// countErr records a failed request of a phase. Errors that cannot get
// better by retrying (bad token, forbidden, unknown route, bad request) and
// more than MaxErrors errors in one phase stop the phase at once.
func (r *runner) countErr(n *atomic.Int64, eb *errBox, stop context.CancelFunc, err error) {
	total := n.Add(1)
	eb.set(err)
	var he *httpError
	if errors.As(err, &he) && (he.Status == 400 || he.Status == 401 || he.Status == 403 || he.Status == 404 || he.Status == 405) {
		r.abort.set(fmt.Errorf("fatal answer, stopping: %w", err))
		stop()
		return
	}
	if total > int64(r.cfg.MaxErrors) {
		r.abort.set(fmt.Errorf("more than %d errors in one phase, stopping; first: %w", r.cfg.MaxErrors, eb.err))
		stop()
	}
}

// Run runs the benchmark against cfg.Addrs. It always returns a Result
// (partial on error); the error is a fatal one (cluster unusable, timeout).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	d := DefaultConfig()
	if cfg.Jobs <= 0 {
		cfg.Jobs = d.Jobs
	}
	if cfg.MixedJobs <= 0 {
		cfg.MixedJobs = cfg.Jobs
	}
	if cfg.Producers <= 0 {
		cfg.Producers = d.Producers
	}
	if cfg.Workers <= 0 {
		cfg.Workers = d.Workers
	}
	if cfg.Payload < minPayload {
		cfg.Payload = minPayload
	}
	if cfg.Phase == "" {
		cfg.Phase = d.Phase
	}
	if cfg.Connect == "" {
		cfg.Connect = d.Connect
	}
	if cfg.Transport == "" {
		cfg.Transport = d.Transport
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.PhaseTimeout <= 0 {
		cfg.PhaseTimeout = d.PhaseTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = d.RequestTimeout
	}
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = d.ClaimWait
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.MaxErrors <= 0 {
		cfg.MaxErrors = d.MaxErrors
	}
	if cfg.Heartbeat == "" {
		cfg.Heartbeat = d.Heartbeat
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	r := &runner{cfg: cfg, out: cfg.Out, runID: "bench-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(rb[:])}
	r.res = &Result{System: "spine-raft-r" + fmt.Sprint(len(cfg.Addrs)), Label: cfg.Label, GoVersion: runtime.Version(),
		Phase: cfg.Phase, Nodes: len(cfg.Addrs), Jobs: cfg.Jobs, MixedJobs: cfg.MixedJobs, Producers: cfg.Producers,
		Workers: cfg.Workers, Payload: cfg.Payload, Connect: cfg.Connect, Transport: cfg.Transport, Heartbeat: cfg.Heartbeat,
		ClaimWaitMs: cfg.ClaimWait.Milliseconds(), RunID: r.runID}
	if len(cfg.Addrs) == 0 {
		return r.res, errors.New("no node address")
	}
	switch cfg.Phase {
	case "create", "lifecycle", "mixed", "all":
	default:
		return r.res, fmt.Errorf("unknown phase %q (create|lifecycle|mixed|all)", cfg.Phase)
	}
	switch cfg.Connect {
	case "rr", "request", "leader":
	default:
		return r.res, fmt.Errorf("unknown connect mode %q (rr|request|leader)", cfg.Connect)
	}
	if cfg.Transport != "mux" && cfg.Transport != "http" {
		return r.res, fmt.Errorf("unknown transport %q (mux|http)", cfg.Transport)
	}
	switch cfg.Heartbeat {
	case "async", "sync", "off":
	default:
		return r.res, fmt.Errorf("unknown heartbeat mode %q (async|sync|off)", cfg.Heartbeat)
	}
	r.a = newAPI(cfg.Addrs, cfg.HeadToken, cfg.ClawToken, cfg.Producers+cfg.Workers+8, cfg.RequestTimeout)
	r.a.mux = cfg.Transport == "mux"
	defer r.a.close()

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := r.run(ctx)
	res := r.res
	res.TotalSeconds = round3(time.Since(start).Seconds())
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		res.ClientCPUSeconds = round3(float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9)
	}
	res.ClientTimerSlackNS = ownTimerSlack()
	res.Errors = res.WarmupErrors + res.CreateErrors + res.LifecycleErrors + res.MixedErrors + res.VerifyErrors
	// Server CPU per job over each job's whole life (create + claim +
	// heartbeat + complete), over the phases that ran.
	var cpu float64
	var jobs int64
	if res.CreateServerCPU > 0 || res.LifecycleServerCPU > 0 {
		cpu += res.CreateServerCPU + res.LifecycleServerCPU
		if cfg.Phase == "create" {
			jobs += res.CreateOK
		} else {
			jobs += res.LifecycleCompleted
		}
	}
	if res.MixedServerCPU > 0 {
		cpu += res.MixedServerCPU
		jobs += res.MixedCompleted
	}
	res.CPUMsPerJob = perJobMs(cpu, jobs)
	res.ServerCPUSeconds = nil
	for _, c := range r.cpuSum {
		res.ServerCPUSeconds = append(res.ServerCPUSeconds, round3(c))
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("run timed out after %v", cfg.Timeout)
	}
	res.OK = err == nil
	res.Clean = res.OK && res.Errors == 0 && res.LifecycleRedeliv == 0 && res.MixedRedeliv == 0
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

func (r *runner) printf(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

// node picks the node of the k-th request of goroutine g (kind offset off).
func (r *runner) node(g, off, k int) int {
	n := len(r.cfg.Addrs)
	switch r.cfg.Connect {
	case "leader":
		return r.leader
	case "request":
		return (g + off + k) % n
	}
	return (g + off) % n
}

func (r *runner) run(ctx context.Context) error {
	cfg := r.cfg
	r.printf("spine-bench: %d nodes %v, %s, GOMAXPROCS=%d, run id %s\n", len(cfg.Addrs), cfg.Addrs, runtime.Version(), runtime.GOMAXPROCS(0), r.runID)
	r.printf("config: jobs=%d mixed-jobs=%d producers=%d workers=%d payload=%dB phase=%s connect=%s transport=%s heartbeat=%s claim max_wait=%v\n",
		cfg.Jobs, cfg.MixedJobs, cfg.Producers, cfg.Workers, cfg.Payload, cfg.Phase, cfg.Connect, cfg.Transport, r.res.Heartbeat, cfg.ClaimWait)

	leader, err := r.waitLeader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	r.res.Leader = leader
	r.printf("cluster: leader %s (%s), all %d nodes answer /health; timer slack %s\n", leader, cfg.Addrs[r.leader], len(cfg.Addrs), slackList(r.res.ServerTimerSlackNS))

	// Warm-up (not measured): a small mixed round through every producer
	// and worker opens the client's keep-alive connections and the
	// followers' forwarding connections, as peerbench opens its connections
	// and probes each node before timing.
	r.epoch = time.Now()
	{
		n := 2 * max(cfg.Producers, cfg.Workers)
		st := r.mixedRound(ctx, ctx, r.runID+"-warm", n)
		r.res.WarmupErrors = st.errors()
		if r.abort.err != nil {
			r.printf("warm-up: %d errors\n", r.res.WarmupErrors)
			return fmt.Errorf("warm-up: %w", r.abort.err)
		}
		left, verr := r.verifyDone(ctx, r.runID+"-warm", st.minIndex(), int(st.p.ok.Load()))
		r.printf("warm-up: %d jobs created and completed (%d errors, %d not done)\n", st.w.completed.Load(), r.res.WarmupErrors, left)
		if verr != nil {
			return fmt.Errorf("warm-up verification: %w", verr)
		}
		if left != 0 {
			r.res.WarmupErrors += int64(left)
		}
		if st.p.eb.err != nil {
			r.printf("    first warm-up create error: %v\n", st.p.eb.err)
		}
		if st.w.eb.err != nil {
			r.printf("    first warm-up worker error: %v\n", st.w.eb.err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}

	check := func(err error) error {
		if err == nil && r.abort.err != nil {
			err = r.abort.err
		}
		return err
	}
	if cfg.Phase != "mixed" {
		if err := check(r.phaseCreate(ctx)); err != nil {
			return err
		}
		if err := check(r.phaseLifecycle(ctx, cfg.Phase == "create")); err != nil {
			return err
		}
	}
	if cfg.Phase == "mixed" || cfg.Phase == "all" {
		if err := check(r.phaseMixed(ctx)); err != nil {
			return err
		}
	}
	if h, err := r.a.health(ctx, r.leader); err == nil {
		r.res.LeaderEnd = h.LeaderID
	}
	if r.res.LeaderEnd != r.res.Leader {
		r.printf("note: leadership moved during the run: %s -> %s\n", r.res.Leader, r.res.LeaderEnd)
	}
	return nil
}

// waitLeader polls every node's /health (bounded) until all answer and
// agree on one leader; it returns the leader's id.
func (r *runner) waitLeader(ctx context.Context, max time.Duration) (string, error) {
	deadline := time.Now().Add(max)
	var last error
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		leader, idx := "", -1
		last = nil
		slack := make([]int64, len(r.cfg.Addrs))
		for n := range r.cfg.Addrs {
			h, err := r.a.health(ctx, n)
			if err != nil {
				last = err
				break
			}
			slack[n] = -1
			if h.TimerSlackNS != nil {
				slack[n] = *h.TimerSlackNS
			}
			if h.LeaderID == "" || (leader != "" && h.LeaderID != leader) {
				last = fmt.Errorf("nodes do not agree on a leader (%s says %q)", r.cfg.Addrs[n], h.LeaderID)
				break
			}
			leader = h.LeaderID
			if h.Role == "leader" {
				idx = n
			}
		}
		if last == nil && idx < 0 {
			last = fmt.Errorf("leader %s is not among the given nodes", leader)
		}
		if last == nil {
			r.leader = idx
			r.res.ServerTimerSlackNS = slack
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("cluster not ready within %v: %v", max, last)
}

// slackList describes the nodes' timer slack: one value when they agree.
func slackList(ns []int64) string {
	parts := make([]string, len(ns))
	same := true
	for i, v := range ns {
		parts[i] = "unknown"
		if v >= 0 {
			parts[i] = time.Duration(v).String()
		}
		same = same && v == ns[0]
	}
	if same && len(parts) > 0 {
		return parts[0] + " on every node"
	}
	return strings.Join(parts, " / ")
}

// raft describes a phase's log appends (c holds the phase's differences):
// entries per fsync'ed append, the mean time of one, and appends per job
// over all nodes.
func (c counters) raft(jobs int64) string {
	if c.batches == 0 || jobs <= 0 {
		return ""
	}
	each := ""
	if ms := c.appendMs(); ms > 0 {
		each = fmt.Sprintf(" (%.2f ms each)", ms)
	}
	return fmt.Sprintf("              raft log: %.1f entries per fsync'ed append%s, %.2f appends per job (all nodes)\n",
		c.perBatch(), each, float64(c.batches)/float64(jobs))
}

// appendMs is the mean time of one log append (write + fsync) over all
// nodes, 0 if unknown.
func (c counters) appendMs() float64 {
	if c.batches == 0 || c.appendSec <= 0 {
		return 0
	}
	return round3(c.appendSec * 1000 / float64(c.batches))
}

// perBatch is the mean number of entries per log append, 0 if unknown.
func (c counters) perBatch() float64 {
	if c.batches == 0 {
		return 0
	}
	return round3(float64(c.entries) / float64(c.batches))
}

// sampleCost reads the nodes' counters now; the returned func reads them
// again and returns the differences (and adds the per-node CPU to r.cpuSum).
func (r *runner) sampleCost(ctx context.Context) (func() counters, error) {
	t0, per0, err := r.a.counters(ctx)
	if err != nil {
		return nil, err
	}
	return func() counters {
		t1, per1, err := r.a.counters(ctx)
		if err != nil {
			r.printf("    could not sample the servers' counters after the phase: %v\n", err)
			return counters{}
		}
		if r.cpuSum == nil {
			r.cpuSum = make([]float64, len(per1))
		}
		for i := range per1 {
			r.cpuSum[i] += per1[i] - per0[i]
		}
		d := counters{cpu: round3(t1.cpu - t0.cpu)}
		if t1.batches >= t0.batches && t1.entries >= t0.entries { // else a node restarted: unknown
			d.batches, d.entries = t1.batches-t0.batches, t1.entries-t0.entries
			if t1.appendSec >= t0.appendSec {
				d.appendSec = t1.appendSec - t0.appendSec
			}
		}
		if t1.localHB >= t0.localHB {
			d.localHB = t1.localHB - t0.localHB
		}
		return d
	}, nil
}

// ---------------------------------------------------------------- producers

type prodStats struct {
	ok, errN atomic.Int64
	lat      lat
	eb       errBox
	minIdx   atomic.Uint64
}

func (p *prodStats) noteIndex(idx uint64) {
	for {
		cur := p.minIdx.Load()
		if cur != 0 && cur <= idx {
			return
		}
		if p.minIdx.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// produce creates jobs until the shared counter reaches total; each failed
// create lowers *target (if set) so the workers do not wait for it.
func (r *runner) produce(ctx context.Context, stop context.CancelFunc, g int, stream string, next *atomic.Int64, total int64, st *prodStats, target *atomic.Int64) {
	defer func() {
		if v := recover(); v != nil {
			st.errN.Add(1)
			st.eb.set(fmt.Errorf("producer panic: %v", v))
		}
	}()
	local := make([]time.Duration, 0, int(total)/r.cfg.Producers+16)
	defer func() { st.lat.addAll(local) }()
	buf := make([]byte, 0, r.cfg.Payload+128)
	for k := int64(0); k <= total; k++ {
		i := next.Add(1) - 1
		if i >= total || ctx.Err() != nil {
			return
		}
		node := r.node(g, 0, int(k))
		t0 := time.Now()
		buf = createBody(buf, stream, int64(t0.Sub(r.epoch)), i, r.cfg.Payload)
		j, err := r.a.create(ctx, node, buf)
		d := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil {
				return // the phase was stopped; not this request's fault
			}
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("create via %s: %w", r.cfg.Addrs[node], err))
			if target != nil {
				target.Add(-1)
			}
			continue
		}
		st.ok.Add(1)
		st.noteIndex(j.CreateIndex)
		local = append(local, d)
	}
}

// ---------------------------------------------------------------- workers

type workStats struct {
	completed, gaveUp, errN, redeliv, empty, dup atomic.Int64
	hbOvertaken                                  atomic.Int64 // async heartbeats answered after the job's complete
	endNs                                        atomic.Int64
	claimL, hbL, compL, jobL, e2eL               lat
	eb                                           errBox
}

// work is one worker: claim (long-poll up to ClaimWait) → heartbeat →
// complete, until completed+gaveUp reaches *target or pctx ends. The
// heartbeat and complete of a claimed job run under ctx (the whole run), so
// a job claimed just before the phase ends is still finished.
func (r *runner) work(ctx, pctx context.Context, stop context.CancelFunc, g int, stream string, target *atomic.Int64,
	start time.Time, st *workStats) {
	defer func() {
		if v := recover(); v != nil {
			st.errN.Add(1)
			st.eb.set(fmt.Errorf("worker panic: %v", v))
		}
	}()
	var claimD, hbD, compD, jobD, e2eD []time.Duration
	// Async heartbeats still waiting for their answer: the worker returns
	// only once they have it, so a phase's summary counts every one.
	var hbs sync.WaitGroup
	defer hbs.Wait()
	defer func() {
		st.claimL.addAll(claimD)
		st.hbL.addAll(hbD)
		st.compL.addAll(compD)
		st.jobL.addAll(jobD)
		st.e2eL.addAll(e2eD)
	}()
	wid := fmt.Sprintf("%s-w%d", r.runID, g)
	done := func() bool { return st.completed.Load()+st.gaveUp.Load() >= target.Load() }
	maxIter := 10*target.Load() + 10000
	k := 0
	for iter := int64(0); iter < maxIter; iter++ {
		if pctx.Err() != nil || done() {
			return
		}
		node := r.node(g, 1, k)
		k++
		t0 := time.Now()
		c, err := r.a.claim(pctx, node, wid, stream, r.cfg.ClaimWait)
		t1 := time.Now()
		if err != nil {
			if pctx.Err() != nil {
				return // the phase ended while the claim waited
			}
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("claim via %s: %w", r.cfg.Addrs[node], err))
			sleepCtx(pctx, 10*time.Millisecond)
			continue
		}
		if !c.Claimed {
			st.empty.Add(1)
			continue
		}
		claimD = append(claimD, t1.Sub(t0))
		if c.Attempt > 1 {
			st.redeliv.Add(1)
		}
		var completed chan<- bool // async heartbeat: told whether the complete succeeded
		switch r.cfg.Heartbeat {
		case "sync":
			node = r.node(g, 1, k)
			k++
			th := time.Now()
			err := r.a.heartbeat(ctx, node, wid, c)
			if err != nil {
				r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("heartbeat via %s: %w", r.cfg.Addrs[node], err))
			} else {
				hbD = append(hbD, time.Since(th))
			}
		case "async":
			node = r.node(g, 1, k)
			k++
			ch := make(chan bool, 1)
			completed = ch
			hbs.Add(1)
			go func(node int) {
				defer hbs.Done()
				r.asyncHeartbeat(ctx, stop, node, wid, c, ch, st)
			}(node)
		}
		node = r.node(g, 1, k)
		k++
		tc := time.Now()
		dup, err := r.a.complete(ctx, node, wid, c)
		td := time.Now()
		if completed != nil {
			completed <- err == nil
		}
		if err != nil {
			st.gaveUp.Add(1)
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("complete via %s: %w", r.cfg.Addrs[node], err))
			if done() {
				stop()
			}
			continue
		}
		if dup {
			st.dup.Add(1)
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("complete of job %s answered duplicate", c.JobID))
		}
		compD = append(compD, td.Sub(tc))
		jobD = append(jobD, td.Sub(t0))
		if c.Payload.T > 0 {
			e2eD = append(e2eD, td.Sub(r.epoch.Add(time.Duration(c.Payload.T))))
		}
		n := st.completed.Add(1)
		if n+st.gaveUp.Load() >= target.Load() {
			if st.endNs.Load() == 0 {
				st.endNs.Store(int64(td.Sub(start)))
			}
			stop()
		}
	}
}

// asyncHeartbeat sends a heartbeat that the worker's complete does not wait
// for, as peerbench's default in-progress ack (-hb async) and a claw
// heartbeating beside its work. Its answer is still checked and timed. The
// complete may overtake it: a 409 that arrives for a job whose complete
// succeeded (completed receives true) is counted as overtaken, not as an
// error; any other failure is an error.
func (r *runner) asyncHeartbeat(ctx context.Context, stop context.CancelFunc, node int, wid string, c *claim,
	completed <-chan bool, st *workStats) {
	th := time.Now()
	err := r.a.heartbeat(ctx, node, wid, c)
	if err == nil {
		st.hbL.add(time.Since(th))
		return
	}
	var he *httpError
	if errors.As(err, &he) && he.Status == http.StatusConflict && <-completed {
		st.hbOvertaken.Add(1)
		return
	}
	r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("heartbeat via %s: %w", r.cfg.Addrs[node], err))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// watchStall ends a phase whose remaining jobs can never be completed: once
// there were errors, producers are done and no job completed for 3 s, it
// asks the server whether the stream still has queued jobs, and stops the
// phase if not (the rest are stuck running under a lease; verification
// reports them). Bounded by pctx.
func (r *runner) watchStall(ctx, pctx context.Context, stop context.CancelFunc, stream string, errs func() int64,
	prodDone func() bool, completed func() int64) {
	last, lastAt := completed(), time.Now()
	for i := 0; i < 1_000_000 && pctx.Err() == nil; i++ { // 500 ms a round: bounded by pctx long before the count
		sleepCtx(pctx, 500*time.Millisecond)
		if c := completed(); c != last {
			last, lastAt = c, time.Now()
			continue
		}
		if errs() == 0 || !prodDone() || time.Since(lastAt) < 3*time.Second {
			continue
		}
		n, err := r.a.countJobs(ctx, stream, "queued", 0, 1000)
		if err == nil && n == 0 {
			r.printf("    no progress for %v and nothing queued: ending the phase early\n", time.Since(lastAt).Round(time.Millisecond))
			stop()
			return
		}
		lastAt = time.Now()
	}
}

// ---------------------------------------------------------------- verification

// verifyDone checks on the server that stream holds want done jobs and
// nothing queued or running; it returns how many of want are not done.
func (r *runner) verifyDone(ctx context.Context, stream string, minIndex uint64, want int) (notDone int, err error) {
	cursor := uint64(0)
	if minIndex > 0 {
		cursor = minIndex - 1
	}
	maxPages := want/1000 + 1000
	done, err := r.a.countJobs(ctx, stream, "done", cursor, maxPages)
	if err != nil {
		return 0, err
	}
	q, err := r.a.countJobs(ctx, stream, "queued", cursor, maxPages)
	if err != nil {
		return 0, err
	}
	run, err := r.a.countJobs(ctx, stream, "running", cursor, maxPages)
	if err != nil {
		return 0, err
	}
	if q != 0 || run != 0 || done != want {
		r.printf("    verify %s: %d done (want %d), %d queued, %d running\n", stream, done, want, q, run)
	}
	// Jobs of want that are not done (queued or running ones are among
	// them), more done jobs than created, and queued/running jobs beyond
	// the missing ones all count.
	notDone = want - done
	if notDone < 0 {
		notDone = -notDone
	}
	if extra := q + run - (want - done); extra > 0 {
		notDone += extra
	}
	return notDone, nil
}

// ---------------------------------------------------------------- phases

func (r *runner) phaseCreate(ctx context.Context) error {
	cfg := r.cfg
	stream := r.runID + "-a"
	pctx, pcancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer pcancel()
	var st prodStats
	var next atomic.Int64
	costDone, err := r.sampleCost(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < cfg.Producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r.produce(pctx, pcancel, g, stream, &next, int64(cfg.Jobs), &st, nil)
		}(g)
	}
	wg.Wait()
	el := time.Since(start)
	timedOut := pctx.Err() == context.DeadlineExceeded
	res := r.res
	cost := costDone()
	res.CreateServerCPU = cost.cpu
	s := st.lat.summary()
	res.CreateOK, res.CreateErrors = st.ok.Load(), st.errN.Load()
	if miss := int64(cfg.Jobs) - res.CreateOK - res.CreateErrors; miss > 0 {
		res.CreateErrors += miss // not attempted before the phase timeout
	}
	res.CreateSeconds = round3(el.Seconds())
	res.CreateJobsPerS = perSec(res.CreateOK, el)
	res.CreateP50, res.CreateP99, res.CreateMean, res.CreateMax = s.P50, s.P99, s.Mean, s.Max
	res.CreateCPUPerJob = perJobMs(res.CreateServerCPU, res.CreateOK)
	cursor := st.minIdx.Load()
	if cursor > 0 {
		cursor--
	}
	q, err := r.a.countJobs(ctx, stream, "queued", cursor, cfg.Jobs/1000+1000)
	if err != nil {
		return fmt.Errorf("after create: %w", err)
	}
	res.QueuedAfterA = q
	if int64(q) != res.CreateOK {
		r.printf("    verify: %d jobs queued in %s, but %d creates were acknowledged\n", q, stream, res.CreateOK)
		res.VerifyErrors += abs64(int64(q) - res.CreateOK)
	}
	res.CreateBatch = cost.perBatch()
	res.CreateAppendMs = cost.appendMs()
	r.printf("[A create]    %d jobs (%d errors) in %.3fs => %.0f jobs/s | create ms p50 %.3f p99 %.3f mean %.3f max %.3f | server CPU %.2fs (%.3f ms/job) | queued %d\n%s",
		res.CreateOK, res.CreateErrors, el.Seconds(), res.CreateJobsPerS, s.P50, s.P99, s.Mean, s.Max,
		res.CreateServerCPU, res.CreateCPUPerJob, q, cost.raft(res.CreateOK))
	if st.eb.err != nil {
		r.printf("    first create error: %v\n", st.eb.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("phase A timed out after %v with %d/%d created", cfg.PhaseTimeout, res.CreateOK, cfg.Jobs)
	}
	if res.CreateOK == 0 {
		return fmt.Errorf("phase A created no jobs: %v", st.eb.err)
	}
	r.minA = st.minIdx.Load()
	return nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// phaseLifecycle processes the jobs phase A created. With cleanupOnly (phase
// "create") it only drains them and reports nothing but errors.
func (r *runner) phaseLifecycle(ctx context.Context, cleanupOnly bool) error {
	cfg := r.cfg
	stream := r.runID + "-a"
	res := r.res
	var target atomic.Int64
	target.Store(int64(res.QueuedAfterA))
	pctx, pcancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer pcancel()
	var st workStats
	costDone, err := r.sampleCost(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < cfg.Workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r.work(ctx, pctx, pcancel, g, stream, &target, start, &st)
		}(g)
	}
	go r.watchStall(ctx, pctx, pcancel, stream, st.errN.Load, func() bool { return true }, st.completed.Load)
	wg.Wait()
	timedOut := pctx.Err() == context.DeadlineExceeded
	pcancel()
	el := time.Since(start)
	if e := st.endNs.Load(); e > 0 {
		el = time.Duration(e)
	}
	cost := costDone()
	cpu := cost.cpu
	left, verr := r.verifyDone(ctx, stream, r.minA, int(target.Load()))
	if verr != nil {
		return fmt.Errorf("after lifecycle: %w", verr)
	}
	if cleanupOnly {
		r.printf("[cleanup]     %d jobs of phase A completed (not measured; %d errors, %d not done)\n", st.completed.Load(), st.errN.Load(), left)
		res.CreateErrors += st.errN.Load() // reported with the phase that ran
		res.VerifyErrors += int64(left)
		if st.eb.err != nil {
			r.printf("    first cleanup error: %v\n", st.eb.err)
		}
		return ctx.Err()
	}
	res.LifecycleServerCPU = cpu
	res.LifecycleCompleted, res.LifecycleErrors = st.completed.Load(), st.errN.Load()
	res.LifecycleRedeliv, res.LifecycleEmpty = st.redeliv.Load(), st.empty.Load()
	res.LifecycleSeconds = round3(el.Seconds())
	res.LifecycleJobsPerS = perSec(res.LifecycleCompleted, el)
	c, h, p, j := st.claimL.summary(), st.hbL.summary(), st.compL.summary(), st.jobL.summary()
	res.ClaimP50, res.ClaimP99, res.ClaimMax = c.P50, c.P99, c.Max
	res.HeartbeatP50, res.HeartbeatP99, res.HeartbeatMax = h.P50, h.P99, h.Max
	res.CompleteP50, res.CompleteP99, res.CompleteMax = p.P50, p.P99, p.Max
	res.LifecycleJobP50, res.LifecycleJobP99 = j.P50, j.P99
	res.LifecycleCPUPerJob = perJobMs(cpu, res.LifecycleCompleted)
	res.LifecycleBatch = cost.perBatch()
	res.LifecycleAppendMs = cost.appendMs()
	res.HeartbeatsOvertaken = st.hbOvertaken.Load()
	hbNote := ""
	if n := int64(h.N) + res.HeartbeatsOvertaken; n > 0 {
		res.HeartbeatsLocal = round3(float64(cost.localHB) / float64(n))
		hbNote = fmt.Sprintf(" (%.0f%% answered by the node reached", 100*res.HeartbeatsLocal)
		if res.HeartbeatsOvertaken > 0 {
			hbNote += fmt.Sprintf("; %d overtaken by their job's complete", res.HeartbeatsOvertaken)
		}
		hbNote += ")"
	}
	res.LeftAfterB = left
	res.VerifyErrors += int64(left)
	r.printf("[B lifecycle] %d/%d jobs completed (%d errors, %d redeliveries, %d empty claims) in %.3fs => %.0f jobs/s\n"+
		"              claim ms p50 %.3f p99 %.3f max %.3f | heartbeat (%s) ms p50 %.3f p99 %.3f max %.3f%s | complete ms p50 %.3f p99 %.3f max %.3f\n"+
		"              per job (claim start->complete ack) ms p50 %.3f p99 %.3f | server CPU %.2fs (%.3f ms/job) | not done %d\n%s",
		res.LifecycleCompleted, target.Load(), res.LifecycleErrors, res.LifecycleRedeliv, res.LifecycleEmpty, el.Seconds(), res.LifecycleJobsPerS,
		c.P50, c.P99, c.Max, cfg.Heartbeat, h.P50, h.P99, h.Max, hbNote, p.P50, p.P99, p.Max, j.P50, j.P99, cpu, res.LifecycleCPUPerJob, left, cost.raft(res.LifecycleCompleted))
	if st.eb.err != nil {
		r.printf("    first lifecycle error: %v\n", st.eb.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("phase B timed out after %v with %d/%d completed", cfg.PhaseTimeout, res.LifecycleCompleted, target.Load())
	}
	return nil
}

// mixedStats is what one mixed round (phase C or the warm-up) measured.
type mixedStats struct {
	p        prodStats
	w        workStats
	el       time.Duration
	timedOut bool
	target   int64
}

func (m *mixedStats) errors() int64    { return m.p.errN.Load() + m.w.errN.Load() }
func (m *mixedStats) minIndex() uint64 { return m.p.minIdx.Load() }

// mixedRound runs producers and workers at once for n jobs on stream.
func (r *runner) mixedRound(ctx, bound context.Context, stream string, n int) *mixedStats {
	cfg := r.cfg
	pctx, pcancel := context.WithTimeout(bound, cfg.PhaseTimeout)
	defer pcancel()
	m := &mixedStats{}
	var target, next atomic.Int64
	target.Store(int64(n))
	var prodsDone atomic.Bool
	start := time.Now()
	var wg, pwg sync.WaitGroup
	for g := 0; g < cfg.Workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r.work(ctx, pctx, pcancel, g, stream, &target, start, &m.w)
		}(g)
	}
	for g := 0; g < cfg.Producers; g++ {
		pwg.Add(1)
		go func(g int) {
			defer pwg.Done()
			r.produce(pctx, pcancel, g, stream, &next, int64(n), &m.p, &target)
		}(g)
	}
	go r.watchStall(ctx, pctx, pcancel, stream, m.errors, prodsDone.Load, m.w.completed.Load)
	pwg.Wait()
	prodsDone.Store(true)
	if m.w.completed.Load()+m.w.gaveUp.Load() >= target.Load() {
		pcancel() // every create failed, or all is done already
	}
	wg.Wait()
	m.timedOut = pctx.Err() == context.DeadlineExceeded && bound.Err() == nil
	pcancel()
	m.el = time.Since(start)
	if e := m.w.endNs.Load(); e > 0 {
		m.el = time.Duration(e)
	}
	m.target = target.Load()
	return m
}

func (r *runner) phaseMixed(ctx context.Context) error {
	cfg := r.cfg
	stream := r.runID + "-c"
	res := r.res
	costDone, err := r.sampleCost(ctx)
	if err != nil {
		return err
	}
	m := r.mixedRound(ctx, ctx, stream, cfg.MixedJobs)
	cost := costDone()
	cpu := cost.cpu
	res.MixedServerCPU = cpu
	res.MixedCreated, res.MixedCompleted = m.p.ok.Load(), m.w.completed.Load()
	res.MixedErrors, res.MixedRedeliv = m.errors(), m.w.redeliv.Load()
	if miss := int64(cfg.MixedJobs) - res.MixedCreated - m.p.errN.Load(); miss > 0 {
		res.MixedErrors += miss
	}
	res.MixedSeconds = round3(m.el.Seconds())
	res.MixedJobsPerS = perSec(res.MixedCompleted, m.el)
	e, c, cl, p := m.w.e2eL.summary(), m.p.lat.summary(), m.w.claimL.summary(), m.w.compL.summary()
	res.MixedE2EP50, res.MixedE2EP99, res.MixedE2EMax = e.P50, e.P99, e.Max
	res.MixedCreateP50, res.MixedCreateP99 = c.P50, c.P99
	res.MixedClaimP50, res.MixedClaimP99 = cl.P50, cl.P99
	res.MixedCompleteP50, res.MixedCompleteP99 = p.P50, p.P99
	res.MixedCPUPerJob = perJobMs(cpu, res.MixedCompleted)
	res.MixedBatch = cost.perBatch()
	res.MixedAppendMs = cost.appendMs()
	left, verr := r.verifyDone(ctx, stream, m.minIndex(), int(res.MixedCreated))
	if verr != nil {
		return fmt.Errorf("after mixed: %w", verr)
	}
	res.LeftAfterC = left
	res.VerifyErrors += int64(left)
	r.printf("[C mixed]     %d created, %d completed (%d errors, %d redeliveries) in %.3fs => %.0f jobs/s end-to-end\n"+
		"              e2e (create sent->complete ack) ms p50 %.3f p99 %.3f max %.3f | create ms p50 %.3f p99 %.3f | claim ms p50 %.3f p99 %.3f | complete ms p50 %.3f p99 %.3f\n"+
		"              server CPU %.2fs (%.3f ms/job) | not done %d\n%s",
		res.MixedCreated, res.MixedCompleted, res.MixedErrors, res.MixedRedeliv, m.el.Seconds(), res.MixedJobsPerS,
		e.P50, e.P99, e.Max, c.P50, c.P99, cl.P50, cl.P99, p.P50, p.P99, cpu, res.MixedCPUPerJob, left, cost.raft(res.MixedCompleted))
	if m.p.eb.err != nil {
		r.printf("    first mixed create error: %v\n", m.p.eb.err)
	}
	if m.w.eb.err != nil {
		r.printf("    first mixed worker error: %v\n", m.w.eb.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.timedOut {
		return fmt.Errorf("phase C timed out after %v with %d/%d completed", cfg.PhaseTimeout, res.MixedCompleted, m.target)
	}
	return nil
}

// ownTimerSlack is this process's timer slack in nanoseconds, from
// /proc/self/timerslack_ns, or 0 where that file does not exist.
func ownTimerSlack() int64 {
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
