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

// The claim's event text is shared between jobs, and reads as it did.
func TestClaimTextShared(t *testing.T) {
	h := newHarness(t)
	a, b := h.create(CreateCommand{}), h.create(CreateCommand{})
	ra, rb := h.claim(a.ID, left), h.claim(b.ID, left)
	ea, eb := ra.Job.History()[len(ra.Job.History())-1], rb.Job.History()[len(rb.Job.History())-1]
	if ea.Text != "attempt 1 of 5" || eb.Text != ea.Text {
		t.Fatalf("claim texts %q and %q, want %q", ea.Text, eb.Text, "attempt 1 of 5")
	}
	if unsafe.StringData(ea.Text) != unsafe.StringData(eb.Text) {
		t.Fatal("two claims' equal texts are two strings")
	}
}
