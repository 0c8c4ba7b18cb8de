package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// The registry over HTTP: a new id is 201, a re-registration 200 that
// keeps the registration time; bad input is 400 and changes nothing; a
// worker of an unknown gateway is 404; deregistering a gateway takes its
// workers. Gateways are head's to change; a worker id is its role's.
func TestGatewayAndWorkerRegistration(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	decodeAs := func(r resp, v any) {
		t.Helper()
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	gw := api.GatewayRegisterRequest{ID: "gw-1", Address: "http://10.0.0.7:7000", Metadata: map[string]string{"zone": "eu-1"}, Capacity: 4}
	r := e.do("POST", "/v1/gateways", headTok, gw)
	var g api.Gateway
	decodeAs(r, &g)
	if r.Code != 201 || g.Health != api.HealthHealthy || g.Metadata["zone"] != "eu-1" || len(g.Workers) != 0 {
		t.Fatalf("register: %d %s", r.Code, r.Body)
	}
	for _, tok := range []string{leftTok, rightTok} {
		e.do("POST", "/v1/gateways", tok, api.GatewayRegisterRequest{ID: "gw-c", Address: "http://10.0.0.9:7000", Capacity: 1}).apiErr(t, 403, api.CodeForbidden)
		e.do("DELETE", "/v1/gateways/gw-1", tok, nil).apiErr(t, 403, api.CodeForbidden)
		e.do("POST", "/v1/gateways/gw-1/heartbeat", tok, nil).apiErr(t, 403, api.CodeForbidden)
	}
	gw.Capacity = 6
	r = e.do("POST", "/v1/gateways", headTok, gw)
	var g2 api.Gateway
	decodeAs(r, &g2)
	if r.Code != 200 || g2.Capacity != 6 || !g2.RegisteredAt.Equal(g.RegisteredAt) {
		t.Fatalf("re-register: %d %s", r.Code, r.Body)
	}
	for _, bad := range []api.GatewayRegisterRequest{
		{ID: "gw-2", Address: "10.0.0.8:7000", Capacity: 1},
		{ID: "gw-2", Address: "http://10.0.0.8", Capacity: 0},
		{ID: "bad id", Address: "http://10.0.0.8", Capacity: 1},
	} {
		e.do("POST", "/v1/gateways", headTok, bad).apiErr(t, 400, api.CodeInvalidRequest)
	}
	e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-9", Capacity: 1}).apiErr(t, 404, api.CodeNotFound)
	e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-1", Capacity: 1, Capabilities: []string{"no spaces"}}).apiErr(t, 400, api.CodeInvalidRequest)
	r = e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-1", Capacity: 2, Capabilities: []string{"gpu", "bash", "gpu"}})
	var w api.Worker
	decodeAs(r, &w)
	if r.Code != 201 || len(w.Capabilities) != 2 || w.Capabilities[0] != "bash" {
		t.Fatalf("worker: %d %s", r.Code, r.Body)
	}
	// w-1 is the right claw's now: the left claw may not change it.
	e.do("POST", "/v1/workers", leftTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-1", Capacity: 9}).apiErr(t, 403, api.CodeWorkerIDTaken)
	e.do("POST", "/v1/workers/w-1/heartbeat", leftTok, nil).apiErr(t, 403, api.CodeWorkerIDTaken)
	e.do("DELETE", "/v1/workers/w-1", leftTok, nil).apiErr(t, 403, api.CodeWorkerIDTaken)
	if r := e.do("POST", "/v1/workers/w-1/heartbeat", rightTok, nil); r.Code != 200 {
		t.Fatalf("the owner's heartbeat: %d %s", r.Code, r.Body)
	}
	var list api.GatewayList
	decodeAs(e.do("GET", "/v1/gateways", headTok, nil), &list)
	if len(list.Gateways) != 1 || len(list.Gateways[0].Workers) != 1 || list.Gateways[0].WorkerCapacity != 2 {
		t.Fatalf("gateways: %+v", list)
	}
	var gone api.GatewayDeregistered
	r = e.do("DELETE", "/v1/gateways/gw-1", headTok, nil)
	decodeAs(r, &gone)
	if r.Code != 200 || gone.Gateway.ID != "gw-1" || len(gone.Workers) != 1 || gone.Workers[0].ID != "w-1" {
		t.Fatalf("deregister: %d %s", r.Code, r.Body)
	}
	e.do("GET", "/v1/workers/w-1", headTok, nil).apiErr(t, 404, api.CodeNotFound)
	e.do("DELETE", "/v1/gateways/gw-1", headTok, nil).apiErr(t, 404, api.CodeNotFound)
	var workers api.WorkerList
	decodeAs(e.do("GET", "/v1/workers", headTok, nil), &workers)
	if len(workers.Workers) != 0 {
		t.Fatalf("workers after the gateway left: %+v", workers)
	}
}

// A push gateway over HTTP: it needs a claw role; its secret, given or
// generated, is answered once and never shown in a view; an update that
// does not say how keeps push; bad delivery fields are 400 and change
// nothing; below cluster level 2 push is 503 upgrade_in_progress.
func TestPushGatewayRegistration(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	var g api.Gateway
	r := e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gp", Address: "http://10.0.0.7:7000/tasks", Capacity: 2,
		Delivery: "push", Role: fsm.RoleLeftClaw})
	if err := json.Unmarshal(r.Body, &g); err != nil || r.Code != 201 || g.Delivery != "push" || g.Role != fsm.RoleLeftClaw || len(g.Secret) != 64 {
		t.Fatalf("register push: %d %s", r.Code, r.Body)
	}
	secret := g.Secret
	for _, path := range []string{"/v1/gateways/gp", "/v1/gateways", "/v1/state"} {
		if r := e.do("GET", path, headTok, nil); r.Code != 200 || strings.Contains(string(r.Body), secret) {
			t.Fatalf("GET %s shows the secret: %d %s", path, r.Code, r.Body)
		}
	}
	// An update without delivery keeps push, the role and the secret, and
	// shows no secret.
	r = e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gp", Address: "http://10.0.0.8:7000/tasks", Capacity: 3})
	g = api.Gateway{}
	if err := json.Unmarshal(r.Body, &g); err != nil || r.Code != 200 || g.Delivery != "push" || g.Role != fsm.RoleLeftClaw || g.Secret != "" {
		t.Fatalf("update: %d %s", r.Code, r.Body)
	}
	if e.srv.queue.Local().Gateway("gp").Secret != secret {
		t.Fatal("an update changed the secret")
	}
	// A secret of the operator's own is answered once too.
	mine := "0123456789abcdef-mine"
	r = e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gp", Address: "http://10.0.0.8:7000/tasks", Capacity: 3,
		Delivery: "push", Role: fsm.RoleRightClaw, Secret: mine})
	if g = (api.Gateway{}); json.Unmarshal(r.Body, &g) != nil || g.Secret != mine || g.Role != fsm.RoleRightClaw {
		t.Fatalf("new secret: %d %s", r.Code, r.Body)
	}
	for _, bad := range []api.GatewayRegisterRequest{
		{ID: "gq", Address: "http://h", Capacity: 1, Delivery: "push"},
		{ID: "gq", Address: "http://h", Capacity: 1, Delivery: "push", Role: fsm.HeadRole},
		{ID: "gq", Address: "http://h", Capacity: 1, Delivery: "carrier-pigeon"},
		{ID: "gq", Address: "http://h", Capacity: 1, Delivery: "pull", Role: fsm.RoleLeftClaw},
		{ID: "gq", Address: "http://h", Capacity: 1, Role: fsm.RoleLeftClaw},
		{ID: "gq", Address: "http://h", Capacity: 1, Delivery: "push", Role: fsm.RoleLeftClaw, Secret: "short"},
	} {
		e.do("POST", "/v1/gateways", headTok, bad).apiErr(t, 400, api.CodeInvalidRequest)
	}
	e.do("GET", "/v1/gateways/gq", headTok, nil).apiErr(t, 404, api.CodeNotFound)
	// Pull by name turns pushing off.
	r = e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gp", Address: "http://10.0.0.8:7000", Capacity: 3, Delivery: "pull"})
	if g = (api.Gateway{}); json.Unmarshal(r.Body, &g) != nil || g.Delivery != "pull" || g.Role != "" {
		t.Fatalf("to pull: %d %s", r.Code, r.Body)
	}

	old := newEnv(t, atLevel(fsm.LevelIdentity))
	old.fc.setSupported(fsm.LevelIdentity) // a node runs a build before delivery
	old.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gp", Address: "http://h", Capacity: 1, Delivery: "push",
		Role: fsm.RoleLeftClaw}).apiErr(t, 503, api.CodeUpgradeInProgress)
	if r := old.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gp", Address: "http://h", Capacity: 1}); r.Code != 201 {
		t.Fatalf("a pull gateway below the level: %d %s", r.Code, r.Body)
	}
}

// The read models: /v1/agents lists registered workers with what they
// run and other claimants holding leases; /v1/tasks/next names what a
// claim would take and changes nothing; /v1/state puts it together with
// the queues.
func TestReadModels(t *testing.T) {
	e := newEnv(t)
	decodeAs := func(r resp, v any) {
		t.Helper()
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gw-1", Address: "http://10.0.0.7:7000", Capacity: 2})
	e.do("POST", "/v1/workers", leftTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-1", Capacity: 1})
	first := e.create(map[string]interface{}{"stream": "ml"})
	second := e.create(map[string]interface{}{"stream": "ml"})

	e.do("GET", "/v1/tasks/next?streams=ml", leftTok, nil).apiErr(t, 400, api.CodeInvalidRequest)
	for i := 0; i < 2; i++ {
		// The task API's view, as GET /v1/tasks/{id} answers it: its state
		// in the task vocabulary, max_attempts, not the v0 job's maxAttempts.
		var next api.ControlTask
		r := e.do("GET", "/v1/tasks/next?agent_id=w-1&streams=ml", leftTok, nil)
		decodeAs(r, &next)
		if r.Code != 200 || next.ID != first["id"] || next.State != api.StateQueued || next.MaxAttempts == 0 ||
			strings.Contains(string(r.Body), `"maxAttempts"`) {
			t.Fatalf("next (look %d): %d %s", i, r.Code, r.Body)
		}
		if byID := e.do("GET", "/v1/tasks/"+next.ID, leftTok, nil); string(byID.Body) != string(r.Body) {
			t.Fatalf("next and the task by id differ:\n%s\n%s", r.Body, byID.Body)
		}
	}
	if r := e.do("GET", "/v1/tasks/next?agent_id=w-1&streams=empty", leftTok, nil); r.Code != 204 {
		t.Fatalf("next of an empty stream: %d %s", r.Code, r.Body)
	}
	for _, w := range []string{"w-1", "visitor"} {
		if r := e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: w, Streams: []string{"ml"}}); r.Code != 200 {
			t.Fatalf("claim by %s: %d %s", w, r.Code, r.Body)
		}
	}
	var agents api.AgentList
	decodeAs(e.do("GET", "/v1/agents", headTok, nil), &agents)
	if len(agents.Agents) != 2 {
		t.Fatalf("agents: %s", e.do("GET", "/v1/agents", headTok, nil).Body)
	}
	w1, visitor := agents.Agents[0], agents.Agents[1]
	if w1.ID != "w-1" || !w1.Registered || w1.Gateway != "gw-1" || w1.Health != api.HealthHealthy || len(w1.Tasks) != 1 || w1.Tasks[0].JobID != first["id"] {
		t.Fatalf("w-1: %+v", w1)
	}
	if visitor.ID != "visitor" || visitor.Registered || len(visitor.Tasks) != 1 || visitor.Tasks[0].JobID != second["id"] {
		t.Fatalf("visitor: %+v", visitor)
	}
	e.create(map[string]interface{}{"stream": "ml"})
	var st api.SystemState
	decodeAs(e.do("GET", "/v1/state", headTok, nil), &st)
	if len(st.Gateways) != 1 || len(st.Agents) != 2 || len(st.Queues) != 1 || st.Queues[0].Stream != "ml" ||
		st.Queues[0].Queued != 1 || st.Queues[0].Running != 2 || st.Jobs["running"] != 2 || st.Jobs["queued"] != 1 || st.NodeID == "" {
		t.Fatalf("state: %+v", st)
	}
}

// Routing over HTTP: a queued job goes to the least loaded healthy
// gateway; with none able to take it the answer is 503
// no_healthy_gateway and the job is unchanged; a worker of the gateway
// claims it, a worker of another gateway does not.
func TestRouteOverHTTP(t *testing.T) {
	e := newEnv(t)
	decodeAs := func(r resp, v any) {
		t.Helper()
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	job := e.create(map[string]interface{}{"stream": "gpu-work"})
	e.do("POST", "/v1/tasks/route", headTok, api.RouteRequest{JobID: job["id"].(string)}).apiErr(t, 503, api.CodeNoHealthyGateway)
	e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gw-a", Address: "http://10.0.0.1:7000", Capacity: 1})
	e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gw-b", Address: "http://10.0.0.2:7000", Capacity: 1})
	e.do("POST", "/v1/workers", leftTok, api.WorkerRegisterRequest{ID: "wa", Gateway: "gw-a", Capacity: 1})
	e.do("POST", "/v1/workers", leftTok, api.WorkerRegisterRequest{ID: "wb", Gateway: "gw-b", Capacity: 1, Capabilities: []string{"gpu"}})
	e.do("POST", "/v1/tasks/route", leftTok, api.RouteRequest{JobID: job["id"].(string)}).apiErr(t, 403, api.CodeForbidden)
	e.do("POST", "/v1/tasks/route", headTok, api.RouteRequest{}).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/v1/tasks/route", headTok, api.RouteRequest{JobID: "nope"}).apiErr(t, 404, api.CodeNotFound)
	var routed api.RouteAnswer
	r := e.do("POST", "/v1/tasks/route", headTok, api.RouteRequest{JobID: job["id"].(string), Capabilities: []string{"gpu"}})
	decodeAs(r, &routed)
	if r.Code != 200 || routed.Gateway.ID != "gw-b" || string(routed.Job.Target) != "gw-b" {
		t.Fatalf("route: %d %s", r.Code, r.Body)
	}
	other := e.create(map[string]interface{}{"stream": "gpu-work"})
	e.do("POST", "/v1/tasks/route", headTok, api.RouteRequest{JobID: other["id"].(string), Capabilities: []string{"gpu"}}).apiErr(t, 503, api.CodeNoHealthyGateway)
	// A claw sees the routed job; the dry run for gw-b's worker names it.
	if r := e.do("GET", "/jobs/"+job["id"].(string), leftTok, nil); r.Code != 200 {
		t.Fatalf("a claw reading the routed job: %d %s", r.Code, r.Body)
	}
	var next api.ControlTask
	decodeAs(e.do("GET", "/v1/tasks/next?agent_id=wb&streams=gpu-work", leftTok, nil), &next)
	if next.ID != job["id"] {
		t.Fatalf("next for wb: %+v", next)
	}
	// wa (gw-a) takes the unrouted job, not gw-b's; wb takes gw-b's.
	var a api.WorkerClaim
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "wa", Streams: []string{"gpu-work"}}), &a)
	if !a.Claimed || a.JobID != other["id"] {
		t.Fatalf("wa claimed %+v", a)
	}
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "wb", Streams: []string{"gpu-work"}}), &a)
	if !a.Claimed || a.JobID != job["id"] {
		t.Fatalf("wb claimed %+v", a)
	}
}
