package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/spine-queue/spine/api"
)

// The registry over HTTP: a new id is 201, a re-registration 200 that
// keeps the registration time; bad input is 400 and changes nothing; a
// worker of an unknown gateway is 404; deregistering a gateway takes its
// workers.
func TestGatewayAndWorkerRegistration(t *testing.T) {
	e := newEnv(t)
	decodeAs := func(r resp, v any) {
		t.Helper()
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	gw := api.GatewayRegisterRequest{ID: "gw-1", Address: "http://10.0.0.7:7000", Metadata: map[string]string{"zone": "eu-1"}, Capacity: 4}
	r := e.do("POST", "/v1/gateways", leftTok, gw)
	var g api.Gateway
	decodeAs(r, &g)
	if r.Code != 201 || g.Health != api.HealthHealthy || g.Metadata["zone"] != "eu-1" || len(g.Workers) != 0 {
		t.Fatalf("register: %d %s", r.Code, r.Body)
	}
	gw.Capacity = 6
	r = e.do("POST", "/v1/gateways", leftTok, gw)
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
		e.do("POST", "/v1/gateways", leftTok, bad).apiErr(t, 400, api.CodeInvalidRequest)
	}
	e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-9", Capacity: 1}).apiErr(t, 404, api.CodeNotFound)
	e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-1", Capacity: 1, Capabilities: []string{"no spaces"}}).apiErr(t, 400, api.CodeInvalidRequest)
	r = e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "w-1", Gateway: "gw-1", Capacity: 2, Capabilities: []string{"gpu", "bash", "gpu"}})
	var w api.Worker
	decodeAs(r, &w)
	if r.Code != 201 || len(w.Capabilities) != 2 || w.Capabilities[0] != "bash" {
		t.Fatalf("worker: %d %s", r.Code, r.Body)
	}
	var list api.GatewayList
	decodeAs(e.do("GET", "/v1/gateways", headTok, nil), &list)
	if len(list.Gateways) != 1 || len(list.Gateways[0].Workers) != 1 || list.Gateways[0].WorkerCapacity != 2 {
		t.Fatalf("gateways: %+v", list)
	}
	var gone api.GatewayDeregistered
	r = e.do("DELETE", "/v1/gateways/gw-1", leftTok, nil)
	decodeAs(r, &gone)
	if r.Code != 200 || gone.Gateway.ID != "gw-1" || len(gone.Workers) != 1 || gone.Workers[0].ID != "w-1" {
		t.Fatalf("deregister: %d %s", r.Code, r.Body)
	}
	e.do("GET", "/v1/workers/w-1", headTok, nil).apiErr(t, 404, api.CodeNotFound)
	e.do("DELETE", "/v1/gateways/gw-1", leftTok, nil).apiErr(t, 404, api.CodeNotFound)
	var workers api.WorkerList
	decodeAs(e.do("GET", "/v1/workers", headTok, nil), &workers)
	if len(workers.Workers) != 0 {
		t.Fatalf("workers after the gateway left: %+v", workers)
	}
}
