package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/spine-queue/spine/client"
)

// fakeNode stands in for a Spine node in the examples: it knows one job.
func fakeNode() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"job-1","stream":"default","payload":{"prompt":"hi"},"status":"queued","attempts":0,"maxAttempts":5,"idempotencyKey":%q}`,
			r.Header.Get("Idempotency-Key"))
	})
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"code":"not_found","message":"job %s not found"}}`, r.PathValue("id"))
	})
	return httptest.NewServer(mux)
}

func ExampleClient_JobCreate() {
	srv := fakeNode()
	defer srv.Close()

	c, err := client.New([]string{srv.URL}, client.WithToken("head-token"))
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.JobCreate(context.Background(), &client.JobCreateParams{
		Payload:        json.RawMessage(`{"prompt":"hi"}`),
		IdempotencyKey: "order-17",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.ID, job.Status, job.IdempotencyKey, job.Duplicate)
	// Output: job-1 queued order-17 false
}

func ExampleAPIError() {
	srv := fakeNode()
	defer srv.Close()

	c, _ := client.New([]string{srv.URL})
	_, err := c.JobGet(context.Background(), "nope")
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code, errors.Is(err, client.ErrNotFound))
	}
	// Output: 404 not_found true
}

func ExampleWorker() {
	c, err := client.New([]string{"http://127.0.0.1:36725", "http://127.0.0.1:36726"},
		client.WithToken("left-claw-token"),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 8, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second, MaxElapsed: 20 * time.Second}))
	if err != nil {
		log.Fatal(err)
	}
	w := client.NewWorker(c, client.WorkerConfig{
		WorkerID:    "w-1",
		Streams:     []string{"high", "default"},
		Concurrency: 4,
		Handler: func(ctx context.Context, claim *client.WorkerClaim) (json.RawMessage, error) {
			var in struct{ Prompt string }
			if err := json.Unmarshal(claim.Payload, &in); err != nil {
				// Not worth retrying: the payload will not get better.
				return nil, &client.JobError{Code: "bad_payload", Message: err.Error()}
			}
			return json.Marshal(map[string]string{"echo": in.Prompt})
		},
	})
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
