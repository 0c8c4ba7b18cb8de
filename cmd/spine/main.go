// Command spine is the Spine server and operator CLI in one binary. The
// benchmark is its own command, spine-bench, so that the server links none
// of its load generator or process harness.
package main

import (
	"fmt"
	"os"
)

const usage = `spine — a replicated job queue for AI-agent workers

Usage:
  spine serve [flags]                 start one node (see: spine serve --help)
  spine cluster status|join|remove|transfer-leader [flags]
  spine jobs create|list|get|events|attempts|claim|heartbeat|complete|fail|release|comment|redrive [flags]
  spine blobs put|get [flags]
  spine version

Common client flags: --addr URL (repeatable or CSV; env SPINE_ADDRS), --token TOKEN (env SPINE_TOKEN),
--output json|table. Run any subcommand with --help for its flags.
`

// version is set by the linker in release builds.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:])
	case "cluster":
		return runCluster(args[1:])
	case "jobs":
		return runJobs(args[1:])
	case "blobs":
		return runBlobs(args[1:])
	case "bench":
		fmt.Fprintln(os.Stderr, "spine: the benchmark is its own command: spine-bench (make bench builds and runs it)")
		return exitUsage
	case "version", "--version":
		fmt.Println("spine", version)
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "spine: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// Exit codes shared by every subcommand.
const (
	exitOK          = 0
	exitError       = 1 // anything else
	exitUsage       = 2 // bad flags or arguments
	exitNotFound    = 3
	exitConflict    = 4 // illegal transition, stale lease, not owner
	exitUnavailable = 5 // no leader, outcome unknown, network
	exitAuth        = 6 // unauthorized or forbidden
)
