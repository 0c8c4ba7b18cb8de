// Package gcpace paces the Go collector of a node: while a snapshot is
// restored (restore.go), and between restores, where it caps how much
// garbage the heap may gather (heapcap.go). Neither changes what the state
// machine holds, only when the collector runs.
package gcpace

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The collector during a restore. A restore builds a heap of about the
// state's size from nothing, and most of what it allocates stays (the
// jobs, their payloads, the trees): collecting while it grows marks the
// new heap over and over (at GOGC=200 about half of it again, in cycles at
// a third, a ninth... of it), slows the allocating decoders with mark
// assists, and frees little. So while a restore reads, the collector is
// paced by a memory limit instead of GOGC: the memory the process had when
// the restore began, plus restoreSlack, plus restoreRatio times the
// snapshot bytes read so far (a restore allocates about 3.6 times the
// bytes it reads, fsm's BenchmarkRestore). The limit grows as the snapshot is
// read, so a restore that reads slowly while the rest of the process makes
// garbage is collected as usual once the garbage passes the slack; a lower
// limit the operator set (GOMEMLIMIT) stays in force. Once every restore
// under way has ended, GOGC and the limit are set back, and the first
// collection after it marks the restored heap once.

const (
	restoreSlack = 64 << 20
	restoreRatio = 8
)

// RestoreRatio is how many bytes of memory a restore may allocate per
// snapshot byte it has read before the collector runs.
const RestoreRatio = restoreRatio

// restoreGC is the collector's pacing while restores run.
var restoreGC struct {
	mu      sync.Mutex
	n       int   // restores under way
	base    int64 // the process's memory when the first began
	read    int64 // the bytes they have read
	percent int   // what GOGC was
	limit   int64 // what the memory limit was

	// The heap cap (heapcap.go): its headroom (0: off) and floor, the
	// operator's memory limit, which the cap never exceeds, and the time
	// and the collector's CPU seconds at the last collection.
	headroom, floor int64
	userLimit       int64
	lastGC          time.Time
	lastGCCPU       float64
}

// HoldForRestore paces the collector for a restore, until the returned function
// is called.
func HoldForRestore() (release func()) {
	g := &restoreGC
	g.mu.Lock()
	if g.n == 0 {
		g.base, g.read = processMemory(), 0
		g.limit = debug.SetMemoryLimit(-1)
		if g.headroom > 0 {
			g.limit = g.userLimit // the cap's limit is not the operator's
		}
		debug.SetMemoryLimit(min(g.limit, g.base+restoreSlack))
		g.percent = debug.SetGCPercent(-1)
	}
	g.n++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.n--; g.n == 0 {
				debug.SetGCPercent(g.percent)
				debug.SetMemoryLimit(g.limit) // the heap cap sets its own at the next collection
			}
		})
	}
}

// RestoreRead raises the restores' memory limit by what n more snapshot bytes
// read let them allocate.
func RestoreRead(n int) {
	g := &restoreGC
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		return
	}
	g.read += int64(n)
	limit := g.base + restoreSlack
	if g.read > (math.MaxInt64-limit)/restoreRatio {
		limit = math.MaxInt64
	} else {
		limit += restoreRatio * g.read
	}
	debug.SetMemoryLimit(min(g.limit, limit))
}

// processMemory is the memory the runtime holds, as the memory limit
// counts it: all it has mapped, less what it returned to the system.
func processMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
