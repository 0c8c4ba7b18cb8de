// Command spine-drill runs Spine's failover drill: it starts a real cluster
// of spine processes, runs producers and workers through the Go client,
// SIGKILLs the leader again and again, then drains the queue and checks
// that nothing acknowledged was lost or completed twice and that every node
// agrees. See docs/drill.md.
//
// Exit status: 0 when the drill passed, 1 when it found a violation, 2 when
// it could not be carried out (bad flags, the cluster did not start or
// recover, interrupted, timed out).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spine-queue/spine/internal/drill"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "spine-drill: ignoring %s=%q: not an integer\n", key, v)
	}
	return def
}

func envDur(key string, def time.Duration) time.Duration {
	if v := os.Getenv(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "spine-drill: ignoring %s=%q: not a duration\n", key, v)
	}
	return def
}

func main() { os.Exit(run()) }

func run() int {
	var cfg drill.Config
	fs := flag.NewFlagSet("spine-drill", flag.ContinueOnError)
	fs.StringVar(&cfg.Binary, "binary", envOr("SPINE_BINARY", "./bin/spine"), "spine executable (env SPINE_BINARY)")
	fs.IntVar(&cfg.Nodes, "nodes", envInt("NODES", 3), "cluster size (env NODES)")
	fs.IntVar(&cfg.Kills, "kills", envInt("KILLS", 10), "leader kills (env KILLS)")
	fs.IntVar(&cfg.Producers, "producers", envInt("PRODUCERS", 4), "producer goroutines (env PRODUCERS)")
	fs.IntVar(&cfg.Workers, "workers", envInt("WORKERS", 4), "worker goroutines (env WORKERS)")
	seed := fs.Int64("seed", int64(envInt("SEED", 0)), "random seed; 0 picks one (env SEED; the report prints it)")
	fs.DurationVar(&cfg.KillGapMin, "kill-gap-min", envDur("KILL_GAP_MIN", time.Second), "least time between recovery and the next kill (env KILL_GAP_MIN)")
	fs.DurationVar(&cfg.KillGapMax, "kill-gap-max", envDur("KILL_GAP_MAX", 3*time.Second), "most time between recovery and the next kill (env KILL_GAP_MAX)")
	fs.DurationVar(&cfg.RestartDelayMin, "restart-delay-min", envDur("RESTART_DELAY_MIN", 100*time.Millisecond), "least delay before a killed node restarts")
	fs.DurationVar(&cfg.RestartDelayMax, "restart-delay-max", envDur("RESTART_DELAY_MAX", 1500*time.Millisecond), "most delay before a killed node restarts")
	fs.DurationVar(&cfg.ProducerInterval, "producer-interval", envDur("PRODUCER_INTERVAL", 20*time.Millisecond), "pause between one producer's creates")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", envDur("DRAIN_TIMEOUT", 90*time.Second), "bound of the final drain")
	fs.DurationVar(&cfg.Timeout, "timeout", envDur("TIMEOUT", 10*time.Minute), "hard bound of the whole drill (env TIMEOUT)")
	fs.IntVar(&cfg.EventsCheckMax, "events-check-max", envInt("EVENTS_CHECK_MAX", 5000), "check the event history of all jobs up to this many, else a sample")
	fs.IntVar(&cfg.LeaseSeconds, "lease-seconds", envInt("DRILL_LEASE_SECONDS", 3), "LEASE_SECONDS of the nodes")
	fs.StringVar(&cfg.Dir, "dir", envOr("DRILL_DIR", ""), "data and log directory (default: a temporary one, kept on failure)")
	fs.BoolVar(&cfg.KeepDir, "keep", os.Getenv("KEEP") == "1", "keep the data directory even when the drill passes (env KEEP=1)")
	asJSON := fs.Bool("json", os.Getenv("JSON") == "1", "print the report as a final JSON line too (env JSON=1)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	clientLog := fs.String("client-log", os.Getenv("CLIENT_LOG"), "write the drill's client debug log (retries, waits, leader changes) to this file (env CLIENT_LOG)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: spine-drill [flags]\n\nRuns the failover drill (docs/drill.md). Exit 0 pass, 1 violation, 2 could not run.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "spine-drill: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.Seed = *seed
	if *clientLog != "" {
		f, err := os.Create(*clientLog)
		if err != nil {
			fmt.Fprintf(os.Stderr, "spine-drill: %v\n", err)
			return 2
		}
		defer f.Close()
		cfg.ClientLog = f
	}
	if !*quiet {
		start := time.Now()
		cfg.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}

	// SIGINT/SIGTERM cancel the drill; Run stops its cluster before returning.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := drill.Run(ctx, cfg)
	if rep == nil {
		fmt.Fprintf(os.Stderr, "spine-drill: %v\n", err)
		return 2
	}
	fmt.Print(rep.String())
	if *asJSON {
		fmt.Println(string(rep.JSON()))
	}
	switch {
	case err != nil:
		return 2
	case !rep.OK():
		return 1
	}
	return 0
}
