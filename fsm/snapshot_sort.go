package fsm

import "math/bits"

// Sorting an index's sort keys for the bulk restore (snapshot_bulk.go): a
// radix sort, least significant digit first, of the bits that differ
// between the keys. A key is a (a, b, c) triple of integers, and the keys
// of a restore differ in few of their 160 bits (a create index or a time
// in the low 20 or 30, a lane number in a few): two or three passes per
// field that varies, each a count and a scatter, where a comparison sort
// takes log2(n) comparisons of three fields per key (BenchmarkSortKeys).

// radixDigit is the most bits a pass sorts by: its counts (16 KiB) stay
// in the core's first cache.
const radixDigit = 11

// radixSort returns the keys of c in cmpKey's order. Keys that compare
// equal keep the order they were added in.
func radixSort(c *chunked[sortKey]) []sortKey {
	keys := c.flat()
	if len(keys) < 2 {
		return keys
	}
	// The bits that differ between the keys, per field.
	first := keys[0]
	var da uint32
	var db, dc uint64
	for i := range keys {
		k := &keys[i]
		da |= k.a ^ first.a
		db |= k.b ^ first.b
		dc |= k.c ^ first.c
	}
	tmp := make([]sortKey, len(keys))
	src, dst := keys, tmp
	// Each field's differing bits, lowest to highest, in digits of at
	// most radixDigit bits; the fields from the least significant.
	for field, diff := range [3]uint64{2: uint64(da), 1: db, 0: dc} {
		if diff == 0 {
			continue
		}
		lo, hi := uint(bits.TrailingZeros64(diff)), uint(64-bits.LeadingZeros64(diff))
		n := (hi - lo + radixDigit - 1) / radixDigit
		width := (hi - lo + n - 1) / n
		for shift := lo; shift < hi; shift += width {
			radixPass(dst, src, uint(2-field), shift, width)
			src, dst = dst, src
		}
	}
	return src
}

// radixPass puts src's keys into dst in the order of the width bits at
// shift of a field (0 a, 1 b, 2 c), keeping the order of keys of equal
// bits.
func radixPass(dst, src []sortKey, field, shift, width uint) {
	var at [1 << radixDigit]int
	mask := uint64(1)<<width - 1
	digit := func(k *sortKey) uint64 {
		switch field {
		case 0:
			return uint64(k.a) >> shift & mask
		case 1:
			return k.b >> shift & mask
		}
		return k.c >> shift & mask
	}
	for i := range src {
		at[digit(&src[i])]++
	}
	sum := 0
	for d, n := range at[:mask+1] {
		at[d] = sum
		sum += n
	}
	for i := range src {
		d := digit(&src[i])
		dst[at[d]] = src[i]
		at[d]++
	}
}
