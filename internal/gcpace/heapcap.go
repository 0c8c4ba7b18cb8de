package gcpace

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The collector between restores. GOGC alone lets the heap grow to
// (1+GOGC/100) times the live heap before it collects: at the node's
// GOGC=200 a node holding 350 MB of jobs maps over a gigabyte, two thirds of
// it garbage. CapHeapGrowth caps that growth at a headroom instead: after
// every collection it sets the runtime's memory limit to what the process
// holds that is not garbage (the live heap, the free slots of the spans it
// lies in, stacks and the runtime's own memory) plus the headroom, so the
// next collection starts at the latest when the garbage reaches it, and
// the runtime returns memory above it to the system.
//
// Memory is traded for collector CPU: each collection marks the whole live
// heap, so collecting every 64 MiB of garbage over 300 MB of jobs while
// thousands of jobs a second arrive would spend most of a core marking. So
// the headroom adapts: after each collection, from the collector's share
// of the CPU since the previous one (its CPU time over the wall time times
// GOMAXPROCS), it grows when that share is above heapCapGCShare and shrinks
// when it is below, never under the floor the operator chose and never
// over what GOGC allows (twice the live heap at GOGC=200), where the cap
// changes nothing. A busy node thus runs as with GOGC alone, and a node
// holding many jobs with little traffic keeps about its live heap plus the
// floor. While the live heap is under half the floor, GOGC's goal comes
// first anyway. A lower limit the operator set (GOMEMLIMIT) stays in
// force, and a restore's own pacing (restore.go) replaces the cap
// while it runs. The cap only decides when the collector runs: no
// collection frees anything still reachable, so it cannot change what the
// node holds, only how much memory it takes and how much CPU it spends
// collecting (docs/performance.md, Tunables).

// heapCapGCShare is the collector's share of the CPU (of GOMAXPROCS cores)
// the headroom is adapted to. Measured on the 20,000-job benchmark (2
// cores, alternating runs): 0.04 let the leader grow to 211-214 MiB, 0.08
// to 171-176 MiB for 1-4% more server CPU per job, 0.15 to 164-166 MiB for
// 5-6% more; a queue growing to 300k filled as fast with 0.08 as with 0.04.
var heapCapGCShare = 0.08

// A node whose traffic drops after a busy spell would keep its grown
// headroom until the garbage fills it, which at a trickle takes minutes
// (the runtime forces a collection every two), and then give it back a
// quarter at a time. Instead the cap looks every quietCheck: when what was
// allocated since the last look is under an eighth of the headroom (the
// garbage would take over 80 s to fill it), it drops the headroom to the
// floor at once and returns what lies above it to the system (one
// collection). The adaptation above grows it again if traffic returns.
// A headroom already at its floor still holds up to the floor in garbage
// pages, which an idle node would keep mapped for as long as it stays
// idle; so a quiet look also collects and returns them once an eighth of
// the floor was allocated since the last return: one collection each time
// a busy spell ends, and at most one per eighth of the floor allocated
// while traffic trickles.
var quietCheck = 10 * time.Second

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
	g.headroom, g.floor = headroom, headroom
	g.userLimit = debug.SetMemoryLimit(-1)
	g.lastGC, g.lastGCCPU = time.Now(), 0
	g.mu.Unlock()
	armHeapCap()
	done := make(chan struct{})
	go trimWhenQuiet(done)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.headroom == 0 {
			return
		}
		close(done)
		g.headroom = 0
		if g.n == 0 {
			debug.SetMemoryLimit(g.userLimit)
		}
	}
}

// trimWhenQuiet drops the headroom to its floor whenever the process
// allocated little in the last quietCheck (trimHeadroom), until done.
func trimWhenQuiet(done <-chan struct{}) {
	t := time.NewTicker(quietCheck)
	defer t.Stop()
	last := allocated()
	returned := last // allocated at the last return to the system
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		now := allocated()
		if trimHeadroom(now-last, now-returned) {
			debug.FreeOSMemory()
			returned = allocated()
		}
		last = now
	}
}

// trimHeadroom reports whether the process is quiet and holds garbage
// worth returning to the system: alloc (the bytes allocated in the last
// quietCheck) is under an eighth of the headroom, and either the headroom
// had grown, or sinceReturn (the bytes allocated since the last return)
// reached an eighth of the floor. A grown headroom drops to its floor, and
// the memory limit with it. While a restore paces the collector it does
// nothing.
func trimHeadroom(alloc, sinceReturn int64) bool {
	g := &restoreGC
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n > 0 || alloc >= g.headroom/8 {
		return false
	}
	if g.headroom <= g.floor {
		return sinceReturn >= g.floor/8
	}
	g.headroom = g.floor
	debug.SetMemoryLimit(heapCapLimit(readHeapMetrics().held(), g.headroom, g.userLimit))
	return true
}

// allocated is the bytes the process has allocated on the heap so far.
func allocated() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
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
	m := readHeapMetrics()
	now := time.Now()
	if g.n == 0 { // a restore paces the collector itself
		if wall := now.Sub(g.lastGC).Seconds(); wall > 0 && g.lastGCCPU > 0 {
			share := (m.gcCPU - g.lastGCCPU) / (wall * float64(runtime.GOMAXPROCS(0)))
			g.headroom = nextHeadroom(g.headroom, share, heapCapGCShare, g.floor, m.live*max(m.gogc, 0)/100)
		}
		debug.SetMemoryLimit(heapCapLimit(m.held(), g.headroom, g.userLimit))
	}
	g.lastGC, g.lastGCCPU = now, m.gcCPU
	return true
}

// nextHeadroom adapts the headroom to the collector's CPU share since the
// last collection: the collector's CPU is about the live heap marked times
// the collections, and the collections are the allocation divided by the
// headroom, so the share scales as one over the headroom. The step is
// bounded (a quarter to four times) so one odd cycle does not swing it,
// and the result lies between floor and ceiling (GOGC's own growth).
func nextHeadroom(headroom int64, share, target float64, floor, ceiling int64) int64 {
	f := min(max(share/target, 0.25), 4)
	next := int64(float64(headroom) * f)
	return max(floor, min(next, max(ceiling, floor)))
}

// heapCapLimit is the memory limit for a process holding held bytes that
// are not garbage: held plus headroom, never above the operator's limit.
func heapCapLimit(held, headroom, userLimit int64) int64 {
	if held > math.MaxInt64-headroom {
		return userLimit
	}
	return min(userLimit, held+headroom)
}

// heapMetrics is what the cap reads after a collection.
type heapMetrics struct {
	live int64 // the heap the collection found live
	// unused is the free slots of the heap's spans in use: the collector
	// does not move objects, so a span keeps its memory while one object
	// in it lives, and a heap filled while requests came and went holds a
	// fifth to a quarter of its live bytes again this way.
	unused  int64
	nonHeap int64   // goroutine stacks, the runtime's metadata and buffers
	gogc    int64   // GOGC
	gcCPU   float64 // the collector's CPU seconds so far
}

// held is what the process holds that a collection cannot free. Leaving
// out the spans' free slots would set the limit under what the process
// holds: the runtime would then collect over and over without getting
// under it (a fifth of a core on an idle leader of 300,000 jobs).
func (m heapMetrics) held() int64 { return m.live + m.unused + m.nonHeap }

func readHeapMetrics() heapMetrics {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/gc/gogc:percent"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	m := heapMetrics{live: v(0), unused: v(3), nonHeap: max(v(1)-v(2)-v(3)-v(4)-v(5), 0), gogc: v(6)}
	if s[7].Value.Kind() == metrics.KindFloat64 {
		m.gcCPU = s[7].Value.Float64()
	}
	return m
}
