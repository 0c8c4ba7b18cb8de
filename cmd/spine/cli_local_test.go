package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
)

// cliRunTokens is cliRun with a local cluster's tokens file.
func cliRunTokens(t *testing.T, env map[string]string, tokensFile string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &cliEnv{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return env[k] }, tokensFile: tokensFile}
	code = runCLI(e, args)
	return code, out.String(), errb.String()
}

// Without --token and SPINE_TOKEN, a client verb uses the HEAD_TOKEN of
// the local cluster's tokens file when it exists; the flag and the
// environment always win over it; a refused token says where it came from.
func TestTokenFallsBackToTheLocalTokensFile(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /jobs/j1": func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer bad" {
				apiError(w, 401, "unauthorized", "bad token")
				return
			}
			answer(200, sampleJob)(w, r)
		},
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.env")
	if err := os.WriteFile(file, []byte("LEFT_CLAW_TOKEN=left-x\nHEAD_TOKEN=head-from-file\nRIGHT_CLAW_TOKEN=right-x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{"SPINE_ADDRS": f.srv.URL}
	withEnvToken := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head-from-env"}
	cases := []struct {
		name  string
		env   map[string]string
		file  string
		args  []string
		token string
	}{
		{"file", addrs, file, nil, "head-from-file"},
		{"env wins over file", withEnvToken, file, nil, "head-from-env"},
		{"flag wins over env and file", withEnvToken, file, []string{"--token", "head-from-flag"}, "head-from-flag"},
		{"no file", addrs, filepath.Join(dir, "missing.env"), nil, ""},
		{"no fallback configured", addrs, "", nil, ""},
	}
	for _, tc := range cases {
		code, _, errOut := cliRunTokens(t, tc.env, tc.file, append([]string{"jobs", "get", "j1"}, tc.args...)...)
		want := ""
		if tc.token != "" {
			want = "Bearer " + tc.token
		}
		if code != exitOK || f.last().auth != want {
			t.Errorf("%s: exit %d (%s), Authorization %q, want %q", tc.name, code, errOut, f.last().auth, want)
		}
	}

	// A refused token names its source.
	bad := filepath.Join(dir, "bad.env")
	if err := os.WriteFile(bad, []byte("HEAD_TOKEN=bad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cliRunTokens(t, addrs, bad, "jobs", "get", "j1")
	if code != exitAuth || !strings.Contains(errOut, "HEAD_TOKEN of "+bad) {
		t.Errorf("refused token from the file: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = cliRunTokens(t, map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "bad"}, "", "jobs", "get", "j1")
	if code != exitAuth || !strings.Contains(errOut, "came from SPINE_TOKEN") {
		t.Errorf("refused token from the environment: exit %d, stderr %q", code, errOut)
	}

	// --token's help says so.
	_, out, _ := cliRun(t, nil, "", "jobs", "get", "--help")
	if !strings.Contains(out, "HEAD_TOKEN from ./data/tokens.env") || !strings.Contains(out, "env SPINE_TOKEN") {
		t.Errorf("--token help does not name its fallback:\n%s", out)
	}
}

// jobs list --local reads from the answering node (the API's stale read);
// --stale still works, hidden, with a deprecation note on stderr.
func TestJobsListLocal(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /jobs": answer(200, `{"jobs":[`+sampleJob+`]}`),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	code, _, errOut := cliRun(t, env, "", "jobs", "list", "--local")
	if code != exitOK || f.last().query != "stale=true" || errOut != "" {
		t.Fatalf("--local: exit %d query %q stderr %q", code, f.last().query, errOut)
	}
	code, out, errOut := cliRun(t, env, "", "jobs", "list", "--stale")
	if code != exitOK || f.last().query != "stale=true" || !strings.Contains(errOut, "deprecated") || !strings.Contains(errOut, "--local") ||
		strings.Contains(out, "deprecated") {
		t.Fatalf("--stale: exit %d query %q stdout %q stderr %q", code, f.last().query, out, errOut)
	}
	if code, _, _ := cliRun(t, env, "", "jobs", "list"); code != exitOK || f.last().query != "" {
		t.Fatalf("plain list: exit %d query %q", code, f.last().query)
	}
	_, help, _ := cliRun(t, nil, "", "jobs", "list", "--help")
	if !strings.Contains(help, "--local") || strings.Contains(help, "--stale") {
		t.Fatalf("jobs list --help shows --stale or lacks --local:\n%s", help)
	}
}

// After a transfer the old leader answers before the election is over, so
// with no leader; transfer-leader waits until a status names the new one.
func TestTransferLeaderWaitsForTheNewLeader(t *testing.T) {
	const (
		withLeader = `{"leader":{"id":"%s","http_addr":"http://127.0.0.1:1"},"nodes":[],"node_id":"n1","state":"Follower"}`
		noLeader   = `{"leader":{"id":"","http_addr":""},"nodes":[],"node_id":"n1","state":"Follower"}`
	)
	var polls atomic.Int32
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /cluster/transfer-leader": answer(200, noLeader),
		"GET /cluster/status": func(w http.ResponseWriter, r *http.Request) {
			switch n := polls.Add(1); {
			case n == 1: // before the transfer
				answer(200, strings.Replace(withLeader, "%s", "n1", 1))(w, r)
			case n == 2:
				answer(200, noLeader)(w, r)
			case n == 3: // not yet heard of the new one
				answer(200, strings.Replace(withLeader, "%s", "n1", 1))(w, r)
			default:
				answer(200, strings.Replace(withLeader, "%s", "n2", 1))(w, r)
			}
		},
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	code, out, errOut := cliRun(t, env, "", "cluster", "transfer-leader", "-o", "table")
	if code != exitOK || leaderRow(out) != "n2" || polls.Load() != 4 {
		t.Fatalf("exit %d after %d polls, stderr %q:\n%s", code, polls.Load(), errOut, out)
	}

	// A bounded wait: a leader never known prints the latest status and a note.
	polls.Store(0)
	f2 := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /cluster/transfer-leader": answer(200, noLeader),
		"GET /cluster/status":           answer(200, noLeader),
	})
	code, out, errOut = cliRun(t, map[string]string{"SPINE_ADDRS": f2.srv.URL}, "", "cluster", "transfer-leader", "--wait", "300ms", "-o", "table")
	if code != exitOK || leaderRow(out) != "-" || !strings.Contains(errOut, "no new leader known") {
		t.Fatalf("exit %d stderr %q:\n%s", code, errOut, out)
	}
}

// leaderRow is the leader's id in a cluster status table.
func leaderRow(table string) string {
	f := strings.Fields(strings.SplitN(table, "\n", 2)[0])
	if len(f) < 2 || f[0] != "LEADER" {
		return ""
	}
	return f[1]
}

// spine version is the stamped version, else the VCS revision go build
// recorded, else dev.
func TestVersionString(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "1169194c0ffee1234567890abcdef1234567890a"}}
	dirty := append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	clean := append(rev[:2:2], debug.BuildSetting{Key: "vcs.modified", Value: "false"})
	cases := []struct {
		stamped  string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.0", dirty, "v1.2.0"},
		{"v1.2.0-3-g1169194-dirty", nil, "v1.2.0-3-g1169194-dirty"},
		{"dev", clean, "dev-1169194c0ffe"},
		{"", dirty, "dev-1169194c0ffe-dirty"},
		{"dev", nil, "dev"},
		{"dev", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, "dev-abc"},
	}
	for _, tc := range cases {
		if got := versionString(tc.stamped, tc.settings); got != tc.want {
			t.Errorf("versionString(%q, %v) = %q, want %q", tc.stamped, tc.settings, got, tc.want)
		}
	}
}
