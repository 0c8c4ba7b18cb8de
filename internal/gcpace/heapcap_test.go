package gcpace

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestHeapCapBoundsGarbage: with the cap on, the collector's next cycle is
// due once the heap is the live heap plus the headroom (and a margin for
// the runtime), where GOGC alone lets it grow to twice the live heap;
// stopping the cap gives back the operator's limit and GOGC's goal, and a
// restore while the cap is on paces from the operator's limit, not the
// cap's.
func TestHeapCapBoundsGarbage(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// Hold the headroom at its floor (TestNextHeadroom covers how it
	// adapts).
	defer func(s float64) { heapCapGCShare = s }(heapCapGCShare)
	heapCapGCShare = 1
	const userLimit = 1 << 40
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(userLimit))

	const live, headroom = 96 << 20, 16 << 20
	keep := make([][]byte, 0, live>>20)
	for range live >> 20 {
		keep = append(keep, make([]byte, 1<<20))
	}
	stop := CapHeapGrowth(headroom)
	deadline := time.Now().Add(30 * time.Second)
	for debug.SetMemoryLimit(-1) == userLimit {
		if time.Now().After(deadline) {
			t.Fatal("no memory limit set after collections")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer runs on its own goroutine
	}
	limit := debug.SetMemoryLimit(-1)
	if limit < live+headroom || limit > live+headroom+64<<20 {
		t.Fatalf("limit %d MiB with %d MiB live and %d MiB headroom", limit>>20, live>>20, headroom>>20)
	}

	// The collector's goal for the next cycle is now the live heap plus
	// about the headroom; GOGC=100 alone puts it at twice the live heap.
	runtime.GC()
	if goal := heapGoal(); goal > live+headroom+48<<20 {
		t.Errorf("heap goal %d MiB with the cap at %d MiB of garbage over %d MiB live", goal>>20, headroom>>20, live>>20)
	}

	// A restore paces from the operator's limit, and gives it back.
	release := HoldForRestore()
	if got := restoreGC.limit; got != userLimit {
		t.Errorf("restore under the cap kept limit %d, want the operator's %d", got, userLimit)
	}
	release()
	stop()
	if got := debug.SetMemoryLimit(-1); got != userLimit {
		t.Errorf("after stop the limit is %d, want the operator's %d", got, userLimit)
	}
	runtime.GC()
	if goal := heapGoal(); goal < 2*live {
		t.Errorf("heap goal %d MiB after stop, want GOGC's %d MiB or more", goal>>20, 2*live>>20)
	}
	runtime.KeepAlive(keep)
}

// heapGoal is the heap size at which the next collection is to end.
func heapGoal() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func TestHeapCapLimit(t *testing.T) {
	for _, tc := range []struct{ held, headroom, user, want int64 }{
		{100, 50, math.MaxInt64, 150},
		{100, 50, 120, 120},                        // the operator's limit stays in force
		{math.MaxInt64 - 10, 50, 1 << 50, 1 << 50}, // no overflow
	} {
		if got := heapCapLimit(tc.held, tc.headroom, tc.user); got != tc.want {
			t.Errorf("heapCapLimit(%d, %d, %d) = %d, want %d", tc.held, tc.headroom, tc.user, got, tc.want)
		}
	}
	var s = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatal("this Go has no /gc/heap/live:bytes: the heap cap would see no live heap")
	}
}

// The headroom grows while the collector takes more than its share of the
// CPU, up to GOGC's own growth, and shrinks back to the floor when it
// takes less, by bounded steps.
func TestNextHeadroom(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                 string
		headroom             int64
		share, target        float64
		floor, ceiling, want int64
	}{
		{"on target", 64 * mib, 0.04, 0.04, 64 * mib, 600 * mib, 64 * mib},
		{"twice the share", 64 * mib, 0.08, 0.04, 64 * mib, 600 * mib, 128 * mib},
		{"a step is at most four times", 64 * mib, 1, 0.04, 64 * mib, 600 * mib, 256 * mib},
		{"never over GOGC's growth", 512 * mib, 1, 0.04, 64 * mib, 600 * mib, 600 * mib},
		{"half the share", 256 * mib, 0.02, 0.04, 64 * mib, 600 * mib, 128 * mib},
		{"a step down is at most a quarter", 512 * mib, 0, 0.04, 64 * mib, 600 * mib, 128 * mib},
		{"never under the floor", 80 * mib, 0, 0.04, 64 * mib, 600 * mib, 64 * mib},
		{"a small heap: the floor", 64 * mib, 1, 0.04, 64 * mib, 10 * mib, 64 * mib},
		{"GOGC off: the floor", 256 * mib, 1, 0.04, 64 * mib, 0, 64 * mib},
	} {
		if got := nextHeadroom(tc.headroom, tc.share, tc.target, tc.floor, tc.ceiling); got != tc.want {
			t.Errorf("%s: nextHeadroom = %d MiB, want %d MiB", tc.name, got/mib, tc.want/mib)
		}
	}
}

// TestHeapCapTrimsWhenQuiet: a headroom grown by a busy spell drops to the
// floor once the process goes quiet, without waiting for a collection, and
// the memory limit with it; what lies above is returned to the system.
func TestHeapCapTrimsWhenQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	defer func(d time.Duration) { quietCheck = d }(quietCheck)
	quietCheck = 20 * time.Millisecond
	const userLimit = 1 << 40
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(userLimit))
	const live, floor, grown = 64 << 20, 16 << 20, 512 << 20
	keep := make([][]byte, 0, live>>20)
	for range live >> 20 {
		keep = append(keep, make([]byte, 1<<20))
	}
	stop := CapHeapGrowth(floor)
	defer stop()
	// A busy spell left garbage, and the headroom grown; then nothing is
	// allocated, so no collection comes to shrink it.
	for range 256 {
		_ = make([]byte, 1<<20)
	}
	g := &restoreGC
	g.mu.Lock()
	g.headroom = grown
	debug.SetMemoryLimit(live + grown)
	g.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		g.mu.Lock()
		h := g.headroom
		g.mu.Unlock()
		limit := debug.SetMemoryLimit(-1)
		if h == floor && limit <= live+floor+64<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("quiet, the headroom is %d MiB (floor %d) and the limit %d MiB over %d MiB live", h>>20, floor>>20, limit>>20, live>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(keep)
}

// TestHeapCapReturnsGarbageWhenQuiet: with the headroom at its floor, the
// free pages a busy spell left behind (up to the floor, under the limit, so
// the runtime keeps them) go back to the system once the process is quiet,
// not whenever the next collection comes.
func TestHeapCapReturnsGarbageWhenQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	defer func(d time.Duration) { quietCheck = d }(quietCheck)
	quietCheck = 200 * time.Millisecond // a busy spell allocates far more than an eighth of the floor in one
	defer func(s float64) { heapCapGCShare = s }(heapCapGCShare)
	heapCapGCShare = 1 // hold the headroom at its floor
	// As on a node holding many jobs at GOGC=200: GOGC's own goal lies far
	// above, so only the cap decides what the runtime keeps.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const userLimit = 1 << 40
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(userLimit))
	const floor = 256 << 20
	stop := CapHeapGrowth(floor)
	defer stop()
	runtime.GC() // the cap sets its limit
	// The heap's memory the process maps: its objects, live or garbage
	// not yet collected, and its spans' free slots and free pages.
	mapped := func() int64 {
		s := []metrics.Sample{
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/memory/classes/heap/unused:bytes"},
			{Name: "/memory/classes/heap/free:bytes"},
		}
		metrics.Read(s)
		return int64(s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64())
	}
	// The busy spell: 128 MiB of garbage, under the floor, so no collection.
	var sink []byte
	for range 2048 {
		sink = make([]byte, 64<<10)
	}
	_ = sink
	deadline := time.Now().Add(20 * time.Second)
	for mapped() > 32<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("quiet, the heap still maps %d MiB", mapped()>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A heap whose spans are half empty (every other object freed, as jobs
// are among a leader's request garbage) still holds those spans: the cap's
// limit must lie above all the runtime holds, or the runtime collects over
// and over, never getting under it.
func TestHeapCapLimitCoversHalfEmptySpans(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	defer func(s float64) { heapCapGCShare = s }(heapCapGCShare)
	heapCapGCShare = 1 // hold the headroom at its floor
	const userLimit = 1 << 40
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(userLimit))
	objs := make([]*[64]byte, 1<<20)
	for i := range objs {
		objs[i] = new([64]byte)
	}
	for i := 0; i < len(objs); i += 2 {
		objs[i] = nil
	}
	const headroom = 8 << 20
	stop := CapHeapGrowth(headroom)
	defer stop()
	// What the cap does after a collection, here after one that swept
	// the whole heap.
	runtime.GC()
	capHeap()
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
	}
	metrics.Read(s)
	held := int64(s[0].Value.Uint64() - s[1].Value.Uint64() - s[2].Value.Uint64())
	if unused := s[3].Value.Uint64(); unused < 16<<20 {
		t.Fatalf("only %d MiB of the spans are free slots; the test wants half of 64 MiB", unused>>20)
	}
	if limit := debug.SetMemoryLimit(-1); limit < held {
		t.Fatalf("the limit is %d MiB, under the %d MiB the runtime holds", limit>>20, held>>20)
	}
	runtime.KeepAlive(objs)
}
