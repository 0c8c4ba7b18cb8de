package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkRequestPath serves the requests of one job's life through the
// handler, the service and the state machine of one node (no Raft): a
// head's create, a worker's claim and its complete, the three requests the
// lifecycle benchmark sends per job. Its allocations per job are the
// request path's share of the node's malloc and GC work; run with
// -benchmem.
func BenchmarkRequestPath(b *testing.B) {
	e := newEnv(b, atLevel(3))
	payload := `{"t":1700000000000000000,"i":12345,"pad":"` + strings.Repeat("x", 200) + `"}`
	create := []byte(`{"stream":"bench","payload":` + payload + `}`)
	claim := []byte(`{"worker_id":"w1","streams":["bench"],"max_wait_ms":0}`)
	send := func(method, path, token string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	var c struct {
		JobID      string `json:"job_id"`
		AttemptID  string `json:"attempt_id"`
		LeaseToken string `json:"lease_token"`
		Stream     string `json:"stream"`
		MessageID  string `json:"message_id"`
	}
	for _, phase := range []string{"create", "claim", "complete"} {
		b.Run(phase, func(b *testing.B) {
			if phase != "create" {
				// Jobs to claim (and, for complete, leases to complete),
				// made outside the timer.
				b.StopTimer()
				for i := 0; i < b.N; i++ {
					if rec := send(http.MethodPost, "/jobs", headTok, create); rec.Code != http.StatusCreated {
						b.Fatalf("create: %d %s", rec.Code, rec.Body)
					}
				}
				b.StartTimer()
			}
			var refs [][]byte
			if phase == "complete" {
				b.StopTimer()
				for i := 0; i < b.N; i++ {
					rec := send(http.MethodPost, "/internal/worker/claim", leftTok, claim)
					if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || c.JobID == "" {
						b.Fatalf("claim: %d %s", rec.Code, rec.Body)
					}
					refs = append(refs, []byte(`{"worker_id":"w1","job_id":"`+c.JobID+`","lease_token":"`+c.LeaseToken+
						`","attempt_id":"`+c.AttemptID+`","stream":"`+c.Stream+`","message_id":"`+c.MessageID+`","result":{"ok":true}}`))
				}
				b.StartTimer()
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var rec *httptest.ResponseRecorder
				switch phase {
				case "create":
					rec = send(http.MethodPost, "/jobs", headTok, create)
				case "claim":
					rec = send(http.MethodPost, "/internal/worker/claim", leftTok, claim)
				default:
					rec = send(http.MethodPost, "/internal/worker/complete", leftTok, refs[i])
				}
				if rec.Code >= 300 {
					b.Fatalf("%s %d: %d %s", phase, i, rec.Code, rec.Body)
				}
			}
			_ = strconv.Itoa
		})
	}
}
