package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// A create carries its rate limit; Rates reads GET /rates.
func TestRateLimitCreateAndRates(t *testing.T) {
	var body map[string]any
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jobs":
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &body)
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"a","status":"queued","rateLimit":{"key":"k","limit":2,"periodSeconds":0.5}}`)
		case "/rates":
			io.WriteString(w, `{"rates":[{"key":"k","limit":2,"periodSeconds":0.5,"tokens":0,"nextAt":"2026-01-02T03:04:05Z","waiting":3}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := newTestClient(t, []string{srv.URL})
	j, err := c.JobCreate(context.Background(), &JobCreateParams{Payload: []byte(`1`), RateLimit: &RateLimit{Key: "k", Limit: 2, PeriodSeconds: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if rl, _ := body["rateLimit"].(map[string]any); rl["key"] != "k" || rl["limit"] != float64(2) || rl["periodSeconds"] != 0.5 {
		t.Fatalf("sent %v", body)
	}
	if j.RateLimit == nil || j.RateLimit.Key != "k" {
		t.Fatalf("job %+v", j)
	}
	rates, err := c.Rates(context.Background())
	if err != nil || len(rates) != 1 || rates[0].Key != "k" || rates[0].Waiting != 3 || rates[0].NextAt.IsZero() || rates[0].PeriodSeconds != 0.5 {
		t.Fatalf("rates %+v %v", rates, err)
	}
}
