package fsm

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/btree"
)

// The copy of google/btree's node layout buildTree writes through matches
// the library's: if an upgrade of the library changes it, buildTree falls
// back to inserts, and this fails so the copy gets updated.
func TestTreeLayoutMatchesTheLibrary(t *testing.T) {
	if !treeLayoutOK {
		t.Fatal("google/btree's BTreeG or node no longer matches btreeLayout and bnode (snapshot_btree.go): restores insert one item at a time")
	}
}

// checkShape fails unless tr is a B-tree as the library keeps one: every
// leaf at one depth, every node but the root holding degree-1 to
// 2*degree-1 items, an inner node one child more than items, the items in
// order, and (owned) every node the tree's to change in place.
func checkShape[T any](t *testing.T, tr *btree.BTreeG[T], less func(a, b T) bool, owned bool) {
	t.Helper()
	l := (*btreeLayout[T])(unsafe.Pointer(tr))
	depth := -1
	count := 0
	var prev *T
	var walk func(n *bnode[T], d int, root bool)
	walk = func(n *bnode[T], d int, root bool) {
		if owned && n.cow != l.cow {
			t.Fatalf("a node at depth %d is not the tree's", d)
		}
		if !root && (len(n.items) < l.degree-1 || len(n.items) > 2*l.degree-1) {
			t.Fatalf("a node at depth %d holds %d items", d, len(n.items))
		}
		if len(n.children) == 0 {
			if depth == -1 {
				depth = d
			} else if depth != d {
				t.Fatalf("leaves at depths %d and %d", depth, d)
			}
		} else if len(n.children) != len(n.items)+1 {
			t.Fatalf("a node with %d items has %d children", len(n.items), len(n.children))
		}
		for i := range n.items {
			if len(n.children) > 0 {
				walk(n.children[i], d+1, false)
			}
			if prev != nil && !less(*prev, n.items[i]) {
				t.Fatal("items out of order")
			}
			prev = &n.items[i]
			count++
		}
		if len(n.children) > 0 {
			walk(n.children[len(n.items)], d+1, false)
		}
	}
	if l.root != nil {
		walk(l.root, 0, true)
	}
	if count != tr.Len() {
		t.Fatalf("the tree says it holds %d items, its nodes hold %d", tr.Len(), count)
	}
}

// A tree built from sorted items is a tree of the library's shape holding
// them, and stays one under inserts, deletes and clones, as a tree filled
// by inserts does.
func TestBuildTree(t *testing.T) {
	less := func(a, b int) bool { return a < b }
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []int{0, 1, 2, 30, 31, 32, 33, 63, 64, 65, 500, 1023, 1024, 1025, 1057, 5000, 33000, 40000}
	for range 20 {
		sizes = append(sizes, rng.IntN(70000))
	}
	for _, n := range sizes {
		items := make([]int, n)
		for i := range items {
			items[i] = 2 * i
		}
		built := btree.NewG(btreeDegree, less)
		buildSorted(built, items)
		checkShape(t, built, less, true)
		want := btree.NewG(btreeDegree, less)
		for _, it := range items {
			want.ReplaceOrInsert(it)
		}
		view := built.Clone()
		// The same operations on both, the clone untouched.
		for range min(3*n, 3000) + 10 {
			k := rng.IntN(2*n + 10)
			if rng.IntN(2) == 0 {
				_, a := built.ReplaceOrInsert(k)
				_, b := want.ReplaceOrInsert(k)
				if a != b {
					t.Fatalf("n %d: insert %d: replaced %v, inserts say %v", n, k, a, b)
				}
			} else {
				_, a := built.Delete(k)
				_, b := want.Delete(k)
				if a != b {
					t.Fatalf("n %d: delete %d: found %v, inserts say %v", n, k, a, b)
				}
			}
		}
		checkShape(t, built, less, false)
		var got, exp []int
		built.Ascend(func(v int) bool { got = append(got, v); return true })
		want.Ascend(func(v int) bool { exp = append(exp, v); return true })
		if len(got) != len(exp) {
			t.Fatalf("n %d: %d items, inserts leave %d", n, len(got), len(exp))
		}
		for i := range got {
			if got[i] != exp[i] {
				t.Fatalf("n %d: item %d is %d, inserts leave %d", n, i, got[i], exp[i])
			}
		}
		i := 0
		view.Ascend(func(v int) bool {
			if v != items[i] {
				t.Fatalf("n %d: the clone's item %d changed to %d", n, i, v)
			}
			i++
			return true
		})
		if i != n {
			t.Fatalf("n %d: the clone holds %d items", n, i)
		}
	}
}

// BenchmarkBuildTree fills a tree of 300,000 queue items in order, by
// inserts and by buildTree.
func BenchmarkBuildTree(b *testing.B) {
	items := make([]queueItem, 300_000)
	jobs := make([]Job, len(items))
	for i := range items {
		items[i] = queueItem{lane: laneOfQueue(DefaultStream, "", ""), rank: int64(i), seq: uint64(i), j: &jobs[i]}
	}
	b.Run("insert", func(b *testing.B) {
		for b.Loop() {
			tr := btreeOf(lessQueue)()
			for _, it := range items {
				tr.ReplaceOrInsert(it)
			}
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			buildSorted(btreeOf(lessQueue)(), items)
		}
	})
}
