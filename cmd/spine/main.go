// Command spine is the Spine server and operator CLI in one binary. The
// benchmark is its own command, spine-bench, so that the server links none
// of its load generator or process harness.
package main

import "os"

// version is set by the linker: make build passes
// -ldflags "-X main.version=$(git describe --tags --always --dirty)".
// Unstamped, spine version reports the VCS revision instead (version.go).
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	env, stop := osEnv()
	defer stop()
	return runCLI(env, args)
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
