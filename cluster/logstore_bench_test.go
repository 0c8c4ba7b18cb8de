package cluster

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStoreLogs measures one fsync'ed StoreLogs of a batch of 400-byte
// entries (a create's size) per iteration, for each log store, and reports
// process CPU per entry (user+system: fsync costs kernel time).
func BenchmarkStoreLogs(b *testing.B) {
	open := map[string]func(dir string) (raft.LogStore, func()){
		"bolt": func(dir string) (raft.LogStore, func()) {
			bs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"),
				BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}})
			if err != nil {
				b.Fatal(err)
			}
			return bs, func() { bs.Close() }
		},
		"wal": func(dir string) (raft.LogStore, func()) {
			w, err := wal.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			return w, func() { w.Close() }
		},
		// What a node runs: raft-wal with segments zeroed ahead of appends.
		"wal-zeroed": func(dir string) (raft.LogStore, func()) {
			w, err := openWAL(dir, hclog.NewNullLogger(), 0)
			if err != nil {
				b.Fatal(err)
			}
			return w, func() { w.Close() }
		},
	}
	for _, name := range []string{"bolt", "wal", "wal-zeroed"} {
		for _, batch := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/batch=%d", name, batch), func(b *testing.B) {
				ls, closeFn := open[name](b.TempDir())
				defer closeFn()
				data := make([]byte, 400)
				idx := uint64(1)
				logs := make([]*raft.Log, batch)
				c0 := cpuNow()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for j := range logs {
						logs[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
						idx++
					}
					if err := ls.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N*batch), "cpu-us/entry")
			})
		}
	}
}
