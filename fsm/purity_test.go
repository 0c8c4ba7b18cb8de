package fsm

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPure fails if the state machine's own code imports anything that reads
// the clock, a random source, the environment or the network: Apply must be a
// function of the log alone.
func TestPure(t *testing.T) {
	banned := map[string]bool{"time": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true,
		"os": true, "net": true, "net/http": true, "syscall": true}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if banned[p] {
				t.Errorf("%s imports %q: the FSM must not read clocks, randomness, environment or network", name, p)
			}
		}
	}
}
