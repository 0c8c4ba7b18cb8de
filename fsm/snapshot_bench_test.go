package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
)

// fillRandom creates n queued jobs with random (version 4) UUIDs, as the
// service draws them, in batches of 512 on a cluster at the latest level
// with the feed on: the id order differs from the creation order, as it
// does in production (fill's ids are in creation order).
func fillRandom(tb testing.TB, f *FSM, n int, index *uint64) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	*index++
	feedOn(f, *index)
	*index++
	f.Apply(&raft.Log{Index: *index, Type: raft.LogCommand, Data: MustEncode(CmdLevel, &LevelCommand{Level: LatestLevel})})
	batch := make([]*raft.Log, 0, 512)
	var b [16]byte
	for i := 0; i < n; i++ {
		*index++
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		batch = append(batch, &raft.Log{Index: *index, Type: raft.LogCommand, Data: MustEncode(CmdCreate, &CreateCommand{
			Now: int64(*index), ID: uuid.UUID(b).String(), Payload: payload256, Actor: head})})
		if len(batch) == cap(batch) || i == n-1 {
			f.ApplyBatch(batch)
			batch = batch[:0]
		}
	}
}

// cpuTime is the CPU time this process has used (every goroutine's, the
// garbage collector's too): on a shared machine, a steadier figure than
// the time that passed.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRestore restores a snapshot of n queued jobs with random ids (a
// production state; BenchmarkSnapshot1M's ids are in creation order) and
// reports the jobs restored per second.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{300_000, 1_000_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			f, _ := New(Config{})
			var idx uint64
			fillRandom(b, f, n, &idx)
			var sink memSink
			s, _ := f.Snapshot()
			if err := s.Persist(&sink); err != nil {
				b.Fatal(err)
			}
			f = nil
			runtime.GC()
			b.ResetTimer()
			cpu0, start := cpuTime(), time.Now()
			for i := 0; i < b.N; i++ {
				g, _ := New(Config{})
				if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "jobs/s")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(sink.Len())/1e6, "MB")
		})
	}
}

// BenchmarkSnapshotFinished persists and restores 200,000 finished jobs (a
// cluster at the latest level, random ids, each claimed by one of 16
// workers with long ids and completed), whose trails the snapshot writer
// opens and a restore seals again (trail.go).
func BenchmarkSnapshotFinished(b *testing.B) {
	const n = 200_000
	f, _ := New(Config{})
	var idx uint64
	fillRandom(b, f, n, &idx)
	for k := 0; k < n; k++ {
		w := Actor{Role: "left_claw", WorkerID: fmt.Sprintf("bench-20261201-022308-46575dad-w%d", k%16)}
		idx++
		r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, &ClaimCommand{
			Now: int64(idx), Streams: []string{DefaultStream}, Targets: []string{w.Role}, Actor: w,
			AttemptID: uuid.NewString(), LeaseToken: uuid.NewString(), LeaseNanos: lease})}).(*Result)
		if !r.Claimed {
			b.Fatal("nothing claimed")
		}
		idx++
		done := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdComplete, &CompleteCommand{
			Now: int64(idx), Ref: LeaseRef{JobID: r.Job.ID, AttemptID: r.Job.Lease.AttemptID, Token: r.Job.Lease.Token},
			Actor: w, Result: []byte(`{"ok":true}`)})}).(*Result)
		if done.Err != nil {
			b.Fatal(done.Err)
		}
	}
	var sink memSink
	b.Run("persist", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink.Reset()
			s, _ := f.Snapshot()
			if err := s.Persist(&sink); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
	})
	b.Run("restore", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			g, _ := New(Config{})
			if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
	})
}
