package fsm

import (
	"reflect"
	"unsafe"

	"github.com/google/btree"
)

// Building a B-tree from sorted items. google/btree has no bulk load: a
// tree grows by ReplaceOrInsert alone, which for items in ascending order
// still searches every level of the right-most path, grows each leaf's
// slice by doubling and copies half of it at every split (ten times what
// laying the nodes out directly costs, BenchmarkBuildTree). So buildTree
// lays the nodes out itself, bottom-up, through a copy of the library's
// node layout (v1.1.3: btree_generic.go's BTreeG and node): every leaf and
// inner node full but for an even spread of the remainder, all leaves at
// one depth, each node owned by the tree (its copy-on-write context), as
// inserts would have left them but for how full the nodes are.
//
// The layout is checked against the library's own types by reflection
// when the package loads (treeLayoutOK); if another version of the library
// differs, buildTree inserts the items one by one instead, and
// TestTreeLayoutMatchesTheLibrary fails so the copy gets updated.

// bnode and btreeLayout mirror btree.node and btree.BTreeG field for field.
type bnode[T any] struct {
	items    []T
	children []*bnode[T]
	cow      unsafe.Pointer
}

type btreeLayout[T any] struct {
	degree int
	length int
	root   *bnode[T]
	cow    unsafe.Pointer
}

// treeLayoutOK says whether btreeLayout and bnode match the library's
// types. The layout of both is the same whatever T is (ints, pointers and
// slice headers), so one instance stands for all.
var treeLayoutOK = treeLayoutMatches()

func treeLayoutMatches() bool {
	tt, nt := reflect.TypeOf(btree.BTreeG[idItem]{}), reflect.TypeOf(bnode[idItem]{})
	if !sameFields(tt, reflect.TypeOf(btreeLayout[idItem]{})) {
		return false
	}
	root, cow := tt.Field(2).Type, tt.Field(3).Type
	if root.Kind() != reflect.Pointer || root.Elem().Kind() != reflect.Struct || !sameFields(root.Elem(), nt) {
		return false
	}
	node := root.Elem()
	items, children := node.Field(0).Type, node.Field(1).Type
	return tt.Field(0).Type.Kind() == reflect.Int && tt.Field(1).Type.Kind() == reflect.Int &&
		items.Kind() == reflect.Slice && items.Elem() == reflect.TypeOf(idItem{}) &&
		children.Kind() == reflect.Slice && children.Elem() == root &&
		node.Field(2).Type == cow
}

// sameFields reports whether struct types a and b have fields of the same
// names, offsets, sizes and kinds (any pointer standing for another).
func sameFields(a, b reflect.Type) bool {
	if a.Size() != b.Size() || a.NumField() != b.NumField() {
		return false
	}
	kind := func(t reflect.Type) reflect.Kind {
		if t.Kind() == reflect.UnsafePointer {
			return reflect.Pointer
		}
		return t.Kind()
	}
	for i := range a.NumField() {
		x, y := a.Field(i), b.Field(i)
		if x.Name != y.Name || x.Offset != y.Offset || x.Type.Size() != y.Type.Size() || kind(x.Type) != kind(y.Type) {
			return false
		}
	}
	return true
}

// buildTree fills the empty tree tr with the n items at(0) to at(n-1),
// which must be in tr's order with no two equal.
func buildTree[T any](tr *btree.BTreeG[T], n int, at func(i int) T) {
	if tr.Len() != 0 {
		panic("fsm: buildTree into a tree that is not empty")
	}
	if !treeLayoutOK {
		for i := range n {
			tr.ReplaceOrInsert(at(i))
		}
		return
	}
	if n == 0 {
		return
	}
	l := (*btreeLayout[T])(unsafe.Pointer(tr))
	maxItems := 2*l.degree - 1
	// The leaves: as few as hold every item but one between each two
	// (which goes up a level), the items spread evenly over them.
	leaves := (n + 1 + maxItems) / (maxItems + 1)
	nodes := make([]*bnode[T], 0, leaves)
	seps := make([]T, 0, leaves-1) // the items between each two nodes of the level
	per, extra := (n-(leaves-1))/leaves, (n-(leaves-1))%leaves
	next := 0
	for i := range leaves {
		size := per
		if i < extra {
			size++
		}
		leaf := &bnode[T]{items: make([]T, size, maxItems), cow: l.cow}
		for k := range leaf.items {
			leaf.items[k] = at(next)
			next++
		}
		nodes = append(nodes, leaf)
		if i < leaves-1 {
			seps = append(seps, at(next))
			next++
		}
	}
	// Each level above: as few nodes as hold the level below, its nodes
	// spread evenly, with the items between them; the items between two
	// groups go up again.
	for len(nodes) > 1 {
		parents := (len(nodes) + maxItems) / (maxItems + 1)
		per, extra := len(nodes)/parents, len(nodes)%parents
		up := make([]*bnode[T], 0, parents)
		var upSeps []T
		next := 0
		for i := range parents {
			size := per
			if i < extra {
				size++
			}
			p := &bnode[T]{items: make([]T, 0, maxItems), children: make([]*bnode[T], 0, maxItems+1), cow: l.cow}
			p.children = append(p.children, nodes[next:next+size]...)
			p.items = append(p.items, seps[next:next+size-1]...)
			next += size
			if i < parents-1 {
				upSeps = append(upSeps, seps[next-1])
			}
			up = append(up, p)
		}
		nodes, seps = up, upSeps
	}
	l.root, l.length = nodes[0], n
}

// buildSorted fills the empty tree tr with items, in tr's order with no
// two equal.
func buildSorted[T any](tr *btree.BTreeG[T], items []T) {
	buildTree(tr, len(items), func(i int) T { return items[i] })
}
