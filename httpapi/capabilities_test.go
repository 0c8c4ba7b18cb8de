package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
)

// A job that requires capabilities is handed only to a claim that has
// them: a worker without them passes over it (and is not pointed at its
// stream as "elsewhere"), a claim by id is refused with the job, and the
// stream lists it as unmatched until a worker with them claims.
func TestCapabilitiesOverHTTP(t *testing.T) {
	e := newEnv(t)
	decodeAs := func(r resp, v any) {
		t.Helper()
		if r.Code != http.StatusOK && r.Code != http.StatusCreated {
			t.Fatalf("status %d: %s", r.Code, r.Body)
		}
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	var gpu api.Job
	decodeAs(e.do("POST", "/jobs", headTok, map[string]any{"stream": "ml", "payload": 1, "requires": []string{"gpu:a100", "gpu"}}), &gpu)
	if !slices.Equal(gpu.Requires, []string{"gpu", "gpu:a100"}) {
		t.Fatalf("requires %v", gpu.Requires)
	}
	// Bad lists are refused and create nothing.
	for _, bad := range []any{[]string{"has space"}, []string{""}, []string{"a,b"}, make([]string, 17)} {
		e.do("POST", "/jobs", headTok, map[string]any{"stream": "ml", "payload": 1, "requires": bad}).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}
	e.do("POST", "/jobs", headTok, map[string]any{"stream": "ml", "payload": 1, "requires": []int{1}}).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	e.do("POST", "/internal/worker/claim", leftTok, map[string]any{"worker_id": "w", "capabilities": []string{"a,b"}}).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)

	var list api.StreamList
	decodeAs(e.do("GET", "/streams", leftTok, nil), &list)
	if len(list.Streams) != 1 || list.Streams[0].Queued != 1 || len(list.Streams[0].Unmatched) != 1 ||
		!slices.Equal(list.Streams[0].Unmatched[0].Requires, gpu.Requires) || list.Streams[0].Unmatched[0].Jobs != 1 {
		t.Fatalf("streams before any gpu worker: %+v", list.Streams)
	}

	// The system state and the dashboard say so too.
	var st api.SystemState
	decodeAs(e.do("GET", "/v1/state", headTok, nil), &st)
	if len(st.Queues) != 1 || len(st.Queues[0].Unmatched) != 1 || st.Queues[0].Unmatched[0].Jobs != 1 {
		t.Fatalf("system state queues %+v", st.Queues)
	}
	if page := e.page("GET", "/ui/", uiLogin(t, e, headTok), ""); !strings.Contains(string(page.Body), "1 needs gpu, gpu:a100: no live worker has it") {
		t.Fatalf("the dashboard does not show the unmatched job:\n%s", page.Body)
	}

	var wc api.WorkerClaim
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "cpu", Streams: []string{"ml"}}), &wc)
	if wc.Claimed {
		t.Fatalf("a worker without capabilities got %s", wc.JobID)
	}
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "cpu", Streams: []string{"etl"}, Capabilities: []string{"gpu"}}), &wc)
	if wc.Claimed || len(wc.Elsewhere) != 0 {
		t.Fatalf("a worker with gpu but not gpu:a100 was pointed at %+v", wc)
	}
	er := e.do("POST", "/jobs/"+gpu.ID+"/claim", leftTok, api.JobClaimRequest{Capabilities: []string{"gpu"}}).apiErr(t, http.StatusConflict, api.CodeMissingCapability)
	if j, _ := er["job"].(map[string]any); j["id"] != gpu.ID || j["status"] != "queued" {
		t.Fatalf("error.job = %v", er["job"])
	}

	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "big", Streams: []string{"etl"}, Capabilities: []string{"gpu:a100", "gpu", "lang:go"}}), &wc)
	if wc.Claimed || len(wc.Elsewhere) != 1 || wc.Elsewhere[0].Name != "ml" {
		t.Fatalf("a worker that could take the job was not pointed at its stream: %+v", wc)
	}
	var ml api.StreamInfo
	decodeAs(e.do("GET", "/streams/ml", rightTok, nil), &ml)
	if len(ml.Unmatched) != 0 {
		t.Fatalf("still unmatched after a gpu:a100 worker claimed: %+v", ml)
	}
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "big", Streams: []string{"ml"}, Capabilities: []string{"gpu:a100", "gpu", "lang:go"}}), &wc)
	if !wc.Claimed || wc.JobID != gpu.ID {
		t.Fatalf("the capable worker's claim: %+v", wc)
	}
}

// A worker that releases a job with not_for_me is not handed it again;
// another worker is, at once.
func TestReleaseNotForMeOverHTTP(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]any{"stream": "s"})["id"].(string)
	a := e.workerClaim(leftTok, `{"worker_id":"w1","streams":["s"]}`)
	if a["job_id"] != id {
		t.Fatalf("claim %v", a)
	}
	ack := e.do("POST", "/internal/worker/release", leftTok, map[string]any{"worker_id": "w1", "job_id": id, "lease_token": a["lease_token"],
		"reason": "needs a gpu", "not_for_me": true}).json(t)
	if ack["status"] != "queued" || ack["requeued"] != true {
		t.Fatalf("release %v", ack)
	}
	if a := e.workerClaim(leftTok, `{"worker_id":"w1","streams":["s"]}`); a["claimed"] != false {
		t.Fatalf("w1 was handed it again: %v", a)
	}
	if a := e.workerClaim(rightTok, `{"worker_id":"w2","streams":["s"]}`); a["job_id"] != id {
		t.Fatalf("w2's claim %v", a)
	}
	if j := e.do("GET", "/jobs/"+id, headTok, nil).json(t); fmt.Sprint(j["notFor"]) != "[w1]" {
		t.Fatalf("job notFor %v", j["notFor"])
	}
}
