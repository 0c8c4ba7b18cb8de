package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tcpNode is a node on the real TCP transport with bolt stores and gossip.
type tcpNode struct {
	cfg Config
	fsm *testFSM
	*Node
}

func newTCPConfig(t *testing.T, id string) Config {
	c := Config{
		NodeID:     id,
		DataDir:    t.TempDir(),
		RaftAddr:   freeAddr(t),
		GossipAddr: freeAddr(t),
		HTTPAddr:   "http://" + id + ".invalid:8080",
		Logger:     testLogger(t, id),
	}
	fastTimings(&c)
	return c
}

func startTCP(t *testing.T, cfg Config) *tcpNode {
	t.Helper()
	f := &testFSM{}
	cfg.FSM = f
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { n.Shutdown() })
	return &tcpNode{cfg: cfg, fsm: f, Node: n}
}

func TestClusterTCPFailoverAndRestart(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "n0"), newTCPConfig(t, "n1"), newTCPConfig(t, "n2")}
	cfgs[0].Bootstrap = true
	for i := range cfgs {
		// Snapshot and compact aggressively so the restarted node must be
		// brought back with InstallSnapshot, exercising Restore.
		cfgs[i].SnapshotInterval = 50 * time.Millisecond
		cfgs[i].SnapshotThreshold = 4
		cfgs[i].TrailingLogs = 2
		// Tiny WAL segments so compaction also deletes segment files.
		cfgs[i].walSegmentSize = 1024
	}
	nodes := []*tcpNode{startTCP(t, cfgs[0]), startTCP(t, cfgs[1]), startTCP(t, cfgs[2])}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	for _, n := range nodes[1:] {
		m := Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.cfg.GossipAddr}
		if err := leader.AddVoter(ctx, m); err != nil {
			t.Fatalf("add %s: %v", m.ID, err)
		}
	}
	all := []*Node{nodes[0].Node, nodes[1].Node, nodes[2].Node}
	waitLeader(t, all)

	var want []string
	for i := 0; i < 10; i++ {
		cmd := fmt.Sprintf("a%d", i)
		applyOK(t, leader, cmd)
		want = append(want, cmd)
	}
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}

	// Gossip converges: every node sees all three alive, with HTTP URLs.
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.ID()+" sees all nodes alive", func() bool {
			st, err := n.Status(ctx)
			if err != nil || len(st.Nodes) != 3 {
				return false
			}
			for _, ns := range st.Nodes {
				if !ns.Alive || ns.HTTPAddr != "http://"+ns.ID+".invalid:8080" || ns.GossipAddr == "" {
					return false
				}
			}
			return true
		})
		waitFor(t, 5*time.Second, n.ID()+" peers.json lists all nodes", func() bool {
			b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "peers.json"))
			if err != nil {
				return false
			}
			var pf peersFile
			if json.Unmarshal(b, &pf) != nil || len(pf.Nodes) != 3 {
				return false
			}
			for _, m := range pf.Nodes {
				if m.GossipAddr == "" || m.RaftAddr == "" || m.HTTPAddr == "" {
					return false
				}
			}
			return true
		})
	}

	// Kill the leader; the other two elect a new one and keep committing.
	var oldIdx int
	for i, n := range nodes {
		if n.Node == leader {
			oldIdx = i
		}
	}
	old := nodes[oldIdx]
	if err := old.Shutdown(); err != nil {
		t.Fatalf("shutdown leader: %v", err)
	}
	if err := old.Shutdown(); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	var rest []*Node
	for i, n := range nodes {
		if i != oldIdx {
			rest = append(rest, n.Node)
		}
	}
	newLeader := waitLeader(t, rest)
	if newLeader == old.Node {
		t.Fatal("dead node is leader")
	}
	var lastIdx uint64
	for i := 0; i < 20; i++ {
		cmd := fmt.Sprintf("b%d", i)
		lastIdx = applyOK(t, newLeader, cmd)
		want = append(want, cmd)
	}
	waitFor(t, 10*time.Second, "new leader to snapshot", func() bool {
		f := newLeader.raft.Stats()["last_snapshot_index"]
		var si uint64
		fmt.Sscan(f, &si)
		return si+5 >= lastIdx // threshold is 4: no snapshot is due after that
	})
	if _, httpAddr := rest[0].Leader(); httpAddr != "http://"+newLeader.ID()+".invalid:8080" {
		t.Fatalf("leader http addr = %q", httpAddr)
	}

	// Restart the old leader from its data dir: no re-bootstrap, catches up.
	restarted := startTCP(t, old.cfg)
	nodes[oldIdx] = restarted
	waitFSM(t, restarted.fsm, want)
	if si := restarted.tracker.snapIndex.Load(); si+5 < lastIdx {
		t.Fatalf("restarted node restored snapshot index %d, want >= %d (InstallSnapshot)", si, lastIdx-5)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := restarted.WaitForApplied(wctx, lastIdx); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}
	final := waitLeader(t, []*Node{nodes[0].Node, nodes[1].Node, nodes[2].Node})
	applyOK(t, final, "c0")
	want = append(want, "c0")
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}
	st, err := restarted.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 {
		t.Fatalf("restarted node sees %d servers, want 3", len(st.Nodes))
	}
}

// inmemCluster is a cluster on raft's in-memory transport, without gossip,
// so tests can partition it.
type inmemCluster struct {
	t     *testing.T
	nodes []*Node
	fsms  []*testFSM
	trans []*raft.InmemTransport
}

func newInmemCluster(t *testing.T, size int) *inmemCluster {
	t.Helper()
	return newInmemClusterWith(t, size, func(int) *gatedStore { return newGatedStore() })
}

// newInmemClusterWith is newInmemCluster with node i's log in store(i).
func newInmemClusterWith(t *testing.T, size int, store func(i int) *gatedStore) *inmemCluster {
	t.Helper()
	c := &inmemCluster{t: t}
	for i := 0; i < size; i++ {
		addr, tr := raft.NewInmemTransport("")
		for _, other := range c.trans {
			tr.Connect(other.LocalAddr(), other)
			other.Connect(addr, tr)
		}
		c.trans = append(c.trans, tr)
	}
	for i := 0; i < size; i++ {
		id := fmt.Sprintf("m%d", i)
		f := &testFSM{}
		store := store(i)
		cfg := Config{
			NodeID:        id,
			DataDir:       t.TempDir(),
			HTTPAddr:      "http://" + id + ".invalid",
			Bootstrap:     i == 0,
			FSM:           f,
			Logger:        testLogger(t, id),
			Transport:     c.trans[i],
			LogStore:      store,
			StableStore:   store.InmemStore,
			SnapshotStore: raft.NewInmemSnapshotStore(),
			DisableGossip: true,
		}
		fastTimings(&cfg)
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Shutdown() })
		c.nodes = append(c.nodes, n)
		c.fsms = append(c.fsms, f)
	}
	leader := waitLeader(t, c.nodes[:1])
	for _, n := range c.nodes[1:] {
		if err := leader.AddVoter(context.Background(), n.self()); err != nil {
			t.Fatal(err)
		}
	}
	waitLeader(t, c.nodes)
	return c
}

func (c *inmemCluster) index(n *Node) int {
	for i, x := range c.nodes {
		if x == n {
			return i
		}
	}
	c.t.Fatal("unknown node")
	return -1
}

// isolate cuts node i off from every other node, both directions.
func (c *inmemCluster) isolate(i int) {
	for j, tr := range c.trans {
		if j != i {
			c.trans[i].Disconnect(tr.LocalAddr())
			tr.Disconnect(c.trans[i].LocalAddr())
		}
	}
}

func (c *inmemCluster) heal() {
	for i, a := range c.trans {
		for j, b := range c.trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
}

func TestPartitionedMinorityCannotCommit(t *testing.T) {
	c := newInmemCluster(t, 3)
	var hooksRunning atomic.Int32
	for _, n := range c.nodes {
		n.RunWhileLeader("counter", func(ctx context.Context) {
			hooksRunning.Add(1)
			<-ctx.Done()
			hooksRunning.Add(-1)
		})
	}
	leader := waitLeader(t, c.nodes)
	waitFor(t, 5*time.Second, "one hook running", func() bool { return hooksRunning.Load() == 1 })
	applyOK(t, leader, "before")

	li := c.index(leader)
	c.isolate(li)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, _, err := leader.Apply(ctx, []byte("lost"))
	cancel()
	if err == nil {
		t.Fatal("isolated leader committed a write")
	}
	if !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("isolated apply: want ErrOutcomeUnknown or ErrNotLeader, got %v", err)
	}
	t.Logf("isolated leader apply failed as expected: %v", err)
	waitFor(t, 5*time.Second, "isolated node to step down", func() bool { return !leader.IsLeader() })
	if err := leader.VerifyLeader(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("VerifyLeader on deposed leader: %v", err)
	}
	if _, err := leader.ConsistentIndex(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ConsistentIndex on deposed leader: %v", err)
	}

	var majority []*Node
	for i, n := range c.nodes {
		if i != li {
			majority = append(majority, n)
		}
	}
	newLeader := waitLeader(t, majority)
	applyOK(t, newLeader, "after")
	idx, err := newLeader.ConsistentIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := newLeader.WaitForApplied(wctx, idx); err != nil {
		t.Fatal(err)
	}

	// Heal: the old leader rejoins as follower and converges. "lost" may or
	// may not survive in principle, but it was never committed by a
	// majority: the new leader's log wins, so it must be gone.
	c.heal()
	waitLeader(t, c.nodes)
	waitFor(t, 5*time.Second, "exactly one hook running", func() bool { return hooksRunning.Load() == 1 })
	for _, f := range c.fsms {
		waitFSM(t, f, []string{"before", "after"})
	}
}

func TestMembershipIdempotent(t *testing.T) {
	ctx := context.Background()
	c := newInmemCluster(t, 3)
	leader := waitLeader(t, c.nodes)
	var follower *Node
	for _, n := range c.nodes {
		if n != leader {
			follower = n
			break
		}
	}
	servers := func() []raft.Server {
		cfg, err := leader.configuration()
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Servers
	}
	if err := follower.AddVoter(ctx, Member{ID: "x", RaftAddr: "x"}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on follower: %v", err)
	}
	if err := follower.RemoveServer(ctx, "x"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("RemoveServer on follower: %v", err)
	}
	before := len(servers())
	if err := leader.AddVoter(ctx, follower.self()); err != nil {
		t.Fatalf("re-add existing voter: %v", err)
	}
	if got := len(servers()); got != before {
		t.Fatalf("servers %d -> %d after idempotent add", before, got)
	}
	if err := leader.RemoveServer(ctx, "nobody"); err != nil {
		t.Fatalf("remove non-member: %v", err)
	}
	if err := leader.RemoveServer(ctx, follower.ID()); err != nil {
		t.Fatal(err)
	}
	if err := leader.RemoveServer(ctx, follower.ID()); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if got := len(servers()); got != before-1 {
		t.Fatalf("servers = %d after remove, want %d", got, before-1)
	}
	// Same id, different address: replaced, not duplicated.
	m := follower.self()
	m.RaftAddr = "elsewhere"
	if err := leader.AddVoter(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.RaftAddr = follower.self().RaftAddr
	if err := leader.AddVoter(ctx, m); err != nil {
		t.Fatal(err)
	}
	ss := servers()
	if len(ss) != before {
		t.Fatalf("servers = %v", ss)
	}
	for _, s := range ss {
		if s.ID == raft.ServerID(m.ID) && s.Address != raft.ServerAddress(m.RaftAddr) {
			t.Fatalf("server %s has address %s", s.ID, s.Address)
		}
	}
	applyOK(t, waitLeader(t, c.nodes), "ok")

	// Transfer leadership to a named follower.
	leader = waitLeader(t, c.nodes)
	var target *Node
	for _, n := range c.nodes {
		if n != leader {
			target = n
			break
		}
	}
	if err := leader.TransferLeadership(ctx, "ghost"); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("transfer to unknown: %v", err)
	}
	if err := leader.TransferLeadership(ctx, target.ID()); err != nil {
		t.Fatal(err)
	}
	if got := waitLeader(t, c.nodes); got != target {
		t.Fatalf("leader after transfer = %s, want %s", got.ID(), target.ID())
	}
}

func TestStatusJSON(t *testing.T) {
	c := newInmemCluster(t, 3)
	leader := waitLeader(t, c.nodes)
	applyOK(t, leader, "x")
	st, err := leader.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]interface{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"leader", "nodes", "term", "commit_index", "applied_index", "node_id", "state", "last_contact"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status JSON lacks %q: %s", k, b)
		}
	}
	ld := m["leader"].(map[string]interface{})
	if ld["id"] != leader.ID() || ld["http_addr"] != leader.cfg.HTTPAddr {
		t.Errorf("leader = %v", ld)
	}
	if m["state"] != "Leader" || m["node_id"] != leader.ID() {
		t.Errorf("state/node_id = %v/%v", m["state"], m["node_id"])
	}
	nodes := m["nodes"].([]interface{})
	if len(nodes) != 3 {
		t.Fatalf("nodes = %v", nodes)
	}
	for _, raw := range nodes {
		nd := raw.(map[string]interface{})
		for _, k := range []string{"id", "raft_addr", "http_addr", "gossip_addr", "suffrage", "alive"} {
			if _, ok := nd[k]; !ok {
				t.Errorf("node lacks %q: %v", k, nd)
			}
		}
		if nd["suffrage"] != "voter" {
			t.Errorf("suffrage = %v", nd["suffrage"])
		}
		// Gossip is disabled here; the leader learned HTTP URLs from AddVoter.
		if nd["http_addr"] != "http://"+nd["id"].(string)+".invalid" {
			t.Errorf("http_addr = %v", nd["http_addr"])
		}
	}
	if st.AppliedIndex < st.CommitIndex-1 || st.AppliedIndex == 0 {
		t.Errorf("applied %d commit %d", st.AppliedIndex, st.CommitIndex)
	}
	for _, n := range c.nodes {
		if n == leader {
			continue
		}
		var fs Status
		waitFor(t, 5*time.Second, "follower status to settle", func() bool {
			var err error
			fs, err = n.Status(context.Background())
			return err == nil && fs.State == "Follower" && fs.Leader.ID == leader.ID() &&
				fs.LastContact != "never" && len(fs.Nodes) == 3 && fs.AppliedIndex >= st.CommitIndex-1
		})
	}
}

// A node whose raft store is garbage refuses to start, whichever backend.
func TestCorruptStoreRefusesToStart(t *testing.T) {
	for _, file := range []string{"raft/raft.db", "raft/wal/wal-meta.db"} {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, filepath.FromSlash(file))
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			garbage := make([]byte, 64*1024)
			for i := range garbage {
				garbage[i] = byte(i*7 + 3)
			}
			if err := os.WriteFile(path, garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := newTCPConfig(t, "bad")
			cfg.DataDir = dir
			cfg.FSM = &testFSM{}
			n, err := New(cfg)
			if err == nil {
				n.Shutdown()
				t.Fatalf("node started on a garbage %s", file)
			}
			if !errors.Is(err, ErrCorruptStore) {
				t.Fatalf("want ErrCorruptStore, got %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := func() Config {
		return Config{NodeID: "a", DataDir: "/tmp/x", RaftAddr: "127.0.0.1:1", GossipAddr: "127.0.0.1:2",
			HTTPAddr: "http://127.0.0.1:3", FSM: &testFSM{}}
	}
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxAppendEntries != DefaultMaxAppendEntries || c.ApplyTimeout != DefaultApplyTimeout || c.Logger == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
	for name, mut := range map[string]func(*Config){
		"no id":     func(c *Config) { c.NodeID = "" },
		"no dir":    func(c *Config) { c.DataDir = "" },
		"no raft":   func(c *Config) { c.RaftAddr = "" },
		"no gossip": func(c *Config) { c.GossipAddr = "" },
		"no http":   func(c *Config) { c.HTTPAddr = "" },
		"bad http":  func(c *Config) { c.HTTPAddr = "127.0.0.1:3" },
		"no fsm":    func(c *Config) { c.FSM = nil },
		"bad join":  func(c *Config) { c.Join = []string{"nohost"} },
	} {
		c := good()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: want ErrInvalidConfig, got %v", name, err)
		}
	}
}

// TestJoinFlow starts a node with Join pointing at a fake /cluster/join
// handler that calls AddVoter on the leader, as httpapi will.
func TestJoinFlow(t *testing.T) {
	ctx := context.Background()
	c0 := newTCPConfig(t, "j0")
	c0.Bootstrap = true
	n0 := startTCP(t, c0)
	leader := waitLeader(t, []*Node{n0.Node})

	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cluster/join" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) == 1 {
			// First attempt fails: the joiner must retry.
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sekret" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		var m Member
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := leader.AddVoter(r.Context(), m); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		st, _ := leader.Status(r.Context())
		json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()

	c1 := newTCPConfig(t, "j1")
	c1.Join = []string{srv.URL}
	c1.JoinToken = "sekret"
	n1 := startTCP(t, c1)
	waitLeader(t, []*Node{n0.Node, n1.Node})
	applyOK(t, leader, "hello")
	waitFSM(t, n1.fsm, []string{"hello"})
	waitFor(t, 10*time.Second, "gossip between j0 and j1", func() bool {
		st, err := n1.Status(ctx)
		if err != nil || len(st.Nodes) != 2 {
			return false
		}
		for _, ns := range st.Nodes {
			if !ns.Alive {
				return false
			}
		}
		_, h := n1.Leader()
		return h == c0.HTTPAddr
	})
	if calls.Load() < 2 {
		t.Fatalf("join calls = %d", calls.Load())
	}
}

// TestLeaderHooksAndWaitForApplied checks a hook registered after start runs
// on the ready leader and that WaitForApplied covers applied entries.
func TestLeaderHooksAndWaitForApplied(t *testing.T) {
	c := newInmemCluster(t, 3)
	leader := waitLeader(t, c.nodes)
	started := make(chan string, 1)
	leader.RunWhileLeader("late", func(ctx context.Context) {
		started <- "late"
		<-ctx.Done()
	})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("hook registered on the ready leader did not start")
	}
	idx := applyOK(t, leader, "w")
	for i, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.WaitForApplied(ctx, idx); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		cancel()
		if got := c.fsms[i].list(); len(got) != 1 || got[0] != "w" {
			t.Fatalf("node %d fsm = %v after WaitForApplied", i, got)
		}
	}
	// An index far ahead times out with the ctx error rather than hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := leader.WaitForApplied(ctx, idx+1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForApplied far ahead: %v", err)
	}
	ch := leader.LeaderCh()
	if err := leader.TransferLeadership(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("LeaderCh did not fire on transfer")
	}
	if _, _, err := leader.Apply(context.Background(), []byte("x")); !errors.Is(err, ErrNotLeader) {
		waitFor(t, 5*time.Second, "old leader to step down", func() bool { return !leader.IsLeader() })
	}
}

func TestBatchingFSMPreserved(t *testing.T) {
	tr := newApplyTracker()
	if _, ok := wrapFSM(&batchFSM{}, tr, nil).(raft.BatchingFSM); !ok {
		t.Fatal("wrapper hides BatchingFSM")
	}
	if _, ok := wrapFSM(&testFSM{}, tr, nil).(raft.BatchingFSM); ok {
		t.Fatal("wrapper invents BatchingFSM")
	}
	f := &batchFSM{}
	n := singleNode(t, "b0", f)
	resp, idx, err := n.Apply(context.Background(), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if resp != 1 || idx == 0 || n.AppliedIndex() < idx {
		t.Fatalf("resp %v idx %d applied %d", resp, idx, n.AppliedIndex())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batches == 0 {
		t.Fatal("ApplyBatch never called")
	}
}

// TestConcurrentAppliesGetTheirOwnAnswers drives many concurrent proposals
// through the proposer (grouped into shared batches) and checks that each
// caller gets the response and index of its own entry.
func TestConcurrentAppliesGetTheirOwnAnswers(t *testing.T) {
	start := time.Now()
	f := &testFSM{}
	n := singleNode(t, "p0", f)
	const workers, each = 16, 50
	type answer struct {
		cmd  string
		pos  int
		idx  uint64
		fail error
	}
	answers := make(chan answer, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				cmd := fmt.Sprintf("w%d-%d", w, i)
				resp, idx, err := n.Apply(context.Background(), []byte(cmd))
				pos, _ := resp.(int)
				answers <- answer{cmd, pos, idx, err}
			}
		}(w)
	}
	wg.Wait()
	close(answers)
	applied := f.list()
	seenIdx := map[uint64]bool{}
	for a := range answers {
		if a.fail != nil {
			t.Fatalf("%s: %v", a.cmd, a.fail)
		}
		if a.pos < 1 || a.pos > len(applied) || applied[a.pos-1] != a.cmd {
			t.Fatalf("%s got the answer of entry %d (%q)", a.cmd, a.pos, applied[max(a.pos-1, 0)])
		}
		if seenIdx[a.idx] {
			t.Fatalf("index %d answered twice", a.idx)
		}
		seenIdx[a.idx] = true
	}
	if len(applied) != workers*each {
		t.Fatalf("applied %d entries, want %d", len(applied), workers*each)
	}
	// Group commit: concurrent proposals shared log appends, and the
	// status counts both.
	st, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.LogEntries < workers*each || st.LogBatches == 0 || st.LogBatches >= st.LogEntries {
		t.Fatalf("log appends: %d entries in %d batches, want >= %d entries in fewer batches",
			st.LogEntries, st.LogBatches, workers*each)
	}
	// Each append wrote and fsynced: it took some time, and no more than the
	// test has run.
	if st.LogAppendSeconds <= 0 || st.LogAppendSeconds > time.Since(start).Seconds() {
		t.Errorf("log appends took %vs in all, want more than 0 and less than the %v the test ran",
			st.LogAppendSeconds, time.Since(start))
	}
}

// The append counter passes on whether its store is monotonic: raft
// compacts a monotonic store (raft-wal) differently after a snapshot
// restore, so hiding it would change recovery.
func TestLogStoreWrappersKeepMonotonic(t *testing.T) {
	w, err := openWAL(t.TempDir(), testLogger(t, "wal"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !(&countingLogStore{LogStore: w}).IsMonotonic() {
		t.Error("raft-wal behind the counter is not reported monotonic")
	}
	ov := newOverlapLog(&countingLogStore{LogStore: w}, func(error) {})
	defer ov.Close()
	if !ov.IsMonotonic() {
		t.Error("raft-wal behind the overlapped writer is not reported monotonic")
	}
	b, err := openBolt(filepath.Join(t.TempDir(), raftDBName))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if (&countingLogStore{LogStore: b}).IsMonotonic() {
		t.Error("bolt behind the counter is reported monotonic")
	}
	ob := newOverlapLog(b, func(error) {})
	defer ob.Close()
	if ob.IsMonotonic() {
		t.Error("bolt behind the overlapped writer is reported monotonic")
	}
}

// singleNode starts a bootstrapped one-node cluster on in-memory stores and
// transport, stopped at the end of the test, and waits for it to lead.
func singleNode(t *testing.T, id string, f raft.FSM) *Node {
	t.Helper()
	store := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport("")
	cfg := Config{NodeID: id, DataDir: t.TempDir(), HTTPAddr: "http://" + id + ".invalid", Bootstrap: true,
		FSM: f, Logger: testLogger(t, id), Transport: trans, LogStore: store, StableStore: store,
		SnapshotStore: raft.NewInmemSnapshotStore(), DisableGossip: true}
	fastTimings(&cfg)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	waitLeader(t, []*Node{n})
	return n
}

func TestPickBackend(t *testing.T) {
	mk := func(t *testing.T, bolt, wal bool) string {
		dir := t.TempDir()
		if bolt {
			if err := os.WriteFile(filepath.Join(dir, raftDBName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if wal {
			if err := os.Mkdir(filepath.Join(dir, walDirName), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	cases := []struct {
		name      string
		bolt, wal bool
		want, got string
		fails     bool
	}{
		{name: "new dir defaults to wal", got: LogBackendWAL},
		{name: "new dir, bolt asked", want: LogBackendBolt, got: LogBackendBolt},
		{name: "bolt on disk wins over default", bolt: true, got: LogBackendBolt},
		{name: "wal on disk", wal: true, got: LogBackendWAL},
		{name: "wal asked, bolt on disk", bolt: true, want: LogBackendWAL, fails: true},
		{name: "bolt asked, wal on disk", wal: true, want: LogBackendBolt, fails: true},
		{name: "both on disk", bolt: true, wal: true, fails: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pickBackend(mk(t, tc.bolt, tc.wal), tc.want)
			if tc.fails {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("want ErrInvalidConfig, got %q, %v", got, err)
				}
				return
			}
			if err != nil || got != tc.got {
				t.Fatalf("got %q, %v; want %q", got, err, tc.got)
			}
		})
	}
}

// A node on the bolt backend keeps working across a restart, like the
// default WAL one does in the other tests.
func TestBoltBackendRestart(t *testing.T) {
	cfg := newTCPConfig(t, "boltnode")
	cfg.LogBackend = LogBackendBolt
	cfg.Bootstrap = true
	fsmA := &testFSM{}
	cfg.FSM = fsmA
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "leader", n.IsLeader)
	for i := 0; i < 5; i++ {
		if _, _, err := n.Apply(context.Background(), []byte(fmt.Sprintf("cmd-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft", raftDBName)); err != nil {
		t.Fatalf("bolt backend wrote no raft.db: %v", err)
	}
	cfg2 := cfg
	cfg2.LogBackend = "" // auto: finds raft.db
	fsmB := &testFSM{}
	cfg2.FSM = fsmB
	n2, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Shutdown()
	waitFor(t, 5*time.Second, "replayed commands", func() bool { return len(fsmB.list()) >= 5 })
}

// A compacted entry must be gone for raft: otherwise a leader streams a
// lagging follower entries its snapshot replaced instead of the snapshot.
// raft-wal alone keeps serving them until their segment is deleted.
func TestLogStoreHidesCompactedEntries(t *testing.T) {
	w, err := openWAL(t.TempDir(), hclog.NewNullLogger(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	store := &countingLogStore{LogStore: w}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := store.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteRange(1, 6); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	for i := uint64(1); i <= 6; i++ {
		if err := store.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) after compaction: err=%v, want ErrLogNotFound", i, err)
		}
	}
	for i := uint64(7); i <= 10; i++ {
		if err := store.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) = %+v, %v", i, l, err)
		}
	}
	if first, _ := store.FirstIndex(); first != 7 {
		t.Fatalf("first index %d, want 7", first)
	}
}

// RecentIndex lets a node read its own state with bounded staleness: the
// leader and followers in contact with it vouch for an index that covers
// every acknowledged write; a node cut off from the quorum stops vouching
// within about the leader lease, leader or follower.
func TestRecentIndex(t *testing.T) {
	c := newInmemCluster(t, 3)
	leader := waitLeader(t, c.nodes)
	idx := applyOK(t, leader, "a")
	for _, n := range c.nodes {
		waitFor(t, 5*time.Second, n.ID()+" to vouch for an index covering the write", func() bool {
			got, ok := n.RecentIndex()
			return ok && got >= idx
		})
	}

	li := c.index(leader)
	fi := (li + 1) % 3
	c.isolate(fi)
	waitFor(t, 5*time.Second, "the isolated follower to stop vouching", func() bool {
		_, ok := c.nodes[fi].RecentIndex()
		return !ok
	})
	if _, ok := leader.RecentIndex(); !ok {
		t.Fatal("the leader, still in touch with a quorum, stopped vouching")
	}
	c.heal()
	waitFor(t, 5*time.Second, "the healed follower to vouch again", func() bool {
		_, ok := c.nodes[fi].RecentIndex()
		return ok
	})

	c.isolate(li)
	waitFor(t, 5*time.Second, "the isolated leader to stop vouching", func() bool {
		_, ok := leader.RecentIndex()
		return !ok
	})
}
