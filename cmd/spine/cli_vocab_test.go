package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A complete repeated after its answer was printed names the same attempt
// and lease as the first, so the server answers it as the first (the
// worker contract's idempotent complete); the same for fail. The kept
// lease is marked finished, and a later claim removes finished leases
// older than a week, never a running one.
func TestDevqRepeatedCompleteNamesTheSameAttempt(t *testing.T) {
	done := strings.Replace(sampleTask, `"running"`, `"done"`, 1)
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /api/claim":                answer(200, sampleTask),
		"POST /api/tasks/tsk_1/complete": answer(200, done),
		"POST /api/tasks/tsk_1/fail":     answer(200, done),
	})
	leases := t.TempDir()
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "left", "SPINE_LEASE_DIR": leases}
	if code, _, errOut := cliRun(t, env, "", "claim", "--stream=auth"); code != exitOK {
		t.Fatalf("claim: exit %d %q", code, errOut)
	}
	var outs []string
	for i := 0; i < 2; i++ {
		code, out, errOut := cliRun(t, env, "", "complete", "tsk_1", "--result", `{"summary":"done"}`)
		if code != exitOK {
			t.Fatalf("complete %d: exit %d %q", i+1, code, errOut)
		}
		if r := f.last(); r.body["lease_token"] != "tok-1" || r.body["attempt_id"] != "att-1" {
			t.Fatalf("complete %d sent %v: not the claim's attempt and lease", i+1, r.body)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Fatalf("the repeat printed another answer:\n%s\n%s", outs[0], outs[1])
	}
	if code, _, errOut := cliRun(t, env, "", "fail", "tsk_1", "--error", "boom"); code != exitOK {
		t.Fatalf("fail: exit %d %q", code, errOut)
	}
	if r := f.last(); r.body["lease_token"] != "tok-1" || r.body["attempt_id"] != "att-1" {
		t.Fatalf("fail sent %v", r.body)
	}

	// Pruning: an old finished lease goes at the next claim; an old running
	// one, and a recent finished one, stay.
	old := time.Now().Add(-8 * 24 * time.Hour)
	write := func(name, body string, at time.Time) string {
		p := filepath.Join(leases, name+".json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldFinished := write("tsk_old", `{"lease_token":"a","attempt_id":"b","finished":true}`, old)
	oldRunning := write("tsk_long", `{"lease_token":"c","attempt_id":"d"}`, old)
	recent := write("tsk_recent", `{"lease_token":"e","attempt_id":"f","finished":true}`, time.Now())
	if code, _, errOut := cliRun(t, env, "", "claim", "--stream=auth"); code != exitOK {
		t.Fatalf("claim: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(oldFinished); !os.IsNotExist(err) {
		t.Fatalf("an old finished lease was kept: %v", err)
	}
	for _, p := range []string{oldRunning, recent} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}

// spine stream stats shows the cancelled jobs of a stream in its own
// column: a stream holding only cancelled jobs reads no longer all zeros.
func TestStreamStatsShowsCancelled(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /streams": answer(200, `{"streams":[{"name":"ml","queued":0,"running":0,"done":0,"failed":0,"dead":0,"cancelled":3,"paused":false}]}`),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head"}
	code, out, errOut := cliRun(t, env, "", "stream", "stats", "-o", "table")
	if code != exitOK {
		t.Fatalf("exit %d %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("stream stats: %q", out)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	col := -1
	for i, h := range head {
		if h == "CANCELLED" {
			col = i
		}
	}
	if col < 0 || col >= len(row) || row[col] != "3" || row[0] != "ml" {
		t.Fatalf("no cancelled column with 3:\n%s", out)
	}
}

// A join refused for its gossip proof: the API's message names its field,
// and spine cluster join adds the flag that makes it.
func TestClusterJoinNamesTheGossipKeyFlag(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /cluster/join": func(w http.ResponseWriter, r *http.Request) {
			apiError(w, 403, "forbidden", "the joining node does not hold a gossip key of this cluster: gossip_proof must be made with one of the cluster's gossip keys (the joining node's own, when it asks to join)")
		},
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head"}
	code, _, errOut := cliRun(t, env, "", "cluster", "join", "--node-id", "n4", "--raft-addr", "127.0.0.1:1")
	if code == exitOK || !strings.Contains(errOut, "gossip_proof") || !strings.Contains(errOut, "--gossip-key") {
		t.Fatalf("exit %d %q", code, errOut)
	}
}
