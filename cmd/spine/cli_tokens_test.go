package main

import (
	"net/http"
	"strings"
	"testing"
)

func TestTokenVerbs(t *testing.T) {
	tok := `{"name":"indexer","role":"left_claw","streams":["ml"],"workerId":"w1","createdAt":"2026-01-02T03:04:05Z","createdBy":"head"}`
	f := newFakeAPI(t, map[string]func(w http.ResponseWriter, r *http.Request){
		"POST /v1/tokens":           answer(201, strings.TrimSuffix(tok, "}")+`,"secret":"spt_abc"}`),
		"GET /v1/tokens":            answer(200, `{"tokens":[`+tok+`],"max":1000}`),
		"DELETE /v1/tokens/indexer": answer(200, tok),
		"GET /v1/whoami":            answer(200, `{"role":"left_claw","token":"indexer","workerId":"w1"}`),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head-tok"}
	code, out, errOut := cliRun(t, env, "", "token", "create", "indexer", "--role", "left_claw", "--stream", "ml",
		"--worker-id", "w1", "--expires-in", "90m", "--note", "nightly", "--output", "table")
	if code != exitOK || !strings.Contains(out, "spt_abc") || !strings.Contains(out, "indexer") {
		t.Fatalf("create: exit %d, %s %s", code, out, errOut)
	}
	r := f.last()
	if r.body["name"] != "indexer" || r.body["role"] != "left_claw" || r.body["workerId"] != "w1" || r.body["expiresInSeconds"] != float64(5400) ||
		r.body["note"] != "nightly" || len(r.body["streams"].([]any)) != 1 {
		t.Fatalf("create request %+v", r)
	}
	if code, out, _ := cliRun(t, env, "", "token", "list", "--output", "table"); code != exitOK || !strings.Contains(out, "indexer") || !strings.Contains(out, "w1") {
		t.Fatalf("list: %d %s", code, out)
	}
	if code, _, _ := cliRun(t, env, "", "token", "revoke", "indexer"); code != exitOK || f.last().method != "DELETE" {
		t.Fatalf("revoke: %d %+v", code, f.last())
	}
	if code, out, _ := cliRun(t, env, "", "token", "whoami", "--output", "table"); code != exitOK || !strings.Contains(out, "indexer") {
		t.Fatalf("whoami: %d %s", code, out)
	}
	for _, args := range [][]string{{"create", "x"}, {"create"}, {"create", "x", "--role", "head", "--expires-in", "-1h"}, {"revoke"}} {
		if code, _, _ := cliRun(t, env, "", "token", args...); code != exitUsage {
			t.Errorf("%v: exit %d, want a usage error", args, code)
		}
	}
}
