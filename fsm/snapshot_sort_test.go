package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomKeys returns n sort keys whose fields vary in the bits of mask
// (a, b, c): few lanes, times of either sign, sequence numbers.
func randomKeys(rng *rand.Rand, n int, ma uint32, mb, mc uint64) *chunked[sortKey] {
	var c chunked[sortKey]
	for i := range n {
		c.add(sortKey{a: rng.Uint32() & ma, i: int32(i), b: signed(int64(rng.Uint64()&mb) - int64(mb/2)), c: rng.Uint64() & mc})
	}
	return &c
}

// The radix sort orders keys as cmpKey does, equal keys in the order
// added (as a stable comparison sort leaves them), whatever bytes vary.
func TestRadixSortOrdersAsCmpKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		n      int
		ma     uint32
		mb, mc uint64
	}{
		{0, 0, 0, 0}, {1, 7, 7, 7}, {2, 0, 1, 0}, {1000, 0, 0, 0}, // nothing varies
		{5000, 0, 1<<20 - 1, 0},                  // a create index
		{5000, 3, 15, 1<<18 - 1},                 // lanes, priorities, sequence numbers: ties in each
		{5000, 0, 1<<63 - 1, 1<<64 - 1},          // every byte
		{20000, 1<<32 - 1, 1 << 40, 1<<64 - 1},   // one high bit of b
		{3000, 0xff00, 0xff00ff, 0xff0000ff00ff}, // bytes here and there
	} {
		c := randomKeys(rng, tc.n, tc.ma, tc.mb, tc.mc)
		want := c.flat()
		slices.SortStableFunc(want, cmpKey)
		if got := radixSort(c); !slices.Equal(got, want) {
			t.Fatalf("%d keys (masks %x %x %x): radix sort differs from a stable sort by cmpKey", tc.n, tc.ma, tc.mb, tc.mc)
		}
	}
}

// BenchmarkSortKeys sorts the keys of a restore's create index and queue
// of 300k queued jobs: the radix sort against the comparison sort it
// replaced.
func BenchmarkSortKeys(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sorter := range []string{"radix", "pdq"} {
		b.Run(fmt.Sprintf("sort=%s", sorter), func(b *testing.B) {
			c := randomKeys(rng, 300_000, 0, 1<<19-1, 0)
			b.ReportAllocs()
			for b.Loop() {
				if sorter == "radix" {
					radixSort(c)
				} else {
					keys := c.flat()
					slices.SortFunc(keys, cmpKey)
				}
			}
		})
	}
}
