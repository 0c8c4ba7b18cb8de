package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/spine-queue/spine/fsm"
)

// buildInfo is what `spine version` prints: the release, the build, and
// what the state machine of this build applies and writes, which is what
// decides whether it can join a cluster in a rolling upgrade.
type buildInfo struct {
	Version   string `json:"version"`
	Go        string `json:"go"`
	Module    string `json:"module,omitempty"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	Commands  int    `json:"commands"`         // the newest command type it applies
	Level     int    `json:"level"`            // the highest cluster level it supports
	Snapshots int    `json:"snapshot_version"` // the newest snapshot version it writes and reads
}

// versionString is the version spine reports: the one the linker stamped
// (make build stamps git describe --tags --always --dirty), else, for a
// plain go build or go install from a git checkout, the commit it was
// built from ("dev-" and 12 hex digits, "-dirty" with uncommitted
// changes), else "dev".
func versionString(stamped string, settings []debug.BuildSetting) string {
	if stamped != "" && stamped != "dev" {
		return stamped
	}
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}

// currentVersion is versionString of this binary.
func currentVersion() string {
	var settings []debug.BuildSetting
	if bi, ok := debug.ReadBuildInfo(); ok {
		settings = bi.Settings
	}
	return versionString(version, settings)
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: currentVersion(), Commands: int(fsm.LatestCommand()), Level: fsm.LatestLevel, Snapshots: fsm.SnapshotVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Go, b.Module = bi.GoVersion, bi.Main.Path+" "+bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	return b
}

func versionCommand(env *cliEnv) *cobra.Command {
	asJSON := false
	c := &cobra.Command{
		Use: "version", Short: "Print the version, the build, and the commands, cluster level and snapshot version the state machine applies",
		Long: `Print the version, the build, and the commands, cluster level and snapshot version the state machine applies.

The version is the one "make build" stamped (git describe --tags --always --dirty);
a binary built with plain "go build" from a git checkout reports the commit it was
built from, as dev-<12 hex digits>[-dirty]. Before a rolling upgrade, compare the
state machine lines of the old and the new binary: the cluster level is the
highest this build supports; a cluster runs at the highest level every one of its
nodes supports (GET /cluster/status shows the level in force and each node's).`,
		Example: "  spine version\n  spine version --json",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			b := readBuildInfo()
			if asJSON {
				enc := json.NewEncoder(env.stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(b)
				return
			}
			printBuildInfo(env.stdout, b)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func printBuildInfo(w io.Writer, b buildInfo) {
	fmt.Fprintln(w, "spine", b.Version)
	fmt.Fprintln(w, "  go              ", b.Go)
	if b.Module != "" {
		fmt.Fprintln(w, "  module          ", b.Module)
	}
	if b.Revision != "" {
		mod := ""
		if b.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(w, "  commit           %s %s%s\n", b.Revision, b.Time, mod)
	}
	fmt.Fprintf(w, "  state machine    applies commands up to %d, cluster level up to %d, snapshots up to version %d\n", b.Commands, b.Level, b.Snapshots)
}
