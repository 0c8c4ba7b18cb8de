package fsm

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The collector between restores. GOGC alone lets the heap grow to
// (1+GOGC/100) times the live heap before it collects: at the node's
// GOGC=200 a node holding 350 MB of jobs maps over a gigabyte, two thirds of
// it garbage. CapHeapGrowth caps that growth at a fixed headroom instead:
// after every collection it sets the runtime's memory limit to what the
// process holds that is not garbage (the live heap, stacks and the
// runtime's own memory) plus the headroom, so the next collection starts
// at the latest when the garbage reaches it, and the runtime returns memory
// above it to the system. While the live heap is under half the headroom,
// GOGC's goal comes first and nothing changes; above, a collection marks
// the live heap once per headroom's worth of allocation instead of once
// per two live heaps'. A lower limit the operator set (GOMEMLIMIT) stays
// in force, and a restore's own pacing (snapshot_gc.go) replaces the cap
// while it runs. The cap only decides when the collector runs: no
// collection frees anything still reachable, so it cannot change what the
// node holds, only how much memory it takes and how much CPU it spends
// collecting (docs/performance.md, Tunables).

// CapHeapGrowth caps the heap's growth beyond the memory in use at
// headroom bytes, from the next collection on, until the returned function
// is called. It is process-wide: call it once, from the node's start.
// headroom <= 0 does nothing.
func CapHeapGrowth(headroom int64) (stop func()) {
	if headroom <= 0 {
		return func() {}
	}
	g := &restoreGC
	g.mu.Lock()
	g.headroom = headroom
	g.userLimit = debug.SetMemoryLimit(-1)
	g.mu.Unlock()
	armHeapCap()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.headroom == 0 {
			return
		}
		g.headroom = 0
		if g.n == 0 {
			debug.SetMemoryLimit(g.userLimit)
		}
	}
}

// heapCapSentinel is unreachable as soon as it is made: its finalizer runs
// after each collection and re-arms itself while the cap is on.
type heapCapSentinel struct{ _ *int }

func armHeapCap() {
	runtime.SetFinalizer(&heapCapSentinel{}, afterGC)
}

func afterGC(s *heapCapSentinel) {
	if capHeap() {
		runtime.SetFinalizer(s, afterGC)
	}
}

// capHeap sets the memory limit from the collection that just ended and
// reports whether the cap is still on.
func capHeap() bool {
	g := &restoreGC
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.headroom == 0 {
		return false
	}
	if g.n == 0 { // a restore paces the collector itself
		debug.SetMemoryLimit(heapCapLimit(heldMemory(), g.headroom, g.userLimit))
	}
	return true
}

// heapCapLimit is the memory limit for a process holding held bytes that
// are not garbage: held plus headroom, never above the operator's limit.
func heapCapLimit(held, headroom, userLimit int64) int64 {
	if held > math.MaxInt64-headroom {
		return userLimit
	}
	return min(userLimit, held+headroom)
}

// heldMemory is what the process holds that a collection cannot free: the
// heap the last collection found live, and the memory that is not heap
// (goroutine stacks, the runtime's metadata and buffers).
func heldMemory() int64 {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	nonHeap := v(1) - v(2) - v(3) - v(4) - v(5)
	return v(0) + max(nonHeap, 0)
}
