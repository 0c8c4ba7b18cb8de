// Package layers holds the tests of the project's shape: rules about
// files and imports that no single package can check for itself
// (docs/design.md, "Layers").
package layers

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines bounds a production Go file: past it, a file holds more
// than one concern, and the next feature is harder to place.
const maxFileLines = 500

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// No production Go file is over maxFileLines lines.
func TestNoProductionFileOverTheLimit(t *testing.T) {
	dir := root(t)
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			rel, _ := filepath.Rel(dir, path)
			t.Errorf("%s has %d lines, over %d: split it by concern", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The Go client is what users import: it depends on the API contract
// (api/...) and nothing else of the project.
func TestClientImportsOnlyTheAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/spine-queue/spine/client").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p := sc.Text()
		if strings.HasPrefix(p, "github.com/spine-queue/spine") && p != "github.com/spine-queue/spine/client" &&
			p != "github.com/spine-queue/spine/api" && !strings.HasPrefix(p, "github.com/spine-queue/spine/api/") {
			t.Errorf("client depends on %s", p)
		}
	}
}

// The HTTP API reaches the replication layer through an interface
// (httpapi.Cluster) and the vocabulary of cluster/clusterinfo: it imports
// neither package cluster nor raft.
func TestHTTPAPIImportsNoClusterOrRaft(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "github.com/spine-queue/spine/httpapi").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/spine-queue/spine/cluster" || p == "github.com/hashicorp/raft" || strings.HasPrefix(p, "github.com/hashicorp/raft/") {
			t.Errorf("httpapi imports %s: reach the cluster through httpapi.Cluster and cluster/clusterinfo", p)
		}
	}
}

// The service layer asks one question before it uses newer behaviour: the
// cluster's level (queue/level.go, fsm/level.go). No production file of
// package queue gates on a command type.
func TestQueueGatesOnTheLevelOnly(t *testing.T) {
	dir := filepath.Join(root(t), "queue")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, gate := range []string{"AllServersApply(", "allApply(", "LevelGate("} {
			if bytes.Contains(b, []byte(gate)) {
				t.Errorf("queue/%s calls %s: ask the cluster's level (atLevel) instead", filepath.Base(f), strings.TrimSuffix(gate, "("))
			}
		}
	}
}
