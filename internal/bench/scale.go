package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// defaultScaleSizes are the queue sizes `spine-bench scale` grows the
// cluster through, up to --n.
var defaultScaleSizes = []int{1000, 30000, 100000, 300000}

// scaleConfig is `spine-bench scale`'s configuration.
type scaleConfig struct {
	sizes     []int
	samples   int           // timed requests per route and size
	routeTime time.Duration // upper bound of one route's requests at one size
	producers int
	payload   int
	streams   int
	recovery  bool
	finish    bool
	idle      time.Duration
	timeout   time.Duration
	reqTime   time.Duration
	out       io.Writer
}

// scaleRoute is one route's latencies at one size.
type scaleRoute struct {
	Route      string  `json:"route"`
	N          int     `json:"n"`
	Errors     int     `json:"errors"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	FirstError string  `json:"first_error,omitempty"`
}

// scaleSize is what one size measured. Per-node lists are in node order
// (n1, n2, …).
type scaleSize struct {
	Queued         int          `json:"queued"`
	QueuedSeen     int          `json:"queued_seen"` // jobs.queued of GET /v1/state after the routes
	Leader         string       `json:"leader"`
	FillJobsPerS   float64      `json:"fill_jobs_per_s"`
	FillSeconds    float64      `json:"fill_s"`
	FillErrors     int64        `json:"fill_errors"`
	CatchUpSeconds float64      `json:"followers_caught_up_s"`
	Routes         []scaleRoute `json:"routes"`
	RSSMiB         []float64    `json:"rss_mib"`
	HeapInuseMiB   []float64    `json:"heap_inuse_mib"`
	// LiveHeapMiB is the heap in use after a forced collection (the nodes'
	// /debug/pprof/heap?gc=1), or go_memstats_heap_alloc_bytes of /metrics
	// where the nodes do not serve the profiler (LiveHeapForced false).
	LiveHeapMiB    []float64 `json:"live_heap_mib"`
	LiveHeapForced bool      `json:"live_heap_after_gc"`
	// Per queued job: the growth since the empty cluster, divided by the
	// jobs queued.
	LiveHeapBytesPerJob []float64 `json:"live_heap_bytes_per_job"`
	RSSBytesPerJob      []float64 `json:"rss_bytes_per_job"`
}

// scaleResult is the JSON line of `spine-bench scale`.
type scaleResult struct {
	System       string        `json:"system"`
	OK           bool          `json:"ok"`
	Error        string        `json:"error,omitempty"`
	GoVersion    string        `json:"go_version"`
	Nodes        int           `json:"nodes"`
	Payload      int           `json:"payload_bytes"`
	Streams      int           `json:"streams"`
	Samples      int           `json:"samples"`
	BaseRSSMiB   []float64     `json:"empty_rss_mib"`
	BaseHeapMiB  []float64     `json:"empty_live_heap_mib"`
	Sizes        []scaleSize   `json:"sizes"`
	Idle         *idleFigs     `json:"idle,omitempty"`
	Recovery     *recoveryFigs `json:"recovery,omitempty"`
	Finished     *finishedFigs `json:"finished,omitempty"`
	TotalSeconds float64       `json:"total_s"`
}

// idleFigs is each node's resident memory after the cluster, at the
// largest size, received no request for a while (--idle).
type idleFigs struct {
	Seconds        float64   `json:"seconds"`
	RSSMiB         []float64 `json:"rss_mib"`
	RSSBytesPerJob []float64 `json:"rss_bytes_per_job"`
}

// ScaleMain is `spine-bench scale ARGS`: it starts a local cluster, grows
// its queue through the sizes, measures every route and the memory at each,
// and at the largest the backup, restore and recovery times. It prints a
// table, then one JSON line.
func ScaleMain(args []string, stdout, stderr io.Writer) int {
	cfg := scaleConfig{samples: 50, routeTime: 20 * time.Second, producers: 64, payload: 256, streams: 20,
		recovery: true, finish: true, timeout: 30 * time.Minute, reqTime: 30 * time.Second, out: stdout}
	var (
		n, nodes                  int
		sizes                     string
		binary, workDir, logLevel string
		keep                      bool
		localEnv                  = addrFlag{}
	)
	fs := flag.NewFlagSet("spine-bench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&n, "n", 300000, "the largest queue size; the sizes are those of 1000, 30000, 100000, 300000 below it, then n")
	fs.StringVar(&sizes, "sizes", "", "the queue sizes, ascending, comma-separated (k and m suffixes: 1k,30k,100k); overrides --n")
	fs.IntVar(&cfg.samples, "samples", cfg.samples, "timed requests per route at each size")
	fs.DurationVar(&cfg.routeTime, "route-time", cfg.routeTime, "upper bound of one route's requests at one size")
	fs.IntVar(&cfg.producers, "producers", cfg.producers, "concurrent creates while the queue grows")
	fs.IntVar(&cfg.payload, "payload", cfg.payload, "payload bytes per job")
	fs.IntVar(&cfg.streams, "streams", cfg.streams, "streams the jobs are spread over (developer-queue streams of one session)")
	fs.DurationVar(&cfg.idle, "idle", 0, "at the largest size, send nothing for this long, then read each node's RSS again (what a node holds once its collector has given back the garbage; 0: skip)")
	fs.BoolVar(&cfg.recovery, "recovery", cfg.recovery, "at the largest size, time snapshot save and restore, a follower's restart, a leader kill and a full restart")
	fs.BoolVar(&cfg.finish, "finish", cfg.finish, "at the end, claim and complete every queued job, wait --idle, and read each node's memory per finished job")
	fs.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "upper bound for the whole run")
	fs.DurationVar(&cfg.reqTime, "request-timeout", cfg.reqTime, "timeout of one request")
	fs.IntVar(&nodes, "nodes", 3, "nodes of the local cluster")
	fs.StringVar(&binary, "binary", "", "spine binary of the nodes and the CLI (default: spine next to this executable, else on PATH)")
	fs.StringVar(&workDir, "workdir", os.TempDir(), "parent of the temp dir of the nodes' data")
	fs.StringVar(&logLevel, "local-log-level", "info", "SPINE_LOG_LEVEL of the nodes")
	fs.Var(&localEnv, "local-env", "K=V added to the nodes' environment; repeatable or CSV (SPINE_PPROF=1 is set unless given)")
	fs.BoolVar(&keep, "keep", false, "keep the temp dir (data dirs and node logs)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: spine-bench scale [flags]\n\nStarts a local cluster on 127.0.0.1, grows its queue through the sizes and, at each,\ntimes every route and reads each node's memory; at the largest, times snapshot save and\nrestore, a follower's restart, a leader kill and a full restart; then finishes every job and\nreads the memory per finished job. Prints a table, then one JSON line (docs/performance.md, \"The scale benchmark\").\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spine-bench scale: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	var err error
	if sizes != "" {
		cfg.sizes, err = parseSizes(sizes)
	} else {
		cfg.sizes, err = sizesUpTo(n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "spine-bench scale: %v\n", err)
		return ExitUsage
	}
	if cfg.samples < 1 || cfg.producers < 1 || cfg.streams < 1 || cfg.streams > 100 || nodes < 1 || nodes > 9 ||
		cfg.routeTime <= 0 || cfg.timeout <= 0 || cfg.reqTime <= 0 {
		fmt.Fprintln(stderr, "spine-bench scale: --samples, --producers, --route-time, --timeout and --request-timeout must be > 0, --streams 1 to 100, --nodes 1 to 9")
		return ExitUsage
	}
	if cfg.payload < minPayload {
		cfg.payload = minPayload
	}
	env := map[string]string{"SPINE_LOG_LEVEL": logLevel, "SPINE_PPROF": "1"}
	for _, kv := range localEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(stderr, "spine-bench scale: --local-env wants K=V, not %q\n", kv)
			return ExitUsage
		}
		env[k] = v
	}
	if binary == "" {
		if binary, err = defaultServer(); err != nil {
			fmt.Fprintf(stderr, "spine-bench scale: %v (give --binary)\n", err)
			return ExitError
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	start := time.Now()
	res := &scaleResult{System: "spine-scale", GoVersion: runtime.Version(), Nodes: nodes, Payload: cfg.payload,
		Streams: cfg.streams, Samples: cfg.samples}
	lc, err := startLocal(nodes, binary, workDir, env, keep, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "spine-bench scale: start local cluster: %v\n", err)
		return ExitError
	}
	defer lc.stop(stdout)
	fmt.Fprintf(stdout, "local cluster of %d up in %.2fs under %s (log level %s)\n", nodes, time.Since(start).Seconds(), lc.dir, logLevel)
	s := newScaleRun(cfg, lc, binary)
	defer s.close()
	err = s.run(ctx, res)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("run stopped: %w", ctx.Err())
	}
	res.TotalSeconds = round3(time.Since(start).Seconds())
	res.OK = err == nil
	if err != nil {
		res.Error = err.Error()
		lc.keep = true
		fmt.Fprintf(stdout, "ERROR: %v\n", err)
	}
	printScale(stdout, res)
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	if err != nil {
		return ExitError
	}
	return ExitOK
}

// run grows the queue through the sizes and measures each.
func (s *scaleRun) run(ctx context.Context, res *scaleResult) error {
	if err := s.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	base, err := s.memory(ctx)
	if err != nil {
		return fmt.Errorf("memory of the empty cluster: %w", err)
	}
	res.BaseRSSMiB, res.BaseHeapMiB = base.rss, base.live
	s.printf("empty cluster: RSS %s MiB, live heap %s MiB (n1/n2/…)\n", joinFloats(base.rss, 1), joinFloats(base.live, 1))
	have := 0
	for _, size := range s.cfg.sizes {
		sz := scaleSize{Queued: size}
		if err := s.fill(ctx, have, size, &sz); err != nil {
			res.Sizes = append(res.Sizes, sz)
			return fmt.Errorf("grow to %d: %w", size, err)
		}
		have = size
		if err := s.measure(ctx, &sz); err != nil {
			res.Sizes = append(res.Sizes, sz)
			return fmt.Errorf("at %d: %w", size, err)
		}
		m, err := s.memory(ctx)
		if err != nil {
			res.Sizes = append(res.Sizes, sz)
			return fmt.Errorf("memory at %d: %w", size, err)
		}
		sz.RSSMiB, sz.HeapInuseMiB, sz.LiveHeapMiB, sz.LiveHeapForced = m.rss, m.inuse, m.live, m.forced
		sz.RSSBytesPerJob = perJobBytes(m.rss, base.rss, size)
		sz.LiveHeapBytesPerJob = perJobBytes(m.live, base.live, size)
		s.printf("[%s queued] RSS %s MiB, live heap %s MiB, live heap per job %s bytes\n", thousands(size),
			joinFloats(m.rss, 1), joinFloats(m.live, 1), joinFloats(sz.LiveHeapBytesPerJob, 0))
		res.Sizes = append(res.Sizes, sz)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if s.cfg.idle > 0 && have > 0 {
		s.printf("[%s queued] idle for %s\n", thousands(have), s.cfg.idle)
		select {
		case <-time.After(s.cfg.idle):
		case <-ctx.Done():
			return ctx.Err()
		}
		m, err := s.memory(ctx)
		if err != nil {
			return fmt.Errorf("memory after idling: %w", err)
		}
		res.Idle = &idleFigs{Seconds: s.cfg.idle.Seconds(), RSSMiB: m.rss, RSSBytesPerJob: perJobBytes(m.rss, base.rss, have)}
		s.printf("[%s queued] after %s idle: RSS %s MiB, RSS per queued job %s bytes\n", thousands(have), s.cfg.idle,
			joinFloats(m.rss, 1), joinFloats(res.Idle.RSSBytesPerJob, 0))
	}
	if s.cfg.recovery && have > 0 {
		rec, err := s.recovery(ctx, have)
		res.Recovery = rec
		if err != nil {
			return fmt.Errorf("recovery at %d: %w", have, err)
		}
	}
	if s.cfg.finish && have > 0 {
		f, err := s.finish(ctx, base)
		res.Finished = f
		if err != nil {
			return fmt.Errorf("finishing the jobs: %w", err)
		}
	}
	return nil
}

// perJobBytes is (now - base) / jobs per node, in bytes.
func perJobBytes(nowMiB, baseMiB []float64, jobs int) []float64 {
	out := make([]float64, len(nowMiB))
	for i := range nowMiB {
		if i < len(baseMiB) && jobs > 0 {
			out[i] = float64(int64((nowMiB[i] - baseMiB[i]) * (1 << 20) / float64(jobs)))
		}
	}
	return out
}

// head and claw tokens of the local cluster.
var (
	scaleHead = "Bearer " + testcluster.HeadToken
	scaleClaw = "Bearer " + testcluster.LeftToken
)
