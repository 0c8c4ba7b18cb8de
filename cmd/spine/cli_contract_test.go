package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --result-schema takes JSON inline or a file, on a create and on a
// stream's defaults; a complete refused for its result prints every
// mismatch and exits as a bad request.
func TestResultSchemaFlagsAndMismatches(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /jobs":               answer(201, sampleJob),
		"PUT /streams/ml/defaults": answer(200, `{"name":"ml","jobs":{},"defaults":{"resultSchema":{"type":"object"}}}`),
		"POST /jobs/j1/complete": answer(400, `{"error":{"code":"result_mismatch","message":"complete refused: the result does not match",`+
			`"mismatches":[{"path":"/n","expected":"type integer","got":"type string"},{"path":"","expected":"x","got":"y"}]}}`),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head-tok"}
	code, _, errOut := cliRun(t, env, "", "jobs", "create", "--payload", `1`, "--result-schema", `{"type":"object"}`)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := fmt.Sprint(f.last().body["resultSchema"]); got != "map[type:object]" {
		t.Fatalf("inline schema sent as %s", got)
	}
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(`{"required":["n"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cliRun(t, env, "", "jobs", "create", "--payload", `1`, "--result-schema", file); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := fmt.Sprint(f.last().body["resultSchema"]); got != "map[required:[n]]" {
		t.Fatalf("file schema sent as %s", got)
	}
	for _, bad := range []string{`{"type":`, filepath.Join(t.TempDir(), "missing.json")} {
		if code, _, _ := cliRun(t, env, "", "jobs", "create", "--payload", `1`, "--result-schema", bad); code != exitUsage {
			t.Fatalf("%s: exit %d", bad, code)
		}
	}
	if code, _, errOut := cliRun(t, env, "", "stream", "defaults", "ml", "--result-schema", file); code != exitOK {
		t.Fatalf("stream defaults: exit %d: %s", code, errOut)
	}
	if got := fmt.Sprint(f.last().body["resultSchema"]); got != "map[required:[n]]" {
		t.Fatalf("default schema sent as %s", got)
	}
	code, out, errOut := cliRun(t, env, "", "jobs", "complete", "j1", "--result", `{"n":"x"}`)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "/n: expected type integer, got type string") ||
		!strings.Contains(errOut, "(the whole result): expected x, got y") {
		t.Fatalf("refused complete: exit %d stderr %q", code, errOut)
	}
}
