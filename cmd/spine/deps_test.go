package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The server binary links none of the project's tooling: the benchmark,
// its process harness and its HTTP client live in spine-bench.
func TestServerLinksNoTooling(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/bench", "/internal/testcluster", "/internal/drill", "/internal/chaos", "valyala/fasthttp"} {
			if strings.HasSuffix(dep, banned) || strings.Contains(dep, banned+"/") {
				t.Errorf("cmd/spine depends on %s", dep)
			}
		}
	}
}
