package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

func applyLog(f *FSM, log [][]byte, from int, term uint64) {
	for i := from; i < len(log); i++ {
		f.Apply(&raft.Log{Index: uint64(i + 1), Term: term, Type: raft.LogCommand, Data: log[i]})
	}
}

func TestStateHashFollowsTheLog(t *testing.T) {
	log := randomLog(11, 500)[:500] // an iteration may write more than one entry
	a, _ := New(Config{})
	b, _ := New(Config{})
	applyLog(a, log, 0, 3)
	// b applies the same log in batches, with a no-op in between that the
	// hash must not see.
	var batch []*raft.Log
	for i, d := range log {
		batch = append(batch, &raft.Log{Index: uint64(i + 1), Term: 3, Type: raft.LogCommand, Data: d})
	}
	b.ApplyBatch(batch[:200])
	b.ApplyBatch(batch[200:])
	ia, ha, oka := a.StateHash()
	ib, hb, okb := b.StateHash()
	n := uint64(len(log)) // some steps of the log are two entries
	if !oka || !okb || ia != n || ia != ib || ha != hb {
		t.Fatalf("same log, different hashes: %d %x %v / %d %x %v", ia, ha, oka, ib, hb, okb)
	}
	if ha == (Hash{}) {
		t.Fatal("hash of 500 commands is zero")
	}

	// Every index answers the same on both, and differs from its neighbours.
	for _, i := range []uint64{0, 1, 2, 250, n - 1, n} {
		x, okx := a.StateHashAt(i)
		y, oky := b.StateHashAt(i)
		if !okx || !oky || x != y {
			t.Fatalf("index %d: %x %v / %x %v", i, x, okx, y, oky)
		}
	}
	h1, _ := a.StateHashAt(1)
	h2, _ := a.StateHashAt(2)
	if h1 == h2 {
		t.Fatal("hash did not change between two commands")
	}
	if _, ok := a.StateHashAt(n + 1); ok {
		t.Fatal("answered for an index not applied")
	}

	// A replica that applied one other entry at one index (same term: the
	// log-matching violation of a divergence) differs from there on.
	c, _ := New(Config{})
	other := append([][]byte(nil), log...)
	other[300] = log[301]
	applyLog(c, other, 0, 3)
	x, _ := c.StateHashAt(300)
	y, _ := a.StateHashAt(300)
	if x != y {
		t.Fatal("hashes differ before the divergent entry")
	}
	x, _ = c.StateHashAt(301)
	y, _ = a.StateHashAt(301)
	if x == y {
		t.Fatal("hashes agree at the divergent entry")
	}
	_, hc, _ := c.StateHash()
	if hc == ha {
		t.Fatal("a diverged replica ends with the same hash")
	}
	// So does one whose entry differs only in term.
	d, _ := New(Config{})
	applyLog(d, log[:100], 0, 3)
	d.Apply(&raft.Log{Index: 101, Term: 4, Type: raft.LogCommand, Data: log[100]})
	x, _ = d.StateHashAt(101)
	y, _ = a.StateHashAt(101)
	if x == y {
		t.Fatal("an entry of another term gave the same hash")
	}
}

func TestStateHashSurvivesSnapshots(t *testing.T) {
	log := randomLog(12, 400)
	a, _ := New(Config{})
	applyLog(a, log[:250], 0, 2)
	snap, _ := a.Snapshot()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	applyLog(a, log, 250, 2)

	b, _ := New(Config{})
	if err := b.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	wantAt250, _ := a.StateHashAt(250)
	if got, ok := b.StateHashAt(250); !ok || got != wantAt250 {
		t.Fatalf("restored node at 250: %x %v, want %x", got, ok, wantAt250)
	}
	if _, ok := b.StateHashAt(100); ok {
		t.Fatal("restored node answered for an index before its snapshot")
	}
	applyLog(b, log, 250, 2)
	ia, ha, _ := a.StateHash()
	ib, hb, okb := b.StateHash()
	if !okb || ia != ib || ha != hb {
		t.Fatalf("after restore and the same entries: %d %x / %d %x", ia, ha, ib, hb)
	}

	// A snapshot written without a hash (an older build) leaves it unknown:
	// nothing is compared rather than a false alarm raised.
	legacy, _ := a.Snapshot()
	legacy.(*snapshot).hashKnown = false
	sink.Reset()
	if err := legacy.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	c, _ := New(Config{})
	if err := c.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.StateHash(); ok {
		t.Fatal("hash known after a snapshot that carried none")
	}
	if _, ok := c.StateHashAt(400); ok {
		t.Fatal("unknown hash answered a lookup")
	}
}

func TestStateHashRingDropsOldIndexes(t *testing.T) {
	a, _ := New(Config{})
	cmd := MustEncode(CmdReap, &ReapCommand{Now: 1, Max: 1})
	n := uint64(hashRingSize + 10)
	for i := uint64(1); i <= n; i++ {
		a.Apply(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: cmd})
	}
	if _, ok := a.StateHashAt(5); ok {
		t.Fatal("answered for an index the ring no longer holds")
	}
	if _, ok := a.StateHashAt(n - hashRingSize + 1); !ok {
		t.Fatal("no answer for the oldest index held")
	}
}
