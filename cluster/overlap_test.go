package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// gatedStore is an in-memory log whose appends can be held, a stand-in for
// a disk that has not finished a write. It can also be made to fail them.
type gatedStore struct {
	*raft.InmemStore
	mu      sync.Mutex
	release chan struct{} // non-nil while held
	entered int           // StoreLogs calls begun
	fail    error
	// lastAtEntry maps each StoreLogs call's first index to the store's
	// last index when the call began.
	lastAtEntry map[uint64]uint64
}

func newGatedStore() *gatedStore {
	return &gatedStore{InmemStore: raft.NewInmemStore(), lastAtEntry: map[uint64]uint64{}}
}

func (g *gatedStore) StoreLogs(logs []*raft.Log) error {
	g.mu.Lock()
	g.entered++
	if len(logs) > 0 {
		last, _ := g.InmemStore.LastIndex()
		g.lastAtEntry[logs[0].Index] = last
	}
	ch, fail := g.release, g.fail
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
	if fail != nil {
		return fail
	}
	return g.InmemStore.StoreLogs(logs)
}

func (g *gatedStore) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

func (g *gatedStore) hold() {
	g.mu.Lock()
	g.release = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedStore) unhold() {
	g.mu.Lock()
	if g.release != nil {
		close(g.release)
		g.release = nil
	}
	g.mu.Unlock()
}

func (g *gatedStore) calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.entered
}

// has reports whether the durable store holds index.
func (g *gatedStore) has(index uint64) bool {
	var l raft.Log
	return g.InmemStore.GetLog(index, &l) == nil
}

func cmds(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint("cmd", i))})
	}
	return out
}

func newTestOverlap(t *testing.T, leader bool) (*overlapLog, *gatedStore, chan error) {
	t.Helper()
	inner := newGatedStore()
	fatal := make(chan error, 1)
	l := newOverlapLog(inner, func(err error) { fatal <- err })
	l.setLeaderCheck(func() bool { return leader })
	t.Cleanup(func() {
		inner.unhold()
		l.Close()
	})
	return l, inner, fatal
}

// done reports whether ch is closed, without waiting.
func done(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// afterHeldWrite waits until the writer is inside inner's held append, checks
// that result has not arrived, releases the append and returns the result.
func afterHeldWrite(t *testing.T, inner *gatedStore, result <-chan error, what string) error {
	t.Helper()
	waitFor(t, 5*time.Second, "the writer to start the append", func() bool { return inner.calls() >= 1 })
	select {
	case err := <-result:
		t.Fatalf("%s (%v) while the queued write was held", what, err)
	default:
	}
	inner.unhold()
	return <-result
}

func TestOverlapLogLeaderWritesBehindAndHoldsBackCommits(t *testing.T) {
	l, inner, _ := newTestOverlap(t, true)
	inner.hold()

	// The leader's StoreLogs returns while the disk still holds the write.
	if err := l.StoreLogs(cmds(1, 3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the writer to start the append", func() bool { return inner.calls() == 1 })
	if inner.has(1) {
		t.Fatal("entry 1 durable before the held write finished")
	}
	// The replicators can read the batch meanwhile.
	var got raft.Log
	if err := l.GetLog(2, &got); err != nil || string(got.Data) != "cmd2" {
		t.Fatalf("GetLog(2) = %q, %v; want the queued entry", got.Data, err)
	}
	if last, _ := l.LastIndex(); last != 3 {
		t.Fatalf("LastIndex = %d, want 3", last)
	}
	// Followers are told no commit at or past the first entry not on disk.
	if b := l.commitBound(3); b != 0 {
		t.Fatalf("commitBound(3) = %d with 1-3 queued, want 0", b)
	}
	if err := l.StoreLogs(cmds(4, 5)); err != nil {
		t.Fatal(err)
	}

	// The state machine waits for the entry it applies to be durable.
	applied := make(chan struct{})
	var durableAtApply bool
	go func() {
		l.waitDurable(4)
		durableAtApply = inner.has(4)
		close(applied)
	}()
	if done(applied) {
		t.Fatal("waitDurable(4) returned while 1-3 are still being written")
	}
	inner.unhold()
	<-applied
	if !durableAtApply {
		t.Fatal("waitDurable(4) returned before entry 4 was durable")
	}
	// 4 and 5 went to disk together, after 1-3, in one append.
	waitFor(t, 5*time.Second, "the queue to drain", func() bool { return l.firstPending.Load() == 0 })
	if inner.calls() != 2 {
		t.Fatalf("%d appends for two queued batches written behind one held append, want 2", inner.calls())
	}
	for i := uint64(1); i <= 5; i++ {
		if !inner.has(i) {
			t.Fatalf("entry %d not durable", i)
		}
	}
	if b := l.commitBound(5); b != 5 {
		t.Fatalf("commitBound(5) = %d with nothing queued, want 5", b)
	}
}

func TestOverlapLogFollowerAndNonCommandWritesAreSynchronous(t *testing.T) {
	follower, fInner, _ := newTestOverlap(t, false)
	if err := follower.StoreLogs(cmds(1, 2)); err != nil {
		t.Fatal(err)
	}
	if !fInner.has(2) {
		t.Fatal("a follower's StoreLogs returned before its entries were durable")
	}

	leader, inner, _ := newTestOverlap(t, true)
	inner.hold()
	if err := leader.StoreLogs(cmds(1, 2)); err != nil {
		t.Fatal(err)
	}
	// A configuration entry waits for everything queued, then is synced.
	conf := &raft.Log{Index: 3, Term: 1, Type: raft.LogConfiguration}
	stored := make(chan error, 1)
	go func() { stored <- leader.StoreLogs([]*raft.Log{conf}) }()
	if err := afterHeldWrite(t, inner, stored, "configuration entry stored"); err != nil {
		t.Fatal(err)
	}
	inner.mu.Lock()
	before := inner.lastAtEntry[3]
	inner.mu.Unlock()
	if before != 2 {
		t.Fatalf("the configuration entry's write began with the log at %d, want 2 (the queued entries first)", before)
	}
	for i := uint64(1); i <= 3; i++ {
		if !inner.has(i) {
			t.Fatalf("entry %d not durable after the configuration entry was stored", i)
		}
	}
	if fp := leader.firstPending.Load(); fp != 0 {
		t.Fatalf("firstPending = %d after a synchronous write, want 0", fp)
	}
}

func TestOverlapLogTailTruncationWaitsForQueuedWrites(t *testing.T) {
	l, inner, _ := newTestOverlap(t, true)
	if err := inner.InmemStore.StoreLogs(cmds(1, 4)); err != nil {
		t.Fatal(err)
	}
	inner.hold()
	if err := l.StoreLogs(cmds(5, 6)); err != nil {
		t.Fatal(err)
	}
	// Compacting the head does not wait for the tail.
	if err := l.DeleteRange(1, 2); err != nil {
		t.Fatal(err)
	}
	if first, _ := l.FirstIndex(); first != 3 {
		t.Fatalf("FirstIndex = %d after compacting 1-2, want 3", first)
	}
	// Cutting into the queued tail does: what it deletes is then really gone.
	deleted := make(chan error, 1)
	go func() { deleted <- l.DeleteRange(5, 6) }()
	if err := afterHeldWrite(t, inner, deleted, "tail deleted"); err != nil {
		t.Fatal(err)
	}
	if inner.has(5) || inner.has(6) {
		t.Fatal("entries 5-6 still on disk after DeleteRange(5, 6)")
	}
	if last, _ := l.LastIndex(); last != 4 {
		t.Fatalf("LastIndex = %d, want 4", last)
	}
}

func TestOverlapLogFailedWriteStopsTheNode(t *testing.T) {
	l, inner, fatal := newTestOverlap(t, true)
	boom := errors.New("disk on fire")
	inner.mu.Lock()
	inner.fail = boom
	inner.mu.Unlock()
	if err := l.StoreLogs(cmds(1, 2)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, boom) {
			t.Fatalf("fatal(%v), want it to wrap %v", err, boom)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failed write did not stop the node")
	}
	// Entries that never reached the disk are never reported durable,
	// and no later write is accepted.
	if b := l.commitBound(2); b != 0 {
		t.Fatalf("commitBound(2) = %d after the write of 1-2 failed, want 0", b)
	}
	if err := l.StoreLogs(cmds(3, 3)); !errors.Is(err, boom) {
		t.Fatalf("StoreLogs after a failed write = %v, want %v", err, boom)
	}
	if err := l.StoreLogs([]*raft.Log{{Index: 3, Term: 1, Type: raft.LogNoop}}); !errors.Is(err, boom) {
		t.Fatalf("synchronous StoreLogs after a failed write = %v, want %v", err, boom)
	}
}

// clampRecorder is a transport that records the commit index it is asked to
// send.
type clampRecorder struct {
	*raft.InmemTransport
	sent []uint64
}

func (c *clampRecorder) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	c.sent = append(c.sent, args.LeaderCommitIndex)
	return nil
}

func TestCommitClampTransport(t *testing.T) {
	_, inmem := raft.NewInmemTransport("")
	rec := &clampRecorder{InmemTransport: inmem}
	tr := guard(rec, func(c uint64) uint64 { return min(c, 7) }, nil)
	if _, ok := tr.(raft.WithPreVote); !ok {
		t.Fatal("clamping dropped the transport's pre-vote support")
	}
	if _, ok := tr.(raft.WithClose); !ok {
		t.Fatal("clamping dropped the transport's Close")
	}
	for _, c := range []uint64{0, 5, 9} {
		if err := tr.AppendEntries("x", "x", &raft.AppendEntriesRequest{LeaderCommitIndex: c}, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(rec.sent) != "[0 5 7]" {
		t.Fatalf("sent commit indexes %v, want [0 5 7]", rec.sent)
	}
	noPV := guard(struct{ raft.Transport }{inmem}, func(c uint64) uint64 { return c }, nil)
	if _, ok := noPV.(raft.WithPreVote); ok {
		t.Fatal("clamping claimed pre-vote for a transport without it")
	}
}

// TestOverlappedLeaderWriteIsHeldBack runs a 3-node cluster whose leader's
// disk holds its writes: the followers store and acknowledge a command
// meanwhile (the overlap), but nobody applies it and the proposer is not
// answered until the leader's copy is durable too.
func TestOverlappedLeaderWriteIsHeldBack(t *testing.T) {
	gates := []*gatedStore{newGatedStore(), newGatedStore(), newGatedStore()}
	c := newInmemClusterWith(t, 3, func(i int) *gatedStore { return gates[i] })
	t.Cleanup(func() { // before the nodes shut down (cleanups run last first)
		for _, g := range gates {
			g.unhold()
		}
	})
	leader := waitLeader(t, c.nodes)
	li := c.index(leader)
	first := applyOK(t, leader, "a")
	for _, f := range c.fsms {
		waitFSM(t, f, []string{"a"})
	}

	gates[li].hold()
	b := leader.raft.Apply([]byte("b"), 10*time.Second)
	bErr := make(chan error, 1)
	go func() { bErr <- b.Error() }()
	var bIdx uint64
	waitFor(t, 10*time.Second, "b dispatched", func() bool {
		bIdx = leader.raft.LastIndex()
		return bIdx > first
	})
	// A follower acknowledged b: raft counts it committed although the
	// leader's own write is still held.
	waitFor(t, 10*time.Second, "b acknowledged by a follower", func() bool { return leader.raft.CommitIndex() >= bIdx })
	if gates[li].has(bIdx) {
		t.Fatal("b is on the leader's disk while its write is held")
	}
	// The next batch goes out carrying the commit index; followers must
	// not learn of b's commit from it.
	cmd := leader.raft.Apply([]byte("c"), 10*time.Second)
	waitFor(t, 10*time.Second, "c acknowledged by a follower", func() bool { return leader.raft.CommitIndex() >= bIdx+1 })
	for i, n := range c.nodes {
		if i != li && n.raft.CommitIndex() >= bIdx {
			t.Fatalf("follower %s has commit index %d: told of b (%d) before the leader's copy was durable", n.ID(), n.raft.CommitIndex(), bIdx)
		}
	}
	for i, f := range c.fsms {
		if got := f.list(); len(got) != 1 {
			t.Fatalf("node %d applied %v while the leader's write was held", i, got)
		}
	}
	select {
	case err := <-bErr:
		t.Fatalf("b answered (%v) while the leader's write was held", err)
	default:
	}

	gates[li].unhold()
	if err := <-bErr; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Error(); err != nil {
		t.Fatal(err)
	}
	if !gates[li].has(bIdx) || !gates[li].has(bIdx+1) {
		t.Fatal("b and c not on the leader's disk after their applies returned")
	}
	for _, f := range c.fsms {
		waitFSM(t, f, []string{"a", "b", "c"})
	}
}
