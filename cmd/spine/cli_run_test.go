package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spine run against a cluster with nothing to watch (no session, or
// sessions without a stream) lists nothing, says how to create a session
// and a stream, and exits 0; it started nothing, so it says nothing about
// stopping. With streams and nothing queued, the list says so in its title.
func TestRunWithNothingToWatch(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		code         int
		want, not    []string
	}{
		{"no session", `{"sessions":[],"streams":[]}`, exitOK,
			[]string{"No session to watch yet", "spine session create NAME", "spine stream create STREAM --session NAME"},
			[]string{"Sessions", "keeps running", "export"}},
		{"a session without a stream", `{"sessions":[{"name":"s1","status":"active","streams":[]}],"streams":[]}`, exitOK,
			[]string{"No session to watch yet"}, []string{"Sessions", "s1"}},
		{"nothing queued", `{"sessions":[{"name":"s1","status":"active","streams":["a"]}],"streams":[{"name":"a","session":"s1","status":"active","queued":0}]}`, exitUsage,
			[]string{"Sessions (nothing queued):", "1. s1 (1 streams, nothing queued)", "Select session"}, []string{"Sessions with queued tasks", "No session"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
				"GET /health":     answer(200, `{"status":"ok","leader_id":"n1"}`),
				"GET /api/status": answer(200, tc.status),
			})
			dir := t.TempDir()
			var out, errb bytes.Buffer
			env := &cliEnv{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
				getenv: func(k string) string {
					return map[string]string{"SPINE_ADDRS": api.srv.URL, "SPINE_TOKEN": "head", "XDG_STATE_HOME": dir}[k]
				}}
			code := runCLI(env, []string{"run", "--data", filepath.Join(dir, "data"), "--config", filepath.Join(dir, "spine.yml")})
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("stdout has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// The record of the data dirs spine run used: ./data needs none; another
// is recorded once per directory, found by spine stop run there and only
// there, and forgotten once nothing spine run started is left in it.
func TestRunDirsRecord(t *testing.T) {
	state, project, other := t.TempDir(), t.TempDir(), t.TempDir()
	env := &cliEnv{getenv: func(k string) string { return map[string]string{"XDG_STATE_HOME": state}[k] }}
	t.Chdir(project)
	if err := rememberRunDir(env, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(runsFile(env)); err == nil {
		t.Fatal("./data was recorded")
	}
	far := filepath.Join(other, "spine-data")
	for range 2 {
		if err := rememberRunDir(env, far); err != nil {
			t.Fatal(err)
		}
	}
	if got := runDirs(env, "data"); len(got) != 2 || got[0] != "data" || got[1] != far {
		t.Fatalf("runDirs = %v, want data and %s", got, far)
	}
	// Something left under it: kept.
	if err := os.MkdirAll(far, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(far, "spine.lock"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	forgetRunDirs(env, runDirs(env, "data"))
	if got := runDirs(env, "data"); len(got) != 2 {
		t.Fatalf("forgotten while its lock is there: %v", got)
	}
	t.Chdir(other)
	if got := runDirs(env, "data"); len(got) != 1 {
		t.Fatalf("another directory finds %v", got)
	}
	t.Chdir(project)
	os.Remove(filepath.Join(far, "spine.lock"))
	forgetRunDirs(env, runDirs(env, "data"))
	if got := runDirs(env, "data"); len(got) != 1 {
		t.Fatalf("still recorded with nothing left: %v", got)
	}
	if _, err := os.Stat(runsFile(env)); err == nil {
		t.Fatal("an empty record file is left")
	}
}
