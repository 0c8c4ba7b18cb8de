// Package systemtest runs real three-process Spine clusters on loopback.
package systemtest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spine-queue/spine/internal/testcluster"
)

// binary is the spine executable built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spine-systemtest-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = testcluster.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startCluster starts a cluster for one test and stops it (by pid) at the end,
// printing the nodes' logs if the test failed.
func startCluster(t *testing.T, nodes int, env map[string]string) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: t.TempDir(), Nodes: nodes, Env: env, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Log(c.Logs(6000))
		}
	})
	return c
}

// A node that exits while the cluster forms fails the start at once, with
// its log, instead of leaving the caller to wait out the start timeout.
func TestClusterStartReportsANodeThatExits(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	_, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: t.TempDir(), Nodes: 3,
		Env: map[string]string{"LEASE_SECONDS": "-5"}, Logf: t.Logf})
	if err == nil {
		t.Fatal("a cluster of nodes that refuse their configuration started")
	}
	if msg := err.Error(); !strings.Contains(msg, "exited while the cluster was forming") || !strings.Contains(msg, "LEASE_SECONDS") {
		t.Fatalf("start error does not name the exit and its cause:\n%v", err)
	}
}
