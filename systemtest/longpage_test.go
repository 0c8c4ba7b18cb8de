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

// pageReaders read one long page over and over through the mux protocol,
// each on one node at one consistency, and compare every answer byte for
// byte with the page as it stood before a fault. A node answers a default or
// a consistent read on the leader (a follower sends it there over the relay
// and passes the leader's answer frame, built in chunks, back as it came)
// and a stale read from its own state, in chunks. Whatever a fault cuts
// short must reach a reader as a 503 with an error code, never as a shorter
// or mixed page and never as a broken connection; stale reads need no leader
// and never fail. Comparing bytes rather than decoded pages keeps most of a
// reader's time spent waiting on the cluster, so a fault finds reads in
// flight.
type pageReaders struct {
	t       *testing.T
	query   string
	want    []byte
	readers []*pageReader
	after   atomic.Bool // set once the fault is over
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	problems []string
}

type pageReader struct {
	node  *testcluster.Node
	kind  string       // "" (default), "stale" or "consistent"
	good  atomic.Int64 // whole pages received
	after atomic.Int64 // of them, asked for once the fault was over
	fails atomic.Int64 // error answers
}

// startPageReaders starts, on each node, two readers of each consistency.
func startPageReaders(t *testing.T, p longPage, want []byte, nodes []*testcluster.Node) *pageReaders {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pr := &pageReaders{t: t, query: "/jobs?limit=1000&stream=" + p.stream, want: want, cancel: cancel}
	t.Cleanup(cancel) // a test that fails before stop does not leave its readers running
	// One mux connection per node; nothing may go any other way.
	mux := wire.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("the request would not go over the mux connection")
	}))
	t.Cleanup(mux.CloseIdleConnections)
	hc := &http.Client{Transport: mux, Timeout: 20 * time.Second}
	for _, n := range nodes {
		for g := 0; g < 6; g++ {
			r := &pageReader{node: n, kind: [...]string{"", "stale", "consistent"}[g%3]}
			pr.readers = append(pr.readers, r)
			pr.wg.Add(1)
			go func() {
				defer pr.wg.Done()
				for ctx.Err() == nil {
					pr.read(ctx, hc, r)
				}
			}()
		}
	}
	return pr
}

func (pr *pageReaders) read(ctx context.Context, hc *http.Client, r *pageReader) {
	after := pr.after.Load()
	u := r.node.URL + pr.query
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
		pr.problem(r, "no answer: %v", err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		pr.problem(r, "the answer broke off: %v", err)
	case resp.StatusCode == http.StatusOK && bytes.Equal(body, pr.want):
		r.good.Add(1)
		if after {
			r.after.Add(1)
		}
	case resp.StatusCode == http.StatusOK:
		pr.problem(r, "a page of %d bytes differs from the page before the fault (%d bytes)", len(body), len(pr.want))
	case r.kind == "stale":
		pr.problem(r, "a stale read failed: %d %s", resp.StatusCode, body)
	default:
		var e api.ErrorBody
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
			pr.problem(r, "not an error answer: %d %s", resp.StatusCode, body)
		}
		r.fails.Add(1)
	}
}

func (pr *pageReaders) problem(r *pageReader, format string, args ...any) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if len(pr.problems) < 20 {
		pr.problems = append(pr.problems, fmt.Sprintf("%s %q read: ", r.node.ID, r.kind)+fmt.Sprintf(format, args...))
	}
}

// waitPages waits until every reader has read three whole pages, counting
// only those asked for after the fault once faultOver has been called.
func (pr *pageReaders) waitPages(what string) {
	pr.t.Helper()
	after := pr.after.Load()
	apiEventually(pr.t, 30*time.Second, what, func() error {
		for _, r := range pr.readers {
			n := r.good.Load()
			if after {
				n = r.after.Load()
			}
			if n < 3 {
				return fmt.Errorf("%s %q reads: %d pages", r.node.ID, r.kind, n)
			}
		}
		return nil
	})
}

func (pr *pageReaders) faultOver() { pr.after.Store(true) }

// stop ends the readers and fails the test on anything they saw wrong.
func (pr *pageReaders) stop() {
	pr.t.Helper()
	pr.cancel()
	pr.wg.Wait()
	for _, p := range pr.problems {
		pr.t.Error(p)
	}
	for _, r := range pr.readers {
		pr.t.Logf("%s %q reads: %d pages, %d after the fault, %d error answers", r.node.ID, r.kind, r.good.Load(), r.after.Load(), r.fails.Load())
	}
}

// apiLongPagesAcrossLeaderKill: pageReaders on both followers while the
// leader is SIGKILLed; every kind of read succeeds again once a new leader
// is elected. The killed node is started again at the end.
func apiLongPagesAcrossLeaderKill(t *testing.T, c *testcluster.Cluster) {
	p := apiLongPage(t, c, 200)
	leader, followers := apiRoles(t, c)
	want := apiWant(t, apiDo(t, "GET", leader.URL+"/jobs?limit=1000&stream="+p.stream, apiHead, nil), http.StatusOK).Body
	pr := startPageReaders(t, p, want, followers)
	pr.waitPages("pages before the kill")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if nl, err := c.WaitLeader(20 * time.Second); err != nil || nl == leader {
		t.Fatalf("new leader %v: %v", nl, err)
	}
	pr.faultOver()
	pr.waitPages("pages after the new leader")
	pr.stop()
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
}

// apiLongPagesAcrossLeaderPause: pageReaders on every node while the leader
// is SIGSTOPped until another is elected, then woken. The paused leader's
// own answers (a default read is held until its read lease is seen to have
// outlived it, and dropped, chunks and all, when it has not) must not reach
// its readers from the state it had before the pause, and every reader,
// those of the old leader too, reads whole pages again afterwards.
func apiLongPagesAcrossLeaderPause(t *testing.T, c *testcluster.Cluster) {
	p := apiLongPage(t, c, 200)
	leader, _ := apiRoles(t, c)
	want := apiWant(t, apiDo(t, "GET", leader.URL+"/jobs?limit=1000&stream="+p.stream, apiHead, nil), http.StatusOK).Body
	misses := func() uint64 {
		var h api.Health
		apiDecode(t, apiWant(t, apiDo(t, "GET", leader.URL+"/health", "", nil), http.StatusOK), &h)
		return h.LeaseMisses
	}
	before := misses()
	pr := startPageReaders(t, p, want, c.Nodes)
	pr.waitPages("pages before the pause")
	if err := c.Pause(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(20 * time.Second)
	if resumeErr := c.Resume(leader); resumeErr != nil {
		t.Fatal(resumeErr)
	}
	if err != nil || nl == leader {
		t.Fatalf("new leader %v: %v", nl, err)
	}
	pr.faultOver()
	pr.waitPages("pages after the pause")
	pr.stop()
	t.Logf("the paused leader withheld %d answers from its own state", misses()-before)
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
