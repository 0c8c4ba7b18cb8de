// Package memcluster runs the real queue — cluster.Node with the real job
// state machine (fsm.FSM) — as several nodes in one process, on
// hashicorp/raft's in-memory transport and log store (snapshots are files). Partitions, leader
// changes and restarts take milliseconds, so cluster behaviour can be
// tested in seconds without starting processes; what only processes show
// (fsync, SIGKILL, SIGSTOP, the HTTP layer) stays in systemtest.
//
// Every node's state is compared at the end (CheckConverged): the same
// applied index, the same state hash, the same full state.
package memcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
	Logf(format string, args ...any)
}

// Options configure a cluster. Zero values take defaults.
type Options struct {
	// Nodes is the number of voters (default 3).
	Nodes int
	// SnapshotThreshold and TrailingLogs, when set, make raft snapshot
	// and compact often, so a lagging node is brought back by snapshot.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// Verbose sends the nodes' logs to t.Logf (default: none; a cut link
	// makes raft log an error per retry).
	Verbose bool
	// Disks, when set, gives node i's log the disk Disks[i]: every append
	// returns only once that disk has flushed it (disk.go). Several
	// clusters may share a disk, as groups on one machine would. Default:
	// appends cost nothing.
	Disks []*Disk
}

// Node is one member.
type Node struct {
	ID   string
	Addr raft.ServerAddress
	// Raft and FSM are nil while the node is stopped.
	Raft *cluster.Node
	FSM  *fsm.FSM

	trans *raft.InmemTransport
	store *raft.InmemStore
	disk  *Disk // nil: appends are not flushed
	snaps raft.SnapshotStore
	dir   string
}

// Cluster is a running in-process cluster.
type Cluster struct {
	t     TB
	opts  Options
	Nodes []*Node

	mu  sync.Mutex
	cut map[[2]raft.ServerAddress]bool // directed links that are down
	log *logWriter
}

// Start starts opts.Nodes nodes, forms one cluster of voters and waits for a
// leader. The nodes are shut down when the test ends.
func Start(t TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	c := &Cluster{t: t, opts: opts, cut: map[[2]raft.ServerAddress]bool{}, log: &logWriter{t: t, verbose: opts.Verbose}}
	t.Cleanup(func() { // registered first, so it runs after the shutdowns
		c.log.mu.Lock()
		c.log.done = true
		c.log.mu.Unlock()
	})
	for i := range opts.Nodes {
		id := fmt.Sprintf("m%d", i+1)
		// Snapshots go to files: raft's in-memory snapshot store races a
		// snapshot being taken against one being opened.
		dir := t.TempDir()
		snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
		if err != nil {
			t.Fatalf("memcluster: %v", err)
		}
		n := &Node{ID: id, Addr: raft.ServerAddress(id), store: raft.NewInmemStore(), snaps: snaps, dir: dir}
		if i < len(opts.Disks) {
			n.disk = opts.Disks[i]
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			if n.Raft != nil {
				n.Raft.Shutdown()
			}
		}
	})
	for i, n := range c.Nodes {
		c.start(n, i == 0)
	}
	first := c.Nodes[0]
	c.waitFor(10*time.Second, "the first node to lead", func() bool { return first.Raft.IsLeader() })
	for _, n := range c.Nodes[1:] {
		m := cluster.Member{ID: n.ID, RaftAddr: string(n.Addr), HTTPAddr: "http://" + n.ID + ".invalid"}
		if err := first.Raft.AddVoter(context.Background(), m); err != nil {
			t.Fatalf("memcluster: add %s: %v", n.ID, err)
		}
	}
	// Every node knows every member before the cluster is handed over: a
	// node that has not yet received the entries adding the others would
	// refuse their votes, and a partition made at once could leave a
	// majority with no leader to elect.
	c.waitFor(10*time.Second, "every node to know every member", func() bool {
		for _, n := range c.Nodes {
			st, err := n.Raft.Status(context.Background())
			if err != nil || len(st.Nodes) != len(c.Nodes) {
				return false
			}
		}
		return true
	})
	c.Leader(10 * time.Second)
	return c
}

// start opens n on its stores (kept across restarts) with a new transport
// connected to every running node.
func (c *Cluster) start(n *Node, bootstrap bool) {
	c.t.Helper()
	_, trans := raft.NewInmemTransport(n.Addr)
	n.trans = trans
	for _, o := range c.Nodes {
		if o != n && o.trans != nil && o.Raft != nil {
			c.connect(n, o)
		}
	}
	f, err := fsm.New(fsm.Config{})
	if err != nil {
		c.t.Fatalf("memcluster: %v", err)
	}
	// Info and up always go to the log writer: it keeps the latest lines
	// for a failure report and passes them on only when Verbose.
	level := hclog.Info
	var logs raft.LogStore = n.store
	if n.disk != nil {
		logs = diskLog{InmemStore: n.store, disk: n.disk}
	}
	cfg := cluster.Config{
		NodeID: n.ID, DataDir: n.dir, HTTPAddr: "http://" + n.ID + ".invalid", Bootstrap: bootstrap,
		FSM: f, Transport: trans, LogStore: logs, StableStore: n.store, SnapshotStore: n.snaps,
		DisableGossip: true, Commands: uint8(fsm.LatestCommand()), Level: fsm.LatestLevel,
		Logger: hclog.New(&hclog.LoggerOptions{Name: n.ID, Level: level,
			Output: c.log}),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		ApplyTimeout:      5 * time.Second,
		SnapshotThreshold: c.opts.SnapshotThreshold, TrailingLogs: c.opts.TrailingLogs,
	}
	if c.opts.SnapshotThreshold > 0 {
		cfg.SnapshotInterval = 50 * time.Millisecond
	}
	rn, err := cluster.New(cfg)
	if err != nil {
		c.t.Fatalf("memcluster: start %s: %v", n.ID, err)
	}
	n.Raft, n.FSM = rn, f
}

// logWriter keeps the nodes' latest log lines, for the report of a failed
// wait, and with Verbose sends every line to the test until it ends; lines
// from goroutines still winding down after that are dropped.
type logWriter struct {
	mu      sync.Mutex
	t       TB
	verbose bool
	done    bool
	recent  []string // a ring of the latest lines
	next    int
}

// logKeep is how many recent lines a failure report shows.
const logKeep = 200

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := strings.TrimRight(string(p), "\n")
	if len(w.recent) < logKeep {
		w.recent = append(w.recent, line)
	} else {
		w.recent[w.next] = line
		w.next = (w.next + 1) % logKeep
	}
	if w.verbose && !w.done {
		w.t.Logf("%s", line)
	}
	return len(p), nil
}

// tail returns the latest lines, oldest first.
func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(append(append([]string{}, w.recent[w.next:]...), w.recent[:w.next]...), "\n")
}

// connect links a and b both ways, unless a partition cuts a direction.
func (c *Cluster) connect(a, b *Node) {
	if !c.cut[[2]raft.ServerAddress{a.Addr, b.Addr}] {
		a.trans.Connect(b.Addr, b.trans)
	}
	if !c.cut[[2]raft.ServerAddress{b.Addr, a.Addr}] {
		b.trans.Connect(a.Addr, a.trans)
	}
}

// Partition splits the cluster: nodes in different groups cannot reach each
// other; a node in no group keeps its links. Heal undoes it.
func (c *Cluster) Partition(groups ...[]*Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	group := map[*Node]int{}
	for g, ns := range groups {
		for _, n := range ns {
			group[n] = g + 1
		}
	}
	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if a == b || group[a] == 0 || group[b] == 0 || group[a] == group[b] {
				continue
			}
			c.cut[[2]raft.ServerAddress{a.Addr, b.Addr}] = true
			if a.trans != nil {
				a.trans.Disconnect(b.Addr)
			}
		}
	}
}

// Heal restores every link between running nodes.
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cut)
	for i, a := range c.Nodes {
		for _, b := range c.Nodes[i+1:] {
			if a.Raft != nil && b.Raft != nil {
				c.connect(a, b)
			}
		}
	}
}

// Stop shuts a node down; its log, stable store and snapshots are kept for
// Restart.
func (c *Cluster) Stop(n *Node) {
	c.t.Helper()
	if n.Raft == nil {
		return
	}
	if err := n.Raft.Shutdown(); err != nil {
		c.t.Fatalf("memcluster: stop %s: %v", n.ID, err)
	}
	for _, o := range c.Nodes {
		if o != n && o.trans != nil {
			o.trans.Disconnect(n.Addr)
		}
	}
	n.Raft, n.FSM = nil, nil
}

// Restart starts a stopped node on what it had stored: it replays its log
// (and snapshot) and catches up from the leader.
func (c *Cluster) Restart(n *Node) {
	c.t.Helper()
	if n.Raft != nil {
		return
	}
	c.mu.Lock()
	c.start(n, false)
	c.mu.Unlock()
}

// Running returns the nodes that are not stopped.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Raft != nil {
			out = append(out, n)
		}
	}
	return out
}

// Leader waits until exactly one running node is the ready leader and
// returns it.
func (c *Cluster) Leader(timeout time.Duration) *Node {
	c.t.Helper()
	return c.LeaderAmong(c.Running(), timeout)
}

// LeaderAmong waits until exactly one of nodes is the ready leader (after a
// partition: a leader on the majority's side, while the cut-off one may
// still believe it leads) and returns it.
func (c *Cluster) LeaderAmong(nodes []*Node, timeout time.Duration) *Node {
	c.t.Helper()
	var leader *Node
	c.waitFor(timeout, "one ready leader", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.Raft == nil {
				continue
			}
			if n.Raft.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		return leader != nil
	})
	return leader
}

// inMajority reports whether n can reach a majority of the nodes both ways:
// a leader cut off in a minority may not have noticed yet, and a command
// handed to it would only come back "outcome unknown".
func (c *Cluster) inMajority(n *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	reach := 0
	for _, o := range c.Nodes {
		if o == n || (o.Raft != nil && !c.cut[[2]raft.ServerAddress{n.Addr, o.Addr}] && !c.cut[[2]raft.ServerAddress{o.Addr, n.Addr}]) {
			reach++
		}
	}
	return reach > len(c.Nodes)/2
}

// ErrNoLeader is returned by Apply when no leader took the command in time.
var ErrNoLeader = errors.New("memcluster: no leader took the command")

// Apply proposes a command through whichever node leads, retrying while
// there is none or it changes before the command is proposed. It returns
// the state machine's answer and the entry's index. An outcome that is
// unknown (the leader lost its leadership with the command in flight) is
// returned as the error, as a client would see it. A leader the harness
// knows to be cut off in a minority is not asked.
func (c *Cluster) Apply(t fsm.CommandType, cmd any) (*fsm.Result, uint64, error) {
	data, err := fsm.Encode(t, cmd)
	if err != nil {
		return nil, 0, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.Running() {
			if !n.Raft.IsLeader() || !c.inMajority(n) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, idx, err := n.Raft.Apply(ctx, data)
			cancel()
			if errors.Is(err, cluster.ErrNotLeader) {
				continue
			}
			if err != nil {
				return nil, 0, err
			}
			res, _ := resp.(*fsm.Result)
			return res, idx, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, 0, ErrNoLeader
}

// CheckConverged waits until every running node has applied the same index,
// then requires the same state hash and the same full state (the snapshot
// encoding) on all of them.
func (c *Cluster) CheckConverged(timeout time.Duration) error {
	nodes := c.Running()
	var applied []uint64
	deadline := time.Now().Add(timeout)
	for {
		applied = applied[:0]
		same := true
		for _, n := range nodes {
			applied = append(applied, n.Raft.AppliedIndex())
			if applied[len(applied)-1] != applied[0] {
				same = false
			}
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memcluster: nodes did not reach the same applied index in %s: %v", timeout, applied)
		}
		time.Sleep(10 * time.Millisecond)
	}
	type view struct {
		hashIndex uint64
		hash      [32]byte
		known     bool
		state     [32]byte
	}
	views := make([]view, len(nodes))
	for i, n := range nodes {
		idx, h, ok := n.FSM.StateHash()
		st, err := stateDigest(n.FSM)
		if err != nil {
			return err
		}
		views[i] = view{idx, h, ok, st}
	}
	var diffs []string
	for i, v := range views {
		if !v.known {
			diffs = append(diffs, nodes[i].ID+": state hash unknown")
		}
		if i > 0 && (v.hashIndex != views[0].hashIndex || v.hash != views[0].hash) {
			diffs = append(diffs, fmt.Sprintf("%s: hash %x at %d, %s: %x at %d", nodes[i].ID, v.hash[:6], v.hashIndex, nodes[0].ID, views[0].hash[:6], views[0].hashIndex))
		}
		if i > 0 && v.state != views[0].state {
			diffs = append(diffs, fmt.Sprintf("%s: state differs from %s's", nodes[i].ID, nodes[0].ID))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("memcluster: replicas diverged at applied index %d: %s", applied[0], strings.Join(diffs, "; "))
	}
	return nil
}

// stateDigest is a digest of the whole state: its snapshot encoding.
func stateDigest(f *fsm.FSM) ([32]byte, error) {
	s, err := f.Snapshot()
	if err != nil {
		return [32]byte{}, err
	}
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(sink.Bytes()), nil
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "memcluster" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

func (c *Cluster) waitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("memcluster: timed out after %s waiting for %s; the nodes' latest log lines:\n%s", timeout, what, c.log.tail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
