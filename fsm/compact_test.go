package fsm

import (
	"testing"
	"unsafe"
)

// slotsPerItem is how many item slots tr's nodes hold per item it holds:
// 1 for nodes with no spare room.
func slotsPerItem[T any](tr interface{ Len() int }, root *bnode[T]) float64 {
	slots := 0
	var walk func(n *bnode[T])
	walk = func(n *bnode[T]) {
		if n == nil {
			return
		}
		slots += cap(n.items)
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(root)
	return float64(slots) / float64(tr.Len())
}

// A state lane grows in order (by create index): its nodes, half full
// after each split, must not also carry slices grown far past what a node
// can hold (as they do at degree 16, 60 slots for a node of at most 31).
func TestLaneTreeFill(t *testing.T) {
	if !treeLayoutOK {
		t.Skip("the btree layout differs from the copy in snapshot_btree.go (TestTreeLayoutMatchesTheLibrary)")
	}
	tr := newLaneTree()
	for i := range 20_000 {
		tr.ReplaceOrInsert(seqItem{seq: uint64(i)})
	}
	got := slotsPerItem(tr, (*btreeLayout[seqItem])(unsafe.Pointer(tr)).root)
	if got > 2.5 {
		t.Fatalf("a lane filled in order holds %.2f item slots per job, want at most 2.5", got)
	}
}

// The claim's event text is shared between jobs, and reads as it did.
func TestClaimTextShared(t *testing.T) {
	h := newHarness(t)
	a, b := h.create(CreateCommand{}), h.create(CreateCommand{})
	ra, rb := h.claim(a.ID, left), h.claim(b.ID, left)
	ea, eb := ra.Job.History[len(ra.Job.History)-1], rb.Job.History[len(rb.Job.History)-1]
	if ea.Text != "attempt 1 of 5" || eb.Text != ea.Text {
		t.Fatalf("claim texts %q and %q, want %q", ea.Text, eb.Text, "attempt 1 of 5")
	}
	if unsafe.StringData(ea.Text) != unsafe.StringData(eb.Text) {
		t.Fatal("two claims' equal texts are two strings")
	}
}
