package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// longPage is a stream of jobs whose one page of all of them is far past
// 64 KiB, so a node sends it in chunks, from handler to socket.
type longPage struct {
	stream string
	jobs   []*api.Job // the page, as the leader answers it over HTTP
	json   []byte     // the page as the Go client decodes and re-encodes it
}

// apiLongPage creates n jobs of about 1.5 KB each on one stream, through
// every node in turn, and reads their page from the leader.
func apiLongPage(t *testing.T, c *testcluster.Cluster, n int) longPage {
	t.Helper()
	p := longPage{stream: apiUnique("long")}
	pad := strings.Repeat("p", 1500)
	for i := range n {
		apiWant(t, apiDo(t, "POST", c.Nodes[i%len(c.Nodes)].URL+"/jobs", apiHead,
			map[string]any{"stream": p.stream, "payload": map[string]any{"i": i, "pad": pad, "html": "<&>"}}), http.StatusCreated)
	}
	apiCaughtUp(t, c)
	var page api.JobList
	apiDecode(t, apiWant(t, apiDo(t, "GET", c.Nodes[0].URL+"/jobs?consistent&limit=1000&stream="+p.stream, apiHead, nil), http.StatusOK), &page)
	if len(page.Jobs) != n {
		t.Fatalf("the page holds %d jobs, want %d", len(page.Jobs), n)
	}
	p.jobs = page.Jobs
	p.json, _ = json.Marshal(page)
	if len(p.json) < 4*(64<<10) {
		t.Fatalf("a page of %d bytes is too short to go in chunks", len(p.json))
	}
	return p
}

// apiLongPages: a page of jobs far past 64 KiB reads the same through the Go
// client's mux connection as over plain HTTP, on the leader and on the
// followers, also while many long and short answers share the connection.
func apiLongPages(t *testing.T, c *testcluster.Cluster) {
	p := apiLongPage(t, c, 200)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, node := range c.Nodes {
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
					got, err := cl.JobList(ctx, &client.JobListParams{Stream: p.stream, Limit: 1000})
					if err != nil {
						errs <- node.ID + ": " + err.Error()
						return
					}
					if b, _ := json.Marshal(got); !bytes.Equal(b, p.json) {
						errs <- node.ID + ": the page over the mux differs from the page over HTTP"
						return
					}
					// A short answer on the same connection between long ones.
					if j, err := cl.JobGet(ctx, p.jobs[k].ID); err != nil || j.ID != p.jobs[k].ID {
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

// apiLongPagesAcrossLeaderKill: readers page through a long list on each
// follower over the mux protocol while the leader is SIGKILLed. A follower
// sends a default or a consistent read to the leader over the relay and
// passes the leader's answer frame, built in chunks, back as it came; a
// stale read it answers from its own state, in chunks. What the kill cuts
// short must reach a reader as an error answer, never as a shorter or mixed
// page and never as a broken connection to the follower; stale reads need
// no leader and never fail; and every kind succeeds again once a new leader
// is elected. The readers compare bytes, not decoded pages, so most of their
// time is spent waiting on the cluster and the kill finds reads in flight.
// The killed node is started again at the end.
func apiLongPagesAcrossLeaderKill(t *testing.T, c *testcluster.Cluster) {
	p := apiLongPage(t, c, 200)
	leader, followers := apiRoles(t, c)
	query := "/jobs?limit=1000&stream=" + p.stream
	want := apiWant(t, apiDo(t, "GET", leader.URL+query, apiHead, nil), http.StatusOK).Body
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type reader struct {
		node  *testcluster.Node
		kind  string       // "" (default), "stale" or "consistent"
		good  atomic.Int64 // whole pages received
		after atomic.Int64 // of them, asked for once the new leader was known
		fails atomic.Int64 // error answers
	}
	var (
		readers  []*reader
		newLead  atomic.Bool
		mu       sync.Mutex
		problems []string
	)
	problem := func(r *reader, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf("%s %q read: ", r.node.ID, r.kind)+fmt.Sprintf(format, args...))
		}
	}
	// One mux connection per follower; nothing may go any other way.
	mux := wire.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("the request would not go over the mux connection")
	}))
	defer mux.CloseIdleConnections()
	hc := &http.Client{Transport: mux, Timeout: 20 * time.Second}
	read := func(r *reader) {
		asked := newLead.Load()
		u := r.node.URL + query
		if r.kind != "" {
			u += "&" + r.kind
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+apiHead)
		resp, err := hc.Do(req)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			problem(r, "no answer: %v", err)
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			problem(r, "the answer broke off: %v", err)
		case resp.StatusCode == http.StatusOK && bytes.Equal(body, want):
			r.good.Add(1)
			if asked {
				r.after.Add(1)
			}
		case resp.StatusCode == http.StatusOK:
			problem(r, "a page of %d bytes differs from the page before the kill (%d bytes)", len(body), len(want))
		case r.kind == "stale":
			problem(r, "a stale read failed: %d %s", resp.StatusCode, body)
		default:
			var e api.ErrorBody
			if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
				problem(r, "not an error answer: %d %s", resp.StatusCode, body)
			}
			r.fails.Add(1)
		}
	}
	var wg sync.WaitGroup
	for _, f := range followers {
		for g := 0; g < 6; g++ {
			r := &reader{node: f, kind: [...]string{"", "stale", "consistent"}[g%3]}
			readers = append(readers, r)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					read(r)
				}
			}()
		}
	}
	enough := func(count func(*reader) int64) func() error {
		return func() error {
			for _, r := range readers {
				if n := count(r); n < 3 {
					return fmt.Errorf("%s %q reads: %d pages", r.node.ID, r.kind, n)
				}
			}
			return nil
		}
	}
	apiEventually(t, 30*time.Second, "pages before the kill", enough(func(r *reader) int64 { return r.good.Load() }))
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(20 * time.Second)
	if err != nil || nl == leader {
		t.Fatalf("new leader %v: %v", nl, err)
	}
	newLead.Store(true)
	apiEventually(t, 30*time.Second, "pages after the new leader", enough(func(r *reader) int64 { return r.after.Load() }))
	cancel()
	wg.Wait()
	for _, pr := range problems {
		t.Error(pr)
	}
	for _, r := range readers {
		t.Logf("%s %q reads: %d pages, %d after the new leader, %d error answers", r.node.ID, r.kind, r.good.Load(), r.after.Load(), r.fails.Load())
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func errString(err error) string {
	if err == nil {
		return "wrong job"
	}
	return err.Error()
}
