package fsm

import (
	"slices"
	"unsafe"

	"github.com/google/btree"
)

// Inserting in runs. The state's ordered indexes (the queue by lane, the
// queue age by stream, the state lanes by create index, leases and
// retention by time) take their items in ascending runs: each new job goes
// at the end of its lane, of its stream, of its state. google/btree splits
// a full node in the middle, so a node filled at its end keeps half its
// items forever and a queued job pays its trees twice what its items take
// (design.md §1). insertRun splits where the item goes instead, when that
// is past the middle: the left part keeps every item before it and fills
// up, the right part takes what follows (only the new item, at the end of
// a run). Items inserted at random split near the middle half the time
// and past it the other half: the id-keyed trees, whose keys are random,
// hold 1.5 slots per item this way where the library's insert holds 2.2
// (TestInsertRunFill).
//
// It works on the library's node layout through the same mirror as
// buildTree (snapshot_btree.go) and follows the library's insert step for
// step otherwise: one pass down, splitting a full child before entering
// it, copying any node the tree does not own (copy-on-write) first. If the
// layout does not match the library, it is the library's insert.

// insertRun is tr.ReplaceOrInsert(item), splitting full nodes where item
// goes when that is past their middle.
func insertRun[T any](tr *btree.BTreeG[T], less func(a, b T) bool, item T) (T, bool) {
	if !treeLayoutOK || tr.Len() == 0 {
		return tr.ReplaceOrInsert(item)
	}
	l := (*btreeLayout[T])(unsafe.Pointer(tr))
	maxItems := 2*l.degree - 1
	l.root = ownNode(l.root, l.cow)
	if len(l.root.items) >= maxItems {
		sep, right := splitAt(l.root, item, less, maxItems)
		left := l.root
		l.root = &bnode[T]{items: make([]T, 1, maxItems), children: make([]*bnode[T], 2, maxItems+1), cow: l.cow}
		l.root.items[0] = sep
		l.root.children[0], l.root.children[1] = left, right
	}
	n := l.root
	for {
		i, found := findItem(n.items, item, less)
		if found {
			out := n.items[i]
			n.items[i] = item
			return out, true
		}
		if len(n.children) == 0 {
			n.items = slices.Insert(n.items, i, item)
			l.length++
			var zero T
			return zero, false
		}
		child := ownNode(n.children[i], n.cow)
		n.children[i] = child
		if len(child.items) >= maxItems {
			sep, right := splitAt(child, item, less, maxItems)
			n.items = slices.Insert(n.items, i, sep)
			n.children = slices.Insert(n.children, i+1, right)
			switch {
			case less(item, sep):
			case less(sep, item):
				child = right
			default:
				out := n.items[i]
				n.items[i] = item
				return out, true
			}
		}
		n = child
	}
}

// findItem is where item goes among items (sorted by less), and whether
// an equal one is there.
func findItem[T any](items []T, item T, less func(a, b T) bool) (int, bool) {
	lo, hi := 0, len(items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(item, items[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo > 0 && !less(items[lo-1], item) {
		return lo - 1, true
	}
	return lo, false
}

// ownNode returns n if the tree of copy-on-write context cow owns it, else
// a copy it owns (as the library's mutableFor).
func ownNode[T any](n *bnode[T], cow unsafe.Pointer) *bnode[T] {
	if n.cow == cow {
		return n
	}
	out := &bnode[T]{items: make([]T, len(n.items), cap(n.items)), cow: cow}
	copy(out.items, n.items)
	if len(n.children) > 0 {
		out.children = make([]*bnode[T], len(n.children), cap(n.children))
		copy(out.children, n.children)
	}
	return out
}

// splitAt splits the full node n, which item is about to enter: n keeps
// the items before the split, the item at it goes up (returned), and a new
// node takes the rest. The split is where item goes when that is past the
// middle, else at the middle, as the library splits. No node is left
// empty, which the library's reads do not expect (Max of a tree whose last
// leaf is empty finds nothing): the new node keeps at least one item,
// unless it is a leaf that item, greater than every item of n, then enters.
func splitAt[T any](n *bnode[T], item T, less func(a, b T) bool, maxItems int) (T, *bnode[T]) {
	at := maxItems / 2
	if p, _ := findItem(n.items, item, less); p > at {
		last := maxItems - 2
		if p == len(n.items) && len(n.children) == 0 {
			last = maxItems - 1
		}
		at = min(p, last)
	}
	sep := n.items[at]
	rest := n.items[at+1:]
	// What follows a split past the middle is most likely the end of
	// another run, which grows no more: it gets a slice its size. A node
	// left empty for item, or a half, will fill up.
	size := maxItems
	if at > maxItems/2 && len(rest) > 0 {
		size = len(rest)
	}
	right := &bnode[T]{items: make([]T, len(rest), size), cow: n.cow}
	copy(right.items, rest)
	clear(n.items[at:])
	n.items = n.items[:at]
	if len(n.children) > 0 {
		kids := n.children[at+1:]
		right.children = make([]*bnode[T], len(kids), size+1)
		copy(right.children, kids)
		clear(n.children[at+1:])
		n.children = n.children[:at+1]
	}
	return sep, right
}
