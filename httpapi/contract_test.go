package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

const contractSchema = `{"type":"object","required":["answer","score"],"additionalProperties":false,
 "properties":{"answer":{"type":"string","minLength":1},"score":{"type":"integer","minimum":0,"maximum":10}}}`

const contractCanonical = `{"additionalProperties":false,"properties":{"answer":{"minLength":1,"type":"string"},"score":{"maximum":10,"minimum":0,"type":"integer"}},"required":["answer","score"],"type":"object"}`

// mismatches decodes the "mismatches" of an error object.
func mismatches(t *testing.T, e map[string]interface{}) []api.ResultMismatch {
	t.Helper()
	b, _ := json.Marshal(e["mismatches"])
	var ms []api.ResultMismatch
	if err := json.Unmarshal(b, &ms); err != nil {
		t.Fatalf("mismatches: %v: %s", err, b)
	}
	return ms
}

var wantMismatches = []api.ResultMismatch{
	{Path: "/extra", Expected: "no property not named in properties", Got: "present"},
	{Path: "/score", Expected: "a required property", Got: "missing"},
}

func refusedEvents(t *testing.T, e *env, id string) []map[string]interface{} {
	t.Helper()
	r := e.do("GET", "/jobs/"+id+"/events", headTok, nil)
	if r.Code != 200 {
		t.Fatalf("events: %d %s", r.Code, r.Body)
	}
	var out []map[string]interface{}
	for _, ev := range r.json(t)["events"].([]interface{}) {
		if m := ev.(map[string]interface{}); m["type"] == fsm.EventCompleteRefused.String() {
			out = append(out, m)
		}
	}
	return out
}

// A schema outside the subset, or malformed, is refused at create naming
// the keyword, and nothing is created; a good one is stored canonical and
// shown on the job.
func TestResultSchemaAtCreate(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	for _, bad := range []struct{ schema, words string }{
		{`{"oneOf":[]}`, `"oneOf"`},
		{`{"properties":{"a":{"$ref":"#"}}}`, `"$ref" (at /properties/a)`},
		{`{"type":"nope"}`, "not a valid schema"},
		{`5`, "must be a JSON object"},
		{`{"description":"` + strings.Repeat("x", 17<<10) + `"}`, "over the limit"},
	} {
		r := e.do("POST", "/jobs", headTok, `{"payload":1,"resultSchema":`+bad.schema+`}`)
		er := r.apiErr(t, http.StatusBadRequest, api.CodeUnsupportedSchema)
		if msg := er["message"].(string); !strings.Contains(msg, bad.words) {
			t.Fatalf("%.40s: message %q", bad.schema, msg)
		}
	}
	if r := e.do("GET", "/jobs", headTok, nil); len(r.json(t)["jobs"].([]interface{})) != 0 {
		t.Fatalf("a refused create made a job: %s", r.Body)
	}
	j := e.create(map[string]interface{}{"resultSchema": json.RawMessage(contractSchema)})
	if b, _ := json.Marshal(j["resultSchema"]); string(b) != contractCanonical {
		t.Fatalf("resultSchema in the view: %s", b)
	}
	if j := e.create(map[string]interface{}{"resultSchema": nil}); j["resultSchema"] != nil {
		t.Fatalf("a null resultSchema: %v", j["resultSchema"])
	}
}

// The v0 API: the claim shows the schema; a complete that does not match
// is refused with every mismatch, the job stays running under the same
// lease and records the refusal; the same lease then completes.
func TestResultContractV0(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	id := e.create(map[string]interface{}{"resultSchema": json.RawMessage(contractSchema)})["id"].(string)
	c := e.claim(id, leftTok)
	if b, _ := json.Marshal(c["resultSchema"]); string(b) != contractCanonical {
		t.Fatalf("resultSchema in the claim: %s", b)
	}
	tok := c["leaseToken"].(string)
	body := fmt.Sprintf(`{"leaseToken":%q,"result":{"answer":"x","extra":true}}`, tok)
	er := e.do("POST", "/jobs/"+id+"/complete", leftTok, body).apiErr(t, http.StatusBadRequest, api.CodeResultMismatch)
	if ms := mismatches(t, er); fmt.Sprint(ms) != fmt.Sprint(wantMismatches) {
		t.Fatalf("mismatches %+v", ms)
	}
	job := er["job"].(map[string]interface{})
	if job["status"] != "running" || job["attemptId"] != c["attemptId"] {
		t.Fatalf("error.job %v", job)
	}
	if j := e.job(id); j.State != fsm.StateRunning || j.Lease == nil || j.Lease.Token != tok || j.Result != nil {
		t.Fatalf("after the refusal: %s %+v", j.State, j.Lease)
	}
	evs := refusedEvents(t, e, id)
	if len(evs) != 1 || !strings.Contains(evs[0]["text"].(string), "2 mismatches: /extra") || evs[0]["attemptId"] != c["attemptId"] {
		t.Fatalf("refusal records %v", evs)
	}
	// A caller without the lease learns nothing of the result.
	e.do("POST", "/jobs/"+id+"/complete", rightTok, `{"result":{}}`).apiErr(t, http.StatusForbidden, api.CodeNotOwner)
	e.do("POST", "/jobs/"+id+"/complete", leftTok, `{"leaseToken":"stale","result":{}}`).apiErr(t, http.StatusConflict, api.CodeStaleLease)
	// The lease still works: a heartbeat, then a matching complete.
	if r := e.do("POST", "/jobs/"+id+"/heartbeat", leftTok, fmt.Sprintf(`{"leaseToken":%q}`, tok)); r.Code != 200 {
		t.Fatalf("heartbeat after the refusal: %d %s", r.Code, r.Body)
	}
	r := e.do("POST", "/jobs/"+id+"/complete", leftTok, fmt.Sprintf(`{"leaseToken":%q,"attemptId":%q,"result":{"answer":"x","score":3}}`, tok, c["attemptId"]))
	if r.Code != 200 || r.json(t)["status"] != "done" {
		t.Fatalf("matching complete: %d %s", r.Code, r.Body)
	}
	// Its repeat is a duplicate, answered as the first.
	if r := e.do("POST", "/jobs/"+id+"/complete", leftTok, fmt.Sprintf(`{"leaseToken":%q,"attemptId":%q,"result":{"answer":"x","score":3}}`, tok, c["attemptId"])); r.Code != 200 {
		t.Fatalf("repeat: %d %s", r.Code, r.Body)
	}
	if n := len(refusedEvents(t, e, id)); n != 1 {
		t.Fatalf("%d refusal records", n)
	}
}

// The worker contract: the claim answers result_schema; a mismatching
// complete is a refusal ({"ok":false}) with every mismatch; the records
// of one attempt stop at the bound while every refusal is still answered.
func TestResultContractWorker(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	id := e.create(map[string]interface{}{"resultSchema": json.RawMessage(contractSchema)})["id"].(string)
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	if a["job_id"] != id {
		t.Fatalf("claim %v", a)
	}
	if b, _ := json.Marshal(a["result_schema"]); string(b) != contractCanonical {
		t.Fatalf("result_schema in the claim: %s", b)
	}
	ref := fmt.Sprintf(`"worker_id":"w-1","job_id":%q,"attempt_id":%q,"lease_token":%q`, id, a["attempt_id"], a["lease_token"])
	for i := range fsm.MaxRefusalsPerAttempt + 3 {
		r := e.do("POST", "/internal/worker/complete", leftTok, `{`+ref+`,"result":{"answer":"x","extra":1}}`)
		er := r.apiErr(t, http.StatusBadRequest, api.CodeResultMismatch)
		if r.json(t)["ok"] != false {
			t.Fatalf("refusal %d: %s", i, r.Body)
		}
		if ms := mismatches(t, er); fmt.Sprint(ms) != fmt.Sprint(wantMismatches) {
			t.Fatalf("refusal %d: mismatches %+v", i, ms)
		}
	}
	if n := len(refusedEvents(t, e, id)); n != fsm.MaxRefusalsPerAttempt {
		t.Fatalf("%d refusal records, want the bound %d", n, fsm.MaxRefusalsPerAttempt)
	}
	// Not a JSON result at all: the schema's type mismatch.
	r := e.do("POST", "/internal/worker/complete", leftTok, `{`+ref+`,"result":[1]}`)
	if ms := mismatches(t, r.apiErr(t, http.StatusBadRequest, api.CodeResultMismatch)); len(ms) != 1 || ms[0].Expected != "type object" {
		t.Fatalf("array result: %+v", ms)
	}
	if r := e.do("POST", "/internal/worker/complete", leftTok, `{`+ref+`,"result":{"answer":"y","score":10}}`); r.Code != 200 || r.json(t)["ok"] != true {
		t.Fatalf("matching complete: %d %s", r.Code, r.Body)
	}
	if j := e.job(id); j.State != fsm.StateDone || string(j.Result) != `{"answer":"y","score":10}` {
		t.Fatalf("job %s %s", j.State, j.Result)
	}
}

// A stream's default schema: set (refused outside the subset), shown,
// written into the jobs created after it without their own, cleared.
func TestResultSchemaStreamDefault(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	put := func(body string) resp { return e.do("PUT", "/streams/ml/defaults", headTok, body) }
	put(`{"resultSchema":{"anyOf":[]}}`).apiErr(t, http.StatusBadRequest, api.CodeUnsupportedSchema)
	put(`{"resultSchema":null}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	r := put(`{"resultSchema":` + contractSchema + `}`)
	var st api.StreamInfo
	if r.Code != 200 || json.Unmarshal(r.Body, &st) != nil || st.Defaults == nil || string(st.Defaults.ResultSchema) != contractCanonical {
		t.Fatalf("put: %d %s", r.Code, r.Body)
	}
	j := e.create(map[string]interface{}{"stream": "ml"})
	if b, _ := json.Marshal(j["resultSchema"]); string(b) != contractCanonical {
		t.Fatalf("defaulted job: %s", b)
	}
	if j := e.create(map[string]interface{}{"stream": "ml", "resultSchema": map[string]any{"type": "string"}}); fmt.Sprint(j["resultSchema"]) != "map[type:string]" {
		t.Fatalf("own schema: %v", j["resultSchema"])
	}
	if j := e.create(map[string]interface{}{"stream": "other"}); j["resultSchema"] != nil {
		t.Fatalf("other stream: %v", j["resultSchema"])
	}
	c := e.claim(j["id"].(string), leftTok)
	er := e.do("POST", "/jobs/"+j["id"].(string)+"/complete", leftTok, fmt.Sprintf(`{"leaseToken":%q,"result":"text"}`, c["leaseToken"])).
		apiErr(t, http.StatusBadRequest, api.CodeResultMismatch)
	if ms := mismatches(t, er); len(ms) != 1 || ms[0].Got != "type string" {
		t.Fatalf("mismatches %+v", ms)
	}
	if r := e.do("DELETE", "/streams/ml/defaults", headTok, nil); r.Code != 200 {
		t.Fatalf("clear: %d %s", r.Code, r.Body)
	}
	if j := e.create(map[string]interface{}{"stream": "ml"}); j["resultSchema"] != nil {
		t.Fatalf("after the clear: %v", j["resultSchema"])
	}
}

// A job without a schema takes any result, as before.
func TestNoResultSchemaTakesAnyResult(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	id := e.create(map[string]interface{}{})["id"].(string)
	c := e.claim(id, leftTok)
	if _, ok := c["resultSchema"]; ok {
		t.Fatalf("a job without a schema shows one: %v", c)
	}
	if r := e.do("POST", "/jobs/"+id+"/complete", leftTok, fmt.Sprintf(`{"leaseToken":%q,"result":[1,"x"]}`, c["leaseToken"])); r.Code != 200 {
		t.Fatalf("complete: %d %s", r.Code, r.Body)
	}
}

// The UI's task view shows the result contract and the refused completes.
func TestUITaskShowsResultContract(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	id := e.create(map[string]interface{}{"resultSchema": json.RawMessage(contractSchema)})["id"].(string)
	c := e.claim(id, leftTok)
	e.do("POST", "/jobs/"+id+"/complete", leftTok, fmt.Sprintf(`{"leaseToken":%q,"result":{}}`, c["leaseToken"])).
		apiErr(t, http.StatusBadRequest, api.CodeResultMismatch)
	page := string(e.page("GET", "/ui/tasks/"+id, uiLogin(t, e, leftTok), "").Body)
	for _, want := range []string{`<h2>Result contract</h2>`, `id="result-schema"`, `&#34;additionalProperties&#34;: false`,
		`<td>complete_refused</td>`, `2 mismatches: /answer: expected a required property`} {
		if !strings.Contains(page, want) {
			t.Fatalf("task page lacks %q:\n%s", want, page)
		}
	}
	plain := e.create(map[string]interface{}{})["id"].(string)
	if page := string(e.page("GET", "/ui/tasks/"+plain, uiLogin(t, e, leftTok), "").Body); strings.Contains(page, "Result contract") {
		t.Fatal("a job without a schema shows a result contract")
	}
}

// Over MCP: head enqueues with a result_schema, the claim shows it, a
// complete that does not match is a tool error listing every mismatch and
// keeps the lease in the session, and a matching one completes.
func TestMCPResultContract(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	head, claw := mcpSession(t, ts.URL, headTok), mcpSession(t, ts.URL, leftTok)
	var schema map[string]any
	if err := json.Unmarshal([]byte(contractSchema), &schema); err != nil {
		t.Fatal(err)
	}
	var enq struct {
		Job struct {
			ID           string         `json:"id"`
			ResultSchema map[string]any `json:"result_schema"`
		} `json:"job"`
	}
	mcpCall(t, head, "enqueue", map[string]any{"payload": map[string]any{"q": 1}, "stream": "mcpc", "result_schema": schema}, &enq)
	if enq.Job.ResultSchema["type"] != "object" {
		t.Fatalf("enqueued job %+v", enq.Job)
	}
	var cl struct {
		Jobs []struct {
			JobID        string         `json:"job_id"`
			ResultSchema map[string]any `json:"result_schema"`
		} `json:"jobs"`
		Next string `json:"next"`
	}
	mcpCall(t, claw, "claim", map[string]any{"streams": []string{"mcpc"}, "wait_seconds": 0}, &cl)
	if len(cl.Jobs) != 1 || cl.Jobs[0].JobID != enq.Job.ID || cl.Jobs[0].ResultSchema["type"] != "object" || !strings.Contains(cl.Next, "result_schema") {
		t.Fatalf("claim %+v", cl)
	}
	res, err := claw.CallTool(context.Background(), &mcp.CallToolParams{Name: "complete",
		Arguments: map[string]any{"job_id": enq.Job.ID, "result": map[string]any{"summary": "s", "answer": "a"}}})
	if err != nil || !res.IsError {
		t.Fatalf("mismatching complete: %v %+v", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"still yours under the same lease", "- /score: expected a required property, got missing",
		"- /summary: expected no property not named in properties, got present"} {
		if !strings.Contains(text, want) {
			t.Fatalf("tool error lacks %q: %s", want, text)
		}
	}
	var view struct {
		ResultSchema map[string]any `json:"result_schema"`
		History      []struct {
			Type string `json:"type"`
		} `json:"history"`
	}
	mcpCall(t, claw, "get_job", map[string]any{"job_id": enq.Job.ID, "history": true}, &view)
	refused := 0
	for _, h := range view.History {
		if h.Type == fsm.EventCompleteRefused.String() {
			refused++
		}
	}
	if view.ResultSchema["type"] != "object" || refused != 1 {
		t.Fatalf("get_job %+v", view)
	}
	var done struct {
		Status string `json:"status"`
	}
	mcpCall(t, claw, "complete", map[string]any{"job_id": enq.Job.ID, "result": map[string]any{"answer": "a", "score": 1}}, &done)
	if done.Status != "done" {
		t.Fatalf("complete %+v", done)
	}
}

// The dashboard marks a stream whose defaults carry a result contract,
// and shows no concurrency default it does not have.
func TestUIDashboardShowsDefaultContract(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	if r := e.do("PUT", "/streams/ml/defaults", headTok, `{"resultSchema":{"type":"object"}}`); r.Code != 200 {
		t.Fatalf("put: %d %s", r.Code, r.Body)
	}
	e.create(map[string]interface{}{"stream": "ml"})
	page := string(e.page("GET", "/ui/", uiLogin(t, e, headTok), "").Body)
	if !strings.Contains(page, `result-contract`) || strings.Contains(page, "per key") {
		t.Fatalf("dashboard:\n%s", page)
	}
}

// The task API's complete keeps the contract too.
func TestResultContractTaskAPI(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelPolicies))
	id := e.create(map[string]interface{}{"resultSchema": json.RawMessage(contractSchema)})["id"].(string)
	a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	step := api.TaskStepRequest{AgentID: "w-1", AttemptID: a["attempt_id"].(string), LeaseToken: a["lease_token"].(string)}
	if r := e.do("POST", "/v1/tasks/"+id+"/start", leftTok, step); r.Code != 200 {
		t.Fatalf("start: %d %s", r.Code, r.Body)
	}
	if r := e.do("GET", "/v1/tasks/"+id, leftTok, nil); r.Code != 200 || r.json(t)["result_schema"] == nil {
		t.Fatalf("task view: %d %s", r.Code, r.Body)
	}
	bad := step
	bad.Result = json.RawMessage(`{"answer":"x","extra":true}`)
	er := e.do("POST", "/v1/tasks/"+id+"/complete", leftTok, bad).apiErr(t, http.StatusBadRequest, api.CodeResultMismatch)
	if ms := mismatches(t, er); fmt.Sprint(ms) != fmt.Sprint(wantMismatches) {
		t.Fatalf("mismatches %+v", ms)
	}
	good := step
	good.Result = json.RawMessage(`{"answer":"x","score":0}`)
	if r := e.do("POST", "/v1/tasks/"+id+"/complete", leftTok, good); r.Code != 200 {
		t.Fatalf("matching complete: %d %s", r.Code, r.Body)
	}
	if j := e.job(id); j.State != fsm.StateDone || fsm.RefusalsOf(j, step.AttemptID) != 1 {
		t.Fatalf("job %s, %d refusals", j.State, fsm.RefusalsOf(j, step.AttemptID))
	}
}
