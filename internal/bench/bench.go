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
	"runtime"
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
	Heartbeat string
	// Next is whether a worker's complete also asks for its next job (the
	// complete's "next" claim), so a job costs one round trip and one
	// commit instead of two: "auto" (when the cluster takes it; a build
	// without it refuses the field and the bench stops asking), "on" or
	// "off" (a claim, then a complete, as peerbench's Fetch and AckSync).
	Next           string
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
		Transport: "mux", Heartbeat: "async", Next: "auto", Timeout: 10 * time.Minute, PhaseTimeout: 5 * time.Minute,
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

	System    string `json:"system"`
	Label     string `json:"label,omitempty"`
	OK        bool   `json:"ok"`    // the run completed (no fatal error, no phase timeout)
	Clean     bool   `json:"clean"` // ok, errors == 0, no redeliveries: only clean runs are comparable
	Error     string `json:"error,omitempty"`
	GoVersion string `json:"go_version"`
	Phase     string `json:"phase"`
	Nodes     int    `json:"nodes"`
	Local     bool   `json:"local"`
	// DataOnTmpfs: the --local nodes kept their data in memory (tmpfs, a
	// --workdir such as /dev/shm), so no write reached a disk: a control
	// that shows what the disk costs, never a way to run Spine.
	DataOnTmpfs bool   `json:"data_on_tmpfs,omitempty"`
	Jobs        int    `json:"jobs"`
	MixedJobs   int    `json:"mixed_jobs"`
	Producers   int    `json:"producers"`
	Workers     int    `json:"workers"`
	Payload     int    `json:"payload_bytes"`
	Connect     string `json:"connect"`
	Transport   string `json:"transport"`
	Heartbeat   string `json:"heartbeat_mode"`
	// CompleteNext: the workers' completes asked for the next job.
	CompleteNext bool   `json:"complete_next"`
	ClaimWaitMs  int64  `json:"claim_max_wait_ms"`
	RunID        string `json:"run_id"`
	Leader       string `json:"leader"`
	LeaderEnd    string `json:"leader_end"`

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
	if cfg.Next == "" {
		cfg.Next = d.Next
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
	if cfg.Next != "auto" && cfg.Next != "on" && cfg.Next != "off" {
		return r.res, fmt.Errorf("unknown next mode %q (auto|on|off)", cfg.Next)
	}
	r.a = newAPI(cfg.Addrs, cfg.HeadToken, cfg.ClawToken, cfg.Producers+cfg.Workers+8, cfg.RequestTimeout)
	r.a.mux = cfg.Transport == "mux"
	if cfg.Next == "off" {
		r.a.next.Store(nextOff)
	}
	defer r.a.close()

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := r.run(ctx)
	res := r.res
	res.TotalSeconds = round3(time.Since(start).Seconds())
	res.CompleteNext = r.a.next.Load() == nextOn
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
	r.printf("config: jobs=%d mixed-jobs=%d producers=%d workers=%d payload=%dB phase=%s connect=%s transport=%s heartbeat=%s next=%s claim max_wait=%v\n",
		cfg.Jobs, cfg.MixedJobs, cfg.Producers, cfg.Workers, cfg.Payload, cfg.Phase, cfg.Connect, cfg.Transport, r.res.Heartbeat, cfg.Next, cfg.ClaimWait)

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
