package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// Tokens of the test server, one per role.
const (
	headTok  = "head-secret"
	leftTok  = "left-secret"
	rightTok = "right-secret"
)

// testNow is the fake leader clock: every command is stamped with it.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

// fakeCluster is a single-node Cluster whose Apply feeds commands into a real
// *fsm.FSM with increasing raft indexes. It is the leader unless setFollower
// points it at another node.
type fakeCluster struct {
	id  string
	fsm *fsm.FSM

	mu         sync.Mutex
	index      uint64
	leader     bool
	leaderID   string
	leaderAddr string
	applyErr   error
	// intercept, when set, answers a command instead of the FSM (ok true).
	intercept func(t fsm.CommandType, cmd []byte) (resp interface{}, ok bool)
	// beforeApply, when set, runs before each command is applied.
	beforeApply func(t fsm.CommandType)
	status      cluster.Status
	statusErr   error
	seen        map[string]int64 // RecordHeartbeat
	joined      []cluster.Member
	removed     []string
	transferTo  []string
	opErr       error
	// readIndexes counts ConsistentIndex calls; readIndexErr fails them.
	readIndexes  int
	readIndexErr error
	// inContact makes a follower vouch for its own state (RecentIndex), as
	// one that heard from the leader within the leader lease does.
	inContact bool
	// leaseLost makes StillRecent say no: the node's lease ran out while it
	// read. stillRecentCalls counts the checks.
	leaseLost        bool
	stillRecentCalls int

	leaderCh chan struct{}
	// supported is the highest cluster level every server supports
	// (MinSupportedLevel; newFakeCluster: this build's, fsm.LatestLevel).
	supported int
}

func newFakeCluster(t testing.TB) *fakeCluster {
	t.Helper()
	f, err := fsm.New(fsm.Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{id: "n1", fsm: f, leader: true, leaderID: "n1", leaderAddr: "http://n1.test:36725",
		leaderCh: make(chan struct{}), supported: fsm.LatestLevel}
	fc.status = cluster.Status{
		Leader: cluster.LeaderInfo{ID: "n1", HTTPAddr: "http://n1.test:36725"},
		Nodes: []cluster.NodeStatus{{ID: "n1", RaftAddr: "127.0.0.1:36726", HTTPAddr: "http://n1.test:36725",
			GossipAddr: "127.0.0.1:36727", Suffrage: "voter", Alive: true}},
		Term: 3, CommitIndex: 0, AppliedIndex: 0, NodeID: "n1", State: "Leader", LastContact: "0s",
		LogBatches: 4, LogEntries: 10, LogAppendSeconds: 0.25, LogWritesOverlapped: 3,
	}
	return fc
}

// setFollower makes this node a follower of leader id at addr ("" for none known).
func (c *fakeCluster) setFollower(id, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader, c.leaderID, c.leaderAddr = false, id, addr
	c.status.State = "Follower"
	c.status.Leader = cluster.LeaderInfo{ID: id, HTTPAddr: addr}
}

func (c *fakeCluster) setApplyErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyErr = err
}

func (c *fakeCluster) ID() string { return c.id }

func (c *fakeCluster) Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applyErr != nil {
		return nil, 0, c.applyErr
	}
	t := fsm.CommandType(cmd[0])
	if c.beforeApply != nil {
		c.beforeApply(t)
	}
	c.index++
	if c.intercept != nil {
		if resp, ok := c.intercept(t, cmd); ok {
			return resp, c.index, nil
		}
	}
	out := c.fsm.ApplyBatch([]*raft.Log{{Index: c.index, Term: 1, Type: raft.LogCommand, Data: cmd}})
	return out[0], c.index, nil
}

func (c *fakeCluster) IsLeader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

func (c *fakeCluster) Leader() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderID, c.leaderAddr
}

func (c *fakeCluster) LeaderCh() <-chan struct{} { return c.leaderCh }

func (c *fakeCluster) RecordHeartbeat(key string, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int64{}
	}
	c.seen[key] = max(c.seen[key], at)
}

func (c *fakeCluster) LastSeen(key string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.seen[key]
	return at, ok
}

func (c *fakeCluster) MinSupportedLevel() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.supported
}

// setSupported makes every server support up to cluster level l.
func (c *fakeCluster) setSupported(l int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.supported = l
}

func (c *fakeCluster) ConsistentIndex(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readIndexes++
	if c.readIndexErr != nil {
		return 0, c.readIndexErr
	}
	return c.index, nil
}

func (c *fakeCluster) RecentIndex() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index, c.leader || c.inContact
}

func (c *fakeCluster) StillRecent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stillRecentCalls++
	return !c.leaseLost && (c.leader || c.inContact)
}

// WaitForApplied: the fake applies every command it acknowledges at once;
// an index it has not reached is waited for until a test applies it (a
// follower's catching up) or ctx ends.
func (c *fakeCluster) WaitForApplied(ctx context.Context, index uint64) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for index > c.fsm.AppliedIndex() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (c *fakeCluster) AppliedIndex() uint64 { return c.fsm.AppliedIndex() }

func (c *fakeCluster) Status(ctx context.Context) (cluster.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	st.CommitIndex, st.AppliedIndex = c.index, c.fsm.AppliedIndex()
	return st, c.statusErr
}

func (c *fakeCluster) AddVoter(ctx context.Context, m cluster.Member) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = append(c.joined, m)
	return c.opErr
}

func (c *fakeCluster) RemoveServer(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, id)
	return c.opErr
}

func (c *fakeCluster) TransferLeadership(ctx context.Context, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.transferTo = append(c.transferTo, to)
	return c.opErr
}

// signalState wraps the FSM and reports a Read on reads (buffer 1, extra
// signals dropped), so a test on a fresh env knows a long-poll has taken its snapshot — and with it the watch
// channels any later commit closes — without sleeping.
type signalState struct {
	f     *fsm.FSM
	reads chan struct{}
}

func (s *signalState) Read() *fsm.Reader { return s.signal(s.f.Read()) }

func (s *signalState) Peek() *fsm.Reader { return s.signal(s.f.Peek()) }

func (s *signalState) signal(r *fsm.Reader) *fsm.Reader {
	select {
	case s.reads <- struct{}{}:
	default:
	}
	return r
}

// testLogger routes logs to t.Log until the test ends; lines from
// goroutines still winding down after that (a parked claim's handler) are
// dropped.
func testLogger(t testing.TB) hclog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: w, Level: hclog.Debug})
}

type tWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// env is a server on a fake cluster.
type env struct {
	t     testing.TB
	fc    *fakeCluster
	st    *signalState
	srv   *Server
	h     http.Handler
	nextI atomic.Int64
}

// envConfig configures a test server and the queue service it serves.
type envConfig struct {
	Config
	Queue queue.Config
	// level is the cluster level the env raises its state to first (in
	// entry 1); 0, the default, leaves it where a cluster starts (as one
	// that still runs a node of an older build stays), so the indexes the
	// tests expect start at 1.
	level int
}

// atLevel raises the env's state to cluster level l in its first entry,
// as a real cluster's first leader does.
func atLevel(l int) option { return func(e *envConfig) { e.level = l } }

type option func(*envConfig)

func newEnv(t testing.TB, opts ...option) *env {
	t.Helper()
	fc := newFakeCluster(t)
	e := &env{t: t, fc: fc, st: &signalState{f: fc.fsm, reads: make(chan struct{}, 1)}}
	tokens := &Tokens{}
	tokens.Add(RoleHead, headTok)
	tokens.Add(RoleLeftClaw, leftTok)
	tokens.Add(RoleRightClaw, rightTok)
	cfg := envConfig{
		Config: Config{Tokens: tokens, Logger: testLogger(t), SkillMD: []byte("# Spine skill\n")},
		Queue: queue.Config{
			Logger: testLogger(t),
			Now:    func() time.Time { return testNow },
			NewID:  func() string { return fmt.Sprintf("id-%d", e.nextI.Add(1)) },
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg.Config, fc, queue.New(cfg.Queue, fc, e.st))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e.srv, e.h = srv, srv.Handler()
	if cfg.level > 0 {
		if _, _, err := srv.queue.Propose(context.Background(), fsm.CmdLevel, &fsm.LevelCommand{Now: testNow.UnixNano(), Level: cfg.level}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// resp is a recorded answer.
type resp struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r resp) json(t testing.TB) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, r.Body)
	}
	return m
}

// apiErr asserts a JSON error answer of the documented shape and returns it.
func (r resp) apiErr(t *testing.T, status int, code string) map[string]interface{} {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	m := r.json(t)
	e, ok := m["error"].(map[string]interface{})
	if !ok {
		t.Fatalf("no error object: %s", r.Body)
	}
	if e["code"] != code {
		t.Fatalf("error.code = %v, want %s; body %s", e["code"], code, r.Body)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error.message is empty: %s", r.Body)
	}
	return e
}

// do serves one request in process. body may be nil, a string, []byte or a
// value to encode as JSON.
func (e *env) do(method, path, token string, body interface{}, hdr ...string) resp {
	e.t.Helper()
	return e.doCtx(context.Background(), method, path, token, body, hdr...)
}

func (e *env) doCtx(ctx context.Context, method, path, token string, body interface{}, hdr ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req := httptest.NewRequest(method, path, rd).WithContext(ctx)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return resp{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// create makes a job as head and returns its view.
func (e *env) create(body map[string]interface{}) map[string]interface{} {
	e.t.Helper()
	if _, ok := body["payload"]; !ok {
		body["payload"] = map[string]interface{}{"n": 1}
	}
	r := e.do("POST", "/jobs", headTok, body)
	if r.Code != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	return r.json(e.t)
}

// job reads a job straight from the state machine.
func (e *env) job(id string) *fsm.Job {
	e.t.Helper()
	j, err := e.fc.fsm.Read().Job(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// ts renders a leader-stamped unix-nanosecond time as the API does.
func ts(n int64) string { return api.Time(n).Format(time.RFC3339Nano) }
