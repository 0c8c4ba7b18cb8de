package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/spine-queue/spine"

// nonStdDeps lists the packages pkg depends on (itself included) that are
// not in the standard library.
func nonStdDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Skipf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// The contract imports only the standard library: a program that speaks the
// API pulls in nothing of the server.
func TestAPIImportsOnlyStandardLibrary(t *testing.T) {
	for _, pkg := range []string{module + "/api", module + "/api/wire"} {
		for _, dep := range nonStdDeps(t, pkg) {
			if dep != pkg {
				t.Errorf("%s depends on %s, which is not in the standard library", pkg, dep)
			}
		}
	}
}

// The client is what a user copies into their worker: of this module it
// imports the contract and its framing, nothing internal and nothing of the
// server.
func TestClientImportsNoInternalPackage(t *testing.T) {
	allowed := map[string]bool{module + "/client": true, module + "/api": true, module + "/api/wire": true}
	for _, dep := range nonStdDeps(t, module+"/client") {
		if strings.Contains(dep, "/internal/") || strings.HasSuffix(dep, "/internal") {
			t.Errorf("client depends on internal package %s", dep)
		}
		if (dep == module || strings.HasPrefix(dep, module+"/")) && !allowed[dep] {
			t.Errorf("client depends on %s; of this module it may import only api and api/wire", dep)
		}
	}
}
