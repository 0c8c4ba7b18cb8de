package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// apiLongPages: a page of jobs far past 64 KiB (sent in chunks, from
// handler to socket) reads the same through the Go client's mux
// connection as over plain HTTP, on the leader and on the followers, also
// while many long and short answers share the connection.
func apiLongPages(t *testing.T, c *testcluster.Cluster) {
	stream := apiUnique("long")
	pad := strings.Repeat("p", 1500)
	const n = 200
	ids := make(map[string]bool, n)
	for i := range n {
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", c.Nodes[i%len(c.Nodes)].URL+"/jobs", apiHead,
			map[string]any{"stream": stream, "payload": map[string]any{"i": i, "pad": pad, "html": "<&>"}}), http.StatusCreated), &j)
		ids[j.ID] = true
	}
	apiCaughtUp(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, node := range c.Nodes {
		// The leader's view, over HTTP: what every node must answer.
		var want api.JobList
		apiDecode(t, apiWant(t, apiDo(t, "GET", node.URL+"/jobs?consistent&limit=1000&stream="+stream, apiHead, nil), http.StatusOK), &want)
		if len(want.Jobs) != n {
			t.Fatalf("%s over HTTP: %d jobs, want %d", node.ID, len(want.Jobs), n)
		}
		wantJSON, _ := json.Marshal(want)
		if len(wantJSON) < 4*(64<<10) {
			t.Fatalf("a page of %d bytes is too short to go in chunks", len(wantJSON))
		}
		cl, err := client.New([]string{node.URL}, client.WithToken(apiHead), client.WithTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 3; k++ {
					got, err := cl.JobList(ctx, &client.JobListParams{Stream: stream, Limit: 1000})
					if err != nil {
						errs <- node.ID + ": " + err.Error()
						return
					}
					if b, _ := json.Marshal(got); !bytes.Equal(b, wantJSON) {
						errs <- node.ID + ": the page over the mux differs from the page over HTTP"
						return
					}
					// A short answer on the same connection between long ones.
					if j, err := cl.JobGet(ctx, want.Jobs[k].ID); err != nil || !ids[j.ID] {
						errs <- node.ID + ": short answer between long ones: " + errString(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "wrong job"
	}
	return err.Error()
}
