package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	spineapi "github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// scaleRun is one run of `spine-bench scale` against its local cluster.
type scaleRun struct {
	cfg    scaleConfig
	lc     *localCluster
	binary string // the spine binary: the nodes and the CLI
	hc     *http.Client
	a      *api   // the mux client of the fill
	cookie string // the web UI's session cookie (name=value)
	nextID atomic.Int64
}

func newScaleRun(cfg scaleConfig, lc *localCluster, binary string) *scaleRun {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 8
	hc := &http.Client{Transport: tr, Timeout: cfg.reqTime,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a := newAPI(lc.c.URLs(), testcluster.HeadToken, testcluster.LeftToken, cfg.producers+8, cfg.reqTime)
	a.mux = true
	return &scaleRun{cfg: cfg, lc: lc, binary: binary, hc: hc, a: a}
}

func (s *scaleRun) close() {
	s.a.close()
	s.hc.CloseIdleConnections()
}

func (s *scaleRun) printf(format string, args ...any) { fmt.Fprintf(s.cfg.out, format, args...) }

func (s *scaleRun) streamName(i int) string { return fmt.Sprintf("scale-%02d", i%s.cfg.streams) }

// req sends one request to node's base URL and returns the status and
// body. auth is a full Authorization value, "cookie" for the UI session,
// "login" for the UI's login (its answer's cookie is kept), or empty.
func (s *scaleRun) req(ctx context.Context, node int, method, path, auth, ctype string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequestWithContext(ctx, method, s.lc.c.Nodes[node].URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	switch auth {
	case "", "login":
	case "cookie":
		r.Header.Set("Cookie", s.cookie)
	default:
		r.Header.Set("Authorization", auth)
	}
	if body != nil {
		if ctype == "" {
			ctype = "application/json"
		}
		r.Header.Set("Content-Type", ctype)
	}
	resp, err := s.hc.Do(r)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if c := resp.Header.Get("Set-Cookie"); c != "" && auth == "login" {
		s.cookie, _, _ = strings.Cut(c, ";")
	}
	return resp.StatusCode, data, nil
}

// reqJSON is req that wants status want and decodes the answer into out
// (if not nil).
func (s *scaleRun) reqJSON(ctx context.Context, node int, method, path, auth string, body []byte, want int, out any) error {
	st, data, err := s.req(ctx, node, method, path, auth, "", body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if st != want {
		return fmt.Errorf("%s %s: status %d, want %d: %.300s", method, path, st, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

func (s *scaleRun) health(ctx context.Context, node int) (*spineapi.Health, error) {
	var h spineapi.Health
	if err := s.reqJSON(ctx, node, http.MethodGet, "/health", "", nil, http.StatusOK, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// leader is the index of the running node that reports itself leader,
// waited for up to max.
func (s *scaleRun) leader(ctx context.Context, max time.Duration) (int, error) {
	deadline := time.Now().Add(max)
	for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
		for n, node := range s.lc.c.Nodes {
			if !node.Running() {
				continue
			}
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			h, err := s.health(hctx, n)
			cancel()
			if err == nil && h.Role == "leader" {
				return n, nil
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
		if err := ctx.Err(); err != nil {
			return -1, err
		}
	}
	return -1, fmt.Errorf("no leader within %v", max)
}

// inSync waits until every running node has applied the leader's commit
// index (read anew at each try), up to max; it returns how long that took.
func (s *scaleRun) inSync(ctx context.Context, max time.Duration) (time.Duration, error) {
	t0 := time.Now()
	var last error
	for i := 0; i < 100000 && time.Since(t0) < max; i++ {
		last = s.syncedOnce(ctx)
		if last == nil {
			return time.Since(t0), nil
		}
		sleepCtx(ctx, 50*time.Millisecond)
		if err := ctx.Err(); err != nil {
			return time.Since(t0), err
		}
	}
	return time.Since(t0), fmt.Errorf("nodes not in sync within %v: %v", max, last)
}

func (s *scaleRun) syncedOnce(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var commit uint64
	found := false
	applied := make([]uint64, len(s.lc.c.Nodes))
	for n, node := range s.lc.c.Nodes {
		if !node.Running() {
			continue
		}
		h, err := s.health(hctx, n)
		if err != nil {
			return err
		}
		applied[n] = h.AppliedIndex
		if h.Role == "leader" {
			commit, found = h.CommitIndex, true
		}
	}
	if !found {
		return errors.New("no leader")
	}
	for n, node := range s.lc.c.Nodes {
		if node.Running() && applied[n] < commit {
			return fmt.Errorf("%s applied %d < commit %d", node.ID, applied[n], commit)
		}
	}
	return nil
}

// setup waits for the cluster to accept the developer queue's writes,
// makes the session and streams the jobs go into, and logs into the UI.
func (s *scaleRun) setup(ctx context.Context) error {
	l, err := s.leader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	// The developer queue's writes wait for the cluster's level: a new
	// cluster raises it within moments of forming.
	body := []byte(`{"name":"scale","description":"spine-bench scale"}`)
	for i := 0; ; i++ {
		err = s.reqJSON(ctx, l, http.MethodPost, "/api/sessions", scaleHead, body, http.StatusCreated, nil)
		if err == nil || i == 100 || !strings.Contains(err.Error(), "status 503") {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	if err != nil {
		return err
	}
	for i := 0; i < s.cfg.streams; i++ {
		b := fmt.Sprintf(`{"name":%q,"session":"scale","instructions":"jobs of spine-bench scale"}`, s.streamName(i))
		if err := s.reqJSON(ctx, l, http.MethodPost, "/api/streams", scaleHead, []byte(b), http.StatusCreated, nil); err != nil {
			return err
		}
	}
	form := "token=" + url.QueryEscape(testcluster.HeadToken) + "&next=/ui/"
	st, data, err := s.req(ctx, l, http.MethodPost, "/ui/login", "login", "application/x-www-form-urlencoded", []byte(form))
	if err != nil {
		return fmt.Errorf("UI login: %w", err)
	}
	if st != http.StatusSeeOther || s.cookie == "" {
		return fmt.Errorf("UI login: status %d, cookie %q: %.200s", st, s.cookie, data)
	}
	return nil
}

// fill creates jobs until size are queued (have are), through the leader's
// mux connection, the streams round-robin; then waits for the followers.
func (s *scaleRun) fill(ctx context.Context, have, size int, sz *scaleSize) error {
	l, err := s.leader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	sz.Leader = s.lc.c.Nodes[l].ID
	total := int64(size - have)
	var next, ok atomic.Int64
	el, errN, first := s.together(ctx, func(ctx context.Context, g int, fail func(error)) {
		buf := make([]byte, 0, s.cfg.payload+128)
		for k := int64(0); k <= total; k++ {
			i := next.Add(1) - 1
			if i >= total || ctx.Err() != nil {
				return
			}
			id := s.nextID.Add(1)
			buf = createBody(buf, s.streamName(int(id)), time.Now().UnixNano(), id, s.cfg.payload)
			if _, err := s.a.create(ctx, l, buf); err != nil {
				fail(err)
				continue
			}
			ok.Add(1)
		}
	})
	sz.FillSeconds, sz.FillJobsPerS, sz.FillErrors = round3(el.Seconds()), perSec(ok.Load(), el), errN
	if err := ctx.Err(); err != nil {
		return err
	}
	if errN > 0 {
		return fmt.Errorf("%d creates failed; first: %v", errN, first)
	}
	d, err := s.inSync(ctx, 2*time.Minute)
	sz.CatchUpSeconds = round3(d.Seconds())
	s.printf("[%s queued] grew by %d jobs in %.1fs (%.0f jobs/s, %d producers to the leader %s); every node applied them %.2fs later\n",
		thousands(size), ok.Load(), el.Seconds(), sz.FillJobsPerS, s.cfg.producers, sz.Leader, d.Seconds())
	return err
}

// together runs work on cfg.producers goroutines (g their number, 0 to
// producers-1) and waits for them all. A work calls fail for each request
// that failed: after 100 failures its ctx is cancelled, stopping every
// one. It returns how long they ran, the failures and the first.
func (s *scaleRun) together(ctx context.Context, work func(ctx context.Context, g int, fail func(error))) (time.Duration, int64, error) {
	var errN atomic.Int64
	var first errBox
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	fail := func(err error) {
		if wctx.Err() != nil {
			return
		}
		first.set(err)
		if errN.Add(1) > 100 {
			stop()
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < s.cfg.producers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(wctx, g, fail)
		}()
	}
	wg.Wait()
	return time.Since(start), errN.Load(), first.err
}

// queued is jobs.queued of node's GET /v1/state.
func (s *scaleRun) queued(ctx context.Context, node int) (int, error) {
	jobs, err := s.jobCounts(ctx, node)
	return jobs["queued"], err
}

// jobCounts is the jobs of node's GET /v1/state: how many in each status.
func (s *scaleRun) jobCounts(ctx context.Context, node int) (map[string]int, error) {
	var st struct {
		Jobs map[string]int `json:"jobs"`
	}
	if err := s.reqJSON(ctx, node, http.MethodGet, "/v1/state", scaleHead, nil, http.StatusOK, &st); err != nil {
		return nil, err
	}
	return st.Jobs, nil
}

// memFigs is every node's memory, in MiB, node order.
type memFigs struct {
	rss, inuse, live []float64
	forced           bool // live is the heap after a forced collection
}

// memory reads each node's RSS (/proc) and heap: after a forced collection
// when the node serves /debug/pprof (SPINE_PPROF), else from /metrics.
func (s *scaleRun) memory(ctx context.Context) (memFigs, error) {
	var m memFigs
	m.forced = true
	for n, node := range s.lc.c.Nodes {
		m.rss = append(m.rss, round1(float64(procStatusKiB(node.Pid(), "VmRSS:"))/1024))
		st, data, err := s.req(ctx, n, http.MethodGet, "/debug/pprof/heap?gc=1&debug=1", scaleHead, "", nil)
		if err == nil && st == http.StatusOK {
			ms := parseMemStats(data)
			m.live = append(m.live, round1(ms["HeapAlloc"]/(1<<20)))
			m.inuse = append(m.inuse, round1(ms["HeapInuse"]/(1<<20)))
			continue
		}
		m.forced = false
		st, data, err = s.req(ctx, n, http.MethodGet, "/metrics", scaleHead, "", nil)
		if err != nil || st != http.StatusOK {
			return m, fmt.Errorf("%s /metrics: status %d, %v", node.ID, st, err)
		}
		m.live = append(m.live, round1(promValue(data, "go_memstats_heap_alloc_bytes")/(1<<20)))
		m.inuse = append(m.inuse, round1(promValue(data, "go_memstats_heap_inuse_bytes")/(1<<20)))
	}
	return m, nil
}
