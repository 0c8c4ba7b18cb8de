package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// A create's rateLimit: bad ones are refused in the API's terms and
// change nothing; a good one shows on the job; jobs over the rate stay
// queued while other jobs are claimed; GET /streams counts them and GET
// /rates shows the key's bucket.
func TestRateLimitCreateAndStats(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	for _, bad := range []string{
		`{"key":"k","limit":0,"periodSeconds":1}`,
		`{"key":"k","limit":-1,"periodSeconds":1}`,
		`{"key":"k","limit":1000001,"periodSeconds":1}`,
		`{"key":"k","limit":1,"periodSeconds":0}`,
		`{"key":"k","limit":1,"periodSeconds":-5}`,
		`{"key":"k","limit":1,"periodSeconds":604801}`,
		`{"key":"k","limit":1,"periodSeconds":1e300}`,
		`{"key":"k","limit":1,"periodSeconds":1,"burst":-1}`,
		`{"key":"a b","limit":1,"periodSeconds":1}`,
		`{"limit":1,"periodSeconds":1}`,
		`{"key":"k","limit":1,"periodSeconds":1,"window":3}`,
		`{"key":"k","limit":"2","periodSeconds":1}`,
		`[]`,
	} {
		r := e.do("POST", "/jobs", headTok, `{"payload":1,"rateLimit":`+bad+`}`)
		m := r.apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := fmt.Sprint(m["error"]); containsAny(msg, "fsm.", "RateLimit{", "PeriodNanos", "queue.") {
			t.Errorf("%s: refusal speaks Go: %s", bad, msg)
		}
	}
	if r := e.do("GET", "/rates", headTok, nil); r.Code != 200 || string(r.Body) != "{\"rates\":[]}\n" {
		t.Fatalf("rates after refused creates: %d %s", r.Code, r.Body)
	}

	var ids []string
	for range 4 {
		j := e.create(map[string]any{"stream": "api", "priority": 10, "rateLimit": map[string]any{"key": "vendor", "limit": 2, "periodSeconds": 60, "burst": 2}})
		rl, _ := j["rateLimit"].(map[string]any)
		if rl["key"] != "vendor" || rl["limit"] != float64(2) || rl["periodSeconds"] != float64(60) || rl["burst"] != float64(2) {
			t.Fatalf("job's rateLimit: %v", j["rateLimit"])
		}
		ids = append(ids, j["id"].(string))
	}
	plain := e.create(map[string]any{"stream": "api"})["id"].(string)
	var got []string
	for i := range 4 {
		c := e.workerClaim(leftTok, fmt.Sprintf(`{"worker_id":"w%d","streams":["api"]}`, i))
		if c["claimed"] == true {
			got = append(got, c["job_id"].(string))
		}
	}
	if len(got) != 3 || got[0] != ids[0] || got[1] != ids[1] || got[2] != plain {
		t.Fatalf("claimed %v; want the burst of two, then the plain job (jobs %v, plain %s)", got, ids, plain)
	}
	// A stream whose only queued jobs wait on a closed rate is not offered
	// to a claim that found nothing elsewhere.
	var wc api.WorkerClaim
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "w9", Streams: []string{"empty"}}), &wc)
	if wc.Claimed || len(wc.Elsewhere) != 0 {
		t.Fatalf("a claim on an empty stream was pointed at %+v (stream api holds only rate-limited jobs)", wc)
	}
	// A claim by id of a job its rate holds back is refused.
	e.do("POST", "/jobs/"+ids[2]+"/claim", leftTok, nil).apiErr(t, http.StatusConflict, api.CodeNotYetClaimable)

	var st api.StreamInfo
	if r := e.do("GET", "/streams/api", headTok, nil); r.Code != 200 || json.Unmarshal(r.Body, &st) != nil || st.RateLimited != 2 {
		t.Fatalf("stream api: %d %s", r.Code, r.Body)
	}
	var sys api.SystemState
	if r := e.do("GET", "/v1/state", headTok, nil); r.Code != 200 || json.Unmarshal(r.Body, &sys) != nil || len(sys.Queues) != 1 ||
		sys.Queues[0].Stream != "api" || sys.Queues[0].Queued != 2 || sys.Queues[0].RateLimited != 2 {
		t.Fatalf("system state: %d %s", r.Code, r.Body)
	}
	var rates api.RateList
	if r := e.do("GET", "/rates", rightTok, nil); r.Code != 200 || json.Unmarshal(r.Body, &rates) != nil {
		t.Fatalf("rates: %d %s", r.Code, r.Body)
	}
	if len(rates.Rates) != 1 || rates.Rates[0].Key != "vendor" || rates.Rates[0].Tokens != 0 || rates.Rates[0].NextAt.IsZero() || rates.Rates[0].Waiting != 2 {
		t.Fatalf("rates: %+v", rates)
	}
	// The dashboard shows the jobs waiting on a rate and the key's bucket.
	ck := uiLogin(t, e, headTok)
	page := string(e.page("GET", "/ui/", ck, "").Body)
	for _, want := range []string{`2 waiting on a rate`, `<tr data-key="vendor">`, `2 per 1m0s, burst 2`} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if page := string(e.page("GET", "/ui/tasks/"+ids[2], ck, "").Body); !strings.Contains(page, `key vendor: 2 per 1m0s, burst 2`) {
		t.Errorf("task page lacks the job's rate:\n%s", page)
	}
	if r := e.do("GET", "/metrics", headTok, nil); r.Code != 200 || !containsAny(string(r.Body), `spine_jobs_rate_limited{stream="api"} 2`) {
		t.Fatalf("metrics lack the rate-limited gauge:\n%s", r.Body)
	}
}

// A stream's default rateLimit: refused when bad, shown on the stream,
// given to the jobs created there without one.
func TestRateLimitStreamDefault(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	put := func(body string) resp { return e.do("PUT", "/streams/ml/defaults", headTok, body) }
	for _, bad := range []string{`{"rateLimit":{"key":"k","limit":0,"periodSeconds":1}}`, `{"rateLimit":{"key":"k","limit":1,"periodSeconds":9e9}}`,
		`{"rateLimit":{"key":"k","limit":1,"periodSeconds":1,"extra":1}}`, `{"rateLimit":null}`} {
		put(bad).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}
	e.do("PUT", "/streams/ml/defaults", leftTok, `{"rateLimit":{"key":"k","limit":1,"periodSeconds":1}}`).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	var st api.StreamInfo
	if r := put(`{"rateLimit":{"key":"ml-api","limit":5,"periodSeconds":1.5}}`); r.Code != 200 || json.Unmarshal(r.Body, &st) != nil {
		t.Fatalf("put: %d %s", r.Code, r.Body)
	}
	if d := st.Defaults; d == nil || d.RateLimit == nil || d.RateLimit.Key != "ml-api" || d.RateLimit.PeriodSeconds != 1.5 {
		t.Fatalf("defaults: %+v", st.Defaults)
	}
	ck := uiLogin(t, e, headTok)
	e.create(map[string]any{"stream": "ml"})
	if page := string(e.page("GET", "/ui/", ck, "").Body); !strings.Contains(page, `rate ml-api: 5 per 1.5s`) && !strings.Contains(page, `rate 5 per 1.5s, burst 5`) {
		t.Errorf("dashboard lacks the stream's default rate:\n%s", page)
	}
	j := e.create(map[string]any{"stream": "ml"})
	if rl, _ := j["rateLimit"].(map[string]any); rl["key"] != "ml-api" || rl["limit"] != float64(5) {
		t.Fatalf("job in ml: %v", j)
	}
}

// Below the cluster level that has rate limits, a create with one is
// refused while the upgrade is under way.
func TestRateLimitNeedsTheLevel(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelTagged))
	e.fc.setSupported(fsm.LevelTagged) // a node runs a build before rate limits
	e.do("POST", "/jobs", headTok, `{"payload":1,"rateLimit":{"key":"k","limit":1,"periodSeconds":1}}`).apiErr(t, http.StatusServiceUnavailable, api.CodeUpgradeInProgress)
	e.do("PUT", "/streams/s/defaults", headTok, `{"rateLimit":{"key":"k","limit":1,"periodSeconds":1}}`).apiErr(t, http.StatusServiceUnavailable, api.CodeUpgradeInProgress)
	if r := e.do("GET", "/jobs", headTok, nil); r.Code != 200 || containsAny(string(r.Body), `"id"`) {
		t.Fatalf("jobs after refused creates: %d %s", r.Code, r.Body)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
