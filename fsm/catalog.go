package fsm

import "github.com/google/btree"

// A catalog is one of the state's small registries of named objects: the
// developer queue's sessions and streams (by name), the control plane's
// gateways and workers (by id). Each is a copy-on-write B-tree of immutable
// objects keyed by a string, like the job indexes: a change stores a new
// object, so published views share the old one safely. One generic type
// serves all four, so a new registry is a field of tables, a line of the
// tree declaration (store_trees.go) and a row of the snapshot record table
// (catalogRow), not a new item type, ordering, lookups and restore case.
type catalog[V any] btree.BTreeG[catEntry[V]]

// catEntry is one object of a catalog under its key.
type catEntry[V any] struct {
	key string
	v   *V
}

func lessCatEntry[V any](a, b catEntry[V]) bool { return a.key < b.key }

func newCatalog[V any]() *catalog[V] {
	return (*catalog[V])(btree.NewG(btreeDegree, lessCatEntry[V]))
}

func (c *catalog[V]) tree() *btree.BTreeG[catEntry[V]] { return (*btree.BTreeG[catEntry[V]])(c) }

// get returns the object under key, or nil.
func (c *catalog[V]) get(key string) *V {
	it, _ := c.tree().Get(catEntry[V]{key: key})
	return it.v
}

// put stores v under key, replacing what was there. The writer marks the
// catalog's tree changed (writer.putIn).
func (c *catalog[V]) put(key string, v *V) { c.tree().ReplaceOrInsert(catEntry[V]{key, v}) }

func (c *catalog[V]) delete(key string) { c.tree().Delete(catEntry[V]{key: key}) }

// ascend calls fn with each object in key order until fn returns false.
func (c *catalog[V]) ascend(fn func(v *V) bool) {
	c.tree().Ascend(func(it catEntry[V]) bool { return fn(it.v) })
}

func (c *catalog[V]) len() int { return c.tree().Len() }

// Clone is an O(1) copy-on-write copy, as btree's: what a publish takes of
// a changed catalog.
func (c *catalog[V]) Clone() *catalog[V] { return (*catalog[V])(c.tree().Clone()) }

// putIn stores v under key in the writer's catalog c, tree number n.
func putIn[V any](w *writer, n int, c *catalog[V], key string, v *V) {
	c.put(key, v)
	w.dirty[n] = true
}

// deleteIn removes key from the writer's catalog c, tree number n.
func deleteIn[V any](w *writer, n int, c *catalog[V], key string) {
	c.delete(key)
	w.dirty[n] = true
}
