package fsm

import (
	"testing"

	"github.com/google/btree"
	"github.com/google/uuid"
)

// BenchmarkIDLookup: a job lookup by id in a tree of 300,000 random ids, with
// the id item's prefix (what the store uses) and with the plain string
// comparison it replaced.
func BenchmarkIDLookup(b *testing.B) {
	const n = 300_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	for _, mode := range []string{"prefix", "string"} {
		b.Run(mode, func(b *testing.B) {
			less := lessID
			if mode == "string" {
				less = func(a, b idItem) bool { return a.key < b.key }
			}
			tr := btree.NewG(btreeDegree, less)
			for _, id := range ids {
				tr.ReplaceOrInsert(idOf(id, nil))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tr.Get(idOf(ids[(i*7919)%n], nil))
			}
		})
	}
}
