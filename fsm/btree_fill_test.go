package fsm

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/btree"
)

type runItem struct{ run, seq int }

func lessRun(a, b runItem) bool {
	if a.run != b.run {
		return a.run < b.run
	}
	return a.seq < b.seq
}

// checkTree fails unless tr is a well-formed B-tree holding exactly want
// (sorted): every leaf at one depth, no node over its size, children one
// more than items, items in order, the length right.
func checkTree(t *testing.T, tr *btree.BTreeG[runItem], want []runItem) {
	t.Helper()
	l := (*btreeLayout[runItem])(unsafe.Pointer(tr))
	maxItems := 2*l.degree - 1
	var got []runItem
	leafDepth := -1
	var walk func(n *bnode[runItem], depth int)
	walk = func(n *bnode[runItem], depth int) {
		if len(n.items) > maxItems {
			t.Fatalf("a node holds %d items, at most %d", len(n.items), maxItems)
		}
		// The library's deletes let a node go under degree-1 items (they
		// steal or merge before entering it), but its reads do not expect
		// an empty one: Max of a tree whose last leaf is empty finds
		// nothing.
		if len(n.items) == 0 && n != l.root {
			t.Fatalf("an empty node at depth %d", depth)
		}
		if len(n.children) == 0 {
			if leafDepth < 0 {
				leafDepth = depth
			} else if depth != leafDepth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			got = append(got, n.items...)
			return
		}
		if len(n.children) != len(n.items)+1 {
			t.Fatalf("a node of %d items has %d children", len(n.items), len(n.children))
		}
		for i, c := range n.children {
			walk(c, depth+1)
			if i < len(n.items) {
				got = append(got, n.items[i])
			}
		}
	}
	if l.root != nil {
		walk(l.root, 0)
	}
	if tr.Len() != len(want) || len(got) != len(want) {
		t.Fatalf("the tree says %d items and holds %d, want %d", tr.Len(), len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("item %d is %v, want %v", i, got[i], want[i])
		}
	}
	var seen []runItem
	tr.Ascend(func(it runItem) bool { seen = append(seen, it); return true })
	if len(seen) != len(want) {
		t.Fatalf("Ascend walks %d items, want %d", len(seen), len(want))
	}
	if len(want) > 0 {
		if lo, ok := tr.Min(); !ok || lo != want[0] {
			t.Fatalf("Min is %v (%v), want %v", lo, ok, want[0])
		}
		if hi, ok := tr.Max(); !ok || hi != want[len(want)-1] {
			t.Fatalf("Max is %v (%v), want %v", hi, ok, want[len(want)-1])
		}
	}
}

func sortedKeys(m map[runItem]bool) []runItem {
	tr := btree.NewG(4, lessRun)
	for k := range m {
		tr.ReplaceOrInsert(k)
	}
	out := make([]runItem, 0, len(m))
	tr.Ascend(func(it runItem) bool { out = append(out, it); return true })
	return out
}

// insertRun keeps the tree what the library's own operations expect,
// whatever the order of inserts, with deletes by the library between them,
// and clones (copy-on-write) taken along the way never change.
func TestInsertRunKeepsTheTree(t *testing.T) {
	if !treeLayoutOK {
		t.Skip("the btree layout differs from the copy in snapshot_btree.go (TestTreeLayoutMatchesTheLibrary)")
	}
	for _, degree := range []int{2, 3, 16} {
		rng := rand.New(rand.NewPCG(uint64(degree), 7))
		tr := btree.NewG(degree, lessRun)
		want := map[runItem]bool{}
		next := make([]int, 8)
		type frozen struct {
			tr   *btree.BTreeG[runItem]
			want []runItem
		}
		var clones []frozen
		for step := range 30_000 {
			switch r := rng.IntN(10); {
			case r < 6: // the end of a run
				run := rng.IntN(len(next))
				next[run]++
				it := runItem{run, 2000 + next[run]} // past any item inserted at random
				if _, found := insertRun(tr, lessRun, it); found {
					t.Fatalf("step %d: a new item %v found in the tree", step, it)
				}
				want[it] = true
			case r < 7: // anywhere, maybe an item already there
				it := runItem{rng.IntN(len(next)), rng.IntN(2000)}
				_, found := insertRun(tr, lessRun, it)
				if found != want[it] {
					t.Fatalf("step %d: insert of %v found %v, want %v", step, it, found, want[it])
				}
				want[it] = true
			case r < 8: // a run's first item goes (a claim takes a lane's head)
				run := rng.IntN(len(next))
				var first runItem
				found := false
				tr.AscendGreaterOrEqual(runItem{run, -1}, func(it runItem) bool {
					first, found = it, it.run == run
					return false
				})
				if found {
					if _, ok := tr.Delete(first); !ok {
						t.Fatalf("step %d: the head %v of run %d is not there to delete", step, first, run)
					}
					delete(want, first)
				}
			default: // the library deletes, merging and stealing between nodes
				it := runItem{rng.IntN(len(next)), rng.IntN(2000 + next[0])}
				if _, found := tr.Delete(it); found != want[it] {
					t.Fatalf("step %d: delete of %v found %v, want %v", step, it, found, want[it])
				}
				delete(want, it)
			}
			if step%997 == 0 {
				clones = append(clones, frozen{tr.Clone(), sortedKeys(want)})
			}
			if step%499 == 0 {
				checkTree(t, tr, sortedKeys(want))
			}
		}
		checkTree(t, tr, sortedKeys(want))
		for _, c := range clones {
			checkTree(t, c.tr, c.want)
		}
	}
}

// Runs filled at their ends leave their nodes nearly full; items inserted
// at random fill them about as the library's own insert does.
func TestInsertRunFill(t *testing.T) {
	if !treeLayoutOK {
		t.Skip("the btree layout differs from the copy in snapshot_btree.go (TestTreeLayoutMatchesTheLibrary)")
	}
	const n = 60_000
	fill := func(insert func(tr *btree.BTreeG[runItem], it runItem), order func(i int) runItem) float64 {
		tr := btree.NewG(btreeDegree, lessRun)
		for i := range n {
			insert(tr, order(i))
			if i%50 == 0 {
				tr = tr.Clone() // as a publish does
			}
		}
		return slotsPerItem(tr, (*btreeLayout[runItem])(unsafe.Pointer(tr)).root)
	}
	lib := func(tr *btree.BTreeG[runItem], it runItem) { tr.ReplaceOrInsert(it) }
	run := func(tr *btree.BTreeG[runItem], it runItem) { insertRun(tr, lessRun, it) }
	rng := rand.New(rand.NewPCG(1, 2))
	perm := rng.Perm(n)
	orders := []struct {
		name string
		at   func(i int) runItem
		max  float64
	}{
		{"in order", func(i int) runItem { return runItem{0, i} }, 1.1},
		{"20 runs at once", func(i int) runItem { return runItem{i % 20, i / 20} }, 1.2},
		{"at random", func(i int) runItem { return runItem{0, perm[i]} }, 0},
	}
	for _, o := range orders {
		got, was := fill(run, o.at), fill(lib, o.at)
		t.Logf("%s: %.2f item slots per item (the library's insert: %.2f)", o.name, got, was)
		if o.max > 0 && got > o.max {
			t.Errorf("%s: %.2f item slots per item, want at most %.2f", o.name, got, o.max)
		}
		if got > was*1.1 {
			t.Errorf("%s: %.2f item slots per item, more than the library's %.2f", o.name, got, was)
		}
	}
}
