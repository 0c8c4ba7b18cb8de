package main

import (
	"os"

	"github.com/spine-queue/spine/internal/bench"
)

// runBench is `spine bench`: see internal/bench and `spine bench --help`.
func runBench(args []string) int {
	return bench.Main(args, os.Stdout, os.Stderr, os.Getenv)
}
