package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1 // fatal error, timeout, or a run that is not clean (errors, lost jobs, redeliveries)
	ExitUsage = 2
)

// localFlag is --local (3 nodes) or --local=N / --local N.
type localFlag struct{ n int }

func (l *localFlag) String() string   { return strconv.Itoa(l.n) }
func (l *localFlag) IsBoolFlag() bool { return true }
func (l *localFlag) Set(v string) error {
	switch v {
	case "true":
		l.n = 3
		return nil
	case "false":
		l.n = 0
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 9 {
		return fmt.Errorf("--local wants a node count from 1 to 9, not %q", v)
	}
	l.n = n
	return nil
}

type addrFlag []string

func (a *addrFlag) String() string { return strings.Join(*a, ",") }
func (a *addrFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*a = append(*a, p)
		}
	}
	return nil
}

// firstToken is env single || first of env CSV.
func firstToken(getenv func(string) string, single, csv string) string {
	if t := strings.TrimSpace(getenv(single)); t != "" {
		return t
	}
	for _, t := range strings.Split(getenv(csv), ",") {
		if t = strings.TrimSpace(t); t != "" {
			return t
		}
	}
	return ""
}

func normalize(a string) string {
	a = strings.TrimRight(strings.TrimSpace(a), "/")
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	return a
}

// Main is `spine-bench ARGS`. It prints human-readable lines and, last, one
// JSON line to stdout.
func Main(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 {
		switch args[0] {
		case "scale":
			return ScaleMain(args[1:], stdout, stderr)
		case "compare":
			return CompareMain(args[1:], stdout, stderr)
		case "peer":
			return PeerMain(args[1:], stdout, stderr)
		}
	}
	cfg := DefaultConfig()
	var addrs addrFlag
	var local localFlag
	var binary, workDir, logLevel string
	var keep bool
	localEnv := addrFlag{}
	fs := flag.NewFlagSet("spine-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&addrs, "addr", "node base URL; repeatable or CSV (env SPINE_ADDRS, default http://127.0.0.1:36725)")
	fs.StringVar(&cfg.HeadToken, "token", "", "head token for creates and reads (env HEAD_TOKEN, else first of HEAD_TOKENS)")
	fs.StringVar(&cfg.ClawToken, "claw-token", "", "claw token for the worker contract (env LEFT_CLAW_TOKEN, else first of LEFT_CLAW_TOKENS)")
	fs.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "jobs created in phase A and processed in phase B")
	fs.IntVar(&cfg.MixedJobs, "mixed-jobs", 0, "jobs in phase C (0 = --jobs)")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "concurrent producers")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent workers")
	fs.IntVar(&cfg.Payload, "payload", cfg.Payload, fmt.Sprintf("payload bytes per job (JSON; min %d: send time + job number)", minPayload))
	fs.StringVar(&cfg.Phase, "phase", cfg.Phase, "create | lifecycle | mixed | all (create alone still drains its jobs afterwards, unmeasured; lifecycle runs create first)")
	fs.StringVar(&cfg.Connect, "connect", cfg.Connect, "rr: producer i on node i%n, worker i on node (i+1)%n (as peerbench -connect rr); request: every request to the next node; leader: everything to the leader")
	fs.StringVar(&cfg.Transport, "transport", cfg.Transport, "mux: each process's requests share one spine-mux/1 connection per node, as the Go client's do; http: HTTP/1.1 keep-alive, one connection per producer and worker")
	fs.StringVar(&cfg.Heartbeat, "hb", cfg.Heartbeat, "the heartbeat sent between claim and complete: async (the complete does not wait for its answer, as peerbench's default -hb async and a claw heartbeating beside its work; the answer is still checked and timed) | sync (the complete waits for it, as peerbench -hb sync) | off")
	fs.StringVar(&cfg.Next, "next", cfg.Next, "whether a worker's complete also claims its next job (one round trip and one commit per job): auto (when the cluster takes it) | on | off (a claim, then a complete, as peerbench's Fetch and AckSync)")
	heartbeat := fs.Bool("heartbeat", true, "send one heartbeat per job between claim and complete (false: --hb off)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "upper bound for the whole run")
	fs.DurationVar(&cfg.PhaseTimeout, "phase-timeout", cfg.PhaseTimeout, "upper bound for each phase")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "timeout of one request (a claim gets --claim-wait on top)")
	fs.DurationVar(&cfg.ClaimWait, "claim-wait", cfg.ClaimWait, "max_wait_ms of a worker claim (long poll while the stream is empty)")
	fs.IntVar(&cfg.MaxErrors, "max-errors", cfg.MaxErrors, "stop a phase after this many errors (401/403/400/404 stop it at once)")
	fs.StringVar(&cfg.Label, "label", "", "free text copied into the JSON line")
	fs.Var(&local, "local", "start a local cluster of N nodes (--local = 3) with testcluster in a temp dir, run, stop it")
	fs.StringVar(&binary, "binary", "", "spine binary for --local (default: spine next to this executable, else on PATH)")
	fs.StringVar(&workDir, "workdir", os.TempDir(), "parent of the --local temp dir")
	fs.StringVar(&logLevel, "local-log-level", "info", "SPINE_LOG_LEVEL of --local nodes (testcluster's own default is debug)")
	fs.Var(&localEnv, "local-env", "K=V added to the --local nodes' environment; repeatable or CSV (e.g. SPINE_PPROF=1, LEASE_SECONDS=60)")
	fs.BoolVar(&keep, "keep", false, "keep the --local temp dir (data dirs and node logs)")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile (the clients, not the nodes) to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: spine-bench [flags]\n       spine-bench scale [flags]     (spine-bench scale --help)\n       spine-bench compare [flags]   (spine-bench compare --help)\n       spine-bench peer FILE...      (spine-bench peer --help)\n\nBenchmarks a Spine cluster (phases: A create, B lifecycle claim→heartbeat→complete, C mixed),\nmirroring shared/peerbench. Prints readable lines, then one JSON line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// "--local 5": fold a numeric argument after --local into the flag.
	var norm []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--local" || a == "-local") && i+1 < len(args) {
			if _, err := strconv.Atoi(args[i+1]); err == nil {
				norm = append(norm, a+"="+args[i+1])
				i++
				continue
			}
		}
		norm = append(norm, a)
	}
	if err := fs.Parse(norm); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spine-bench: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	if !*heartbeat {
		cfg.Heartbeat = "off"
	}
	if cfg.Jobs <= 0 || cfg.Producers <= 0 || cfg.Workers <= 0 || cfg.Timeout <= 0 || cfg.PhaseTimeout <= 0 {
		fmt.Fprintln(stderr, "spine-bench: --jobs, --producers, --workers, --timeout and --phase-timeout must be > 0")
		return ExitUsage
	}
	switch cfg.Phase {
	case "create", "lifecycle", "mixed", "all":
	default:
		fmt.Fprintf(stderr, "spine-bench: --phase must be create, lifecycle, mixed or all\n")
		return ExitUsage
	}
	switch cfg.Connect {
	case "rr", "request", "leader":
	default:
		fmt.Fprintf(stderr, "spine-bench: --connect must be rr, request or leader\n")
		return ExitUsage
	}
	if cfg.Transport != "mux" && cfg.Transport != "http" {
		fmt.Fprintf(stderr, "spine-bench: --transport must be mux or http\n")
		return ExitUsage
	}
	cfg.Out = stdout
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "spine-bench: --cpuprofile: %v\n", err)
			return ExitUsage
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(stderr, "spine-bench: --cpuprofile: %v\n", err)
			}
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var lc *localCluster
	if local.n > 0 {
		if len(addrs) > 0 {
			fmt.Fprintln(stderr, "spine-bench: give --local or --addr, not both")
			return ExitUsage
		}
		if binary == "" {
			b, err := defaultServer()
			if err != nil {
				fmt.Fprintf(stderr, "spine-bench: %v (give --binary)\n", err)
				return ExitError
			}
			binary = b
		}
		var err error
		t0 := time.Now()
		env := map[string]string{"SPINE_LOG_LEVEL": logLevel}
		for _, kv := range localEnv {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				fmt.Fprintf(stderr, "spine-bench: --local-env wants K=V, not %q\n", kv)
				return ExitUsage
			}
			env[k] = v
		}
		lc, err = startLocal(local.n, binary, workDir, env, keep, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "spine-bench: start local cluster: %v\n", err)
			return ExitError
		}
		defer lc.stop(stdout)
		fmt.Fprintf(stdout, "local cluster of %d up in %.2fs under %s (log level %s)\n", local.n, time.Since(t0).Seconds(), lc.dir, logLevel)
		cfg.Addrs = lc.c.URLs()
		if cfg.HeadToken == "" {
			cfg.HeadToken = testcluster.HeadToken
		}
		if cfg.ClawToken == "" {
			cfg.ClawToken = testcluster.LeftToken
		}
	} else {
		if len(addrs) == 0 {
			addrs.Set(getenv("SPINE_ADDRS"))
		}
		if len(addrs) == 0 {
			addrs = addrFlag{"http://127.0.0.1:36725"}
		}
		for _, a := range addrs {
			cfg.Addrs = append(cfg.Addrs, normalize(a))
		}
		if cfg.HeadToken == "" {
			cfg.HeadToken = firstToken(getenv, "HEAD_TOKEN", "HEAD_TOKENS")
		}
		if cfg.ClawToken == "" {
			cfg.ClawToken = firstToken(getenv, "LEFT_CLAW_TOKEN", "LEFT_CLAW_TOKENS")
		}
	}
	if cfg.HeadToken == "" || cfg.ClawToken == "" {
		fmt.Fprintln(stderr, "spine-bench: need a head token (--token, HEAD_TOKEN[S]) and a claw token (--claw-token, LEFT_CLAW_TOKEN[S])")
		return ExitUsage
	}

	res, err := runSafe(ctx, cfg)
	if lc != nil && (err != nil || !res.Clean) {
		lc.keep = true // keep the node logs of a failed or unclean run
	}
	if lc != nil {
		res.Local = true
		res.DataOnTmpfs = onTmpfs(lc.dir)
		if e := lc.exited(); e != nil && err == nil {
			err = e
			res.OK, res.Clean, res.Error = false, false, e.Error()
		}
		res.ServerPeakRSSMiB = lc.peakRSS(stdout)
	}
	if err != nil {
		fmt.Fprintf(stdout, "ERROR: %v\n", err)
		if lc != nil {
			fmt.Fprint(stdout, lc.c.Logs(2000))
		}
	} else if !res.Clean {
		fmt.Fprintf(stdout, "NOT CLEAN: %d errors, %d+%d redeliveries (see the phase lines)\n", res.Errors, res.LifecycleRedeliv, res.MixedRedeliv)
	}
	fmt.Fprintf(stdout, "summary: create %.0f jobs/s (p99 %.2f ms) | lifecycle %.0f jobs/s (claim p99 %.2f, complete p99 %.2f ms) | mixed %.0f jobs/s (e2e p99 %.1f ms) | server CPU %.3f ms/job | errors %d\n",
		res.CreateJobsPerS, res.CreateP99, res.LifecycleJobsPerS, res.ClaimP99, res.CompleteP99, res.MixedJobsPerS, res.MixedE2EP99, res.CPUMsPerJob, res.Errors)
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	if err != nil || !res.Clean {
		return ExitError
	}
	return ExitOK
}

// runSafe is Run with a panic turned into an error, so the local cluster is
// always stopped by the caller's defer and the JSON line is still printed.
func runSafe(ctx context.Context, cfg Config) (res *Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
			if res == nil {
				res = &Result{System: "spine", Error: err.Error()}
			}
		}
	}()
	return Run(ctx, cfg)
}

// ---------------------------------------------------------------- local cluster

type localCluster struct {
	c    *testcluster.Cluster
	dir  string
	keep bool
}

const localPrefix = "spine-bench-"

func startLocal(nodes int, binary, workDir string, env map[string]string, keep bool, out io.Writer) (*localCluster, error) {
	removeStale(workDir, out)
	dir, err := os.MkdirTemp(workDir, localPrefix+"*")
	if err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	c, err := testcluster.Start(testcluster.Options{
		Binary: binary, Dir: dir, Nodes: nodes,
		Env:  env,
		Logf: func(format string, args ...interface{}) { fmt.Fprintf(out, format+"\n", args...) },
	})
	if err != nil {
		if !keep {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	return &localCluster{c: c, dir: dir, keep: keep}, nil
}

// exited reports a node that died during the run.
func (l *localCluster) exited() error {
	for _, n := range l.c.Nodes {
		if !n.Running() {
			return fmt.Errorf("local node %s exited during the run (log %s)", n.ID, n.LogPath)
		}
	}
	return nil
}

// peakRSS reads each node's VmHWM from /proc (Linux) before shutdown.
func (l *localCluster) peakRSS(out io.Writer) []float64 {
	var res []float64
	for _, n := range l.c.Nodes {
		pid := n.Pid()
		if pid == 0 {
			res = append(res, 0)
			continue
		}
		kib := procStatusKiB(pid, "VmHWM:")
		res = append(res, round1(float64(kib)/1024))
		fmt.Fprintf(out, "[server %s] pid %d: peak RSS (VmHWM) %.1f MiB, RSS now %.1f MiB\n", n.ID, pid, float64(kib)/1024, float64(procStatusKiB(pid, "VmRSS:"))/1024)
	}
	return res
}

func procStatusKiB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line[len(key):])
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// stop terminates the nodes by pid (SIGTERM, SIGKILL after 10 s) and removes
// the temp dir unless --keep.
func (l *localCluster) stop(out io.Writer) {
	l.c.Stop()
	if l.keep {
		fmt.Fprintf(out, "local cluster stopped; kept %s\n", l.dir)
		return
	}
	if err := os.RemoveAll(l.dir); err != nil {
		fmt.Fprintf(out, "could not remove %s: %v\n", l.dir, err)
	}
	fmt.Fprintf(out, "local cluster stopped, %s removed\n", l.dir)
}

// removeStale removes temp dirs of earlier runs whose owner process is gone
// (a SIGKILLed bench cannot clean up; its nodes die with it via Pdeathsig).
func removeStale(workDir string, out io.Writer) {
	ents, _ := filepath.Glob(filepath.Join(workDir, localPrefix+"*"))
	for _, d := range ents {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // owner still alive
		}
		if os.RemoveAll(d) == nil {
			fmt.Fprintf(out, "removed stale %s (owner pid %d gone)\n", d, pid)
		}
	}
}

// defaultServer is the spine binary --local starts: the one installed next
// to spine-bench (make bench builds both into bin/), else the one on PATH.
func defaultServer() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "spine")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("spine")
	if err != nil {
		return "", fmt.Errorf("no spine binary next to spine-bench or on PATH")
	}
	return p, nil
}
