package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spine-queue/spine/internal/bench"
)

// runBench is `spine bench`: see internal/bench and `spine bench --help`.
//
// The load generator takes the same timer slack as a node (SPINE_TIMER_SLACK,
// default 5ms): it shares the machine with the cluster it measures, and
// without slack its Go runtime's monitor thread alone woke up thousands of
// times a second, CPU the nodes then did not get.
func runBench(args []string) int {
	slack := 5 * time.Millisecond
	if v := os.Getenv("SPINE_TIMER_SLACK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Second {
			fmt.Fprintf(os.Stderr, "spine bench: SPINE_TIMER_SLACK=%q must be a duration from 0 to 1s, such as 5ms\n", v)
			return exitUsage
		}
		slack = d
	}
	if err := applyTimerSlack(slack); err != nil {
		fmt.Fprintf(os.Stderr, "spine bench: timer slack not applied (%v); measuring with the inherited one\n", err)
	}
	return bench.Main(args, os.Stdout, os.Stderr, os.Getenv)
}
