// Command spine-bench benchmarks a Spine cluster: phases A create, B
// lifecycle (claim, heartbeat, complete) and C mixed, the same as the NATS
// JetStream peer benchmark (shared/peerbench). With --local N it starts a
// cluster of N spine processes on loopback first (the spine binary next to
// this one, or --binary) and stops it after. `spine-bench scale` grows a
// local cluster's queue and times every route, the memory and recovery at
// each size; `spine-bench compare` tabulates runs of two builds
// (scripts/bench-compare.sh), `spine-bench peer` runs of Spine and of the
// NATS peer (scripts/bench-peer.sh). See `spine-bench --help` and
// docs/performance.md.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spine-queue/spine/internal/bench"
	"github.com/spine-queue/spine/internal/timerslack"
)

// The load generator takes the same timer slack as a node (SPINE_TIMER_SLACK,
// default 5ms): it shares the machine with the cluster it measures, and
// without slack its Go runtime's monitor thread alone woke up thousands of
// times a second, CPU the nodes then did not get.
func main() {
	slack := 5 * time.Millisecond
	if v := os.Getenv("SPINE_TIMER_SLACK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Second {
			fmt.Fprintf(os.Stderr, "spine-bench: SPINE_TIMER_SLACK=%q must be a duration from 0 to 1s, such as 5ms\n", v)
			os.Exit(bench.ExitUsage)
		}
		slack = d
	}
	if err := timerslack.Apply(slack); err != nil {
		fmt.Fprintf(os.Stderr, "spine-bench: timer slack not applied (%v); measuring with the inherited one\n", err)
	}
	os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
