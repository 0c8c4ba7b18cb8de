package fsm

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

var payload256 = []byte(`{"task":"` + string(bytes.Repeat([]byte("x"), 256-12)) + `"}`)

// fill creates n queued jobs in batches of 512, as group commit would.
func fill(tb testing.TB, f *FSM, n int, index *uint64) {
	tb.Helper()
	batch := make([]*raft.Log, 0, 512)
	for i := 0; i < n; i++ {
		*index++
		batch = append(batch, &raft.Log{Index: *index, Type: raft.LogCommand, Data: MustEncode(CmdCreate, &CreateCommand{
			Now: int64(*index), ID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", *index), Stream: DefaultStream,
			Payload: payload256, Actor: head})})
		if len(batch) == cap(batch) || i == n-1 {
			f.ApplyBatch(batch)
			batch = batch[:0]
		}
	}
}

// BenchmarkApplyCreate measures FSM apply of create entries, batched as the
// Raft leader delivers them under load (decode + index updates), with a
// read after every batch, as on a leader serving reads (which publishes a
// view; a follower nobody reads from skips that).
// With feed=on every create also feeds an event (feed.go), as on a
// cluster whose every node has the feed.
func BenchmarkApplyCreate(b *testing.B) {
	for _, feed := range []bool{false, true} {
		for _, size := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("feed=%v/batch=%d", onOff(feed), size), func(b *testing.B) { benchApplyCreate(b, feed, size) })
		}
	}
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

// feedOn turns f's feed on with the entry at index idx.
func feedOn(f *FSM, idx uint64) {
	f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdFeedOn, &FeedOnCommand{})})
}

func benchApplyCreate(b *testing.B, feed bool, size int) {
	{
		{
			f, _ := New(Config{})
			if feed {
				feedOn(f, 1)
			}
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				logs[i] = &raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: MustEncode(CmdCreate, &CreateCommand{
					Now: int64(i), ID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), Payload: payload256, Actor: head})}
			}
			b.ResetTimer()
			for i := 0; i < len(logs); i += size {
				end := min(i+size, len(logs))
				f.ApplyBatch(logs[i:end])
				f.Read()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		}
	}
}

// BenchmarkClaimNext measures a claim of the next job with n jobs queued,
// applied one entry at a time (an idle cluster) and in batches of 64 (group
// commit under load), with a read after every batch as on a leader. The
// cost must stay flat (O(log n), never a scan) as n grows.
func BenchmarkClaimNext(b *testing.B) {
	for _, batch := range []int{1, 64} {
		for _, n := range []int{1_000, 100_000, 1_000_000} {
			b.Run(fmt.Sprintf("batch=%d/queued=%d", batch, n), func(b *testing.B) {
				f, _ := New(Config{})
				var idx uint64
				fill(b, f, n+b.N, &idx)
				logs := make([]*raft.Log, b.N)
				for i := range logs {
					idx++
					logs[i] = &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, &ClaimCommand{
						Now: int64(idx), Streams: []string{DefaultStream}, Targets: []string{"left_claw"}, Actor: left,
						AttemptID: fmt.Sprintf("a%d", i), LeaseToken: fmt.Sprintf("t%d", i), LeaseNanos: lease})}
				}
				runtime.GC()
				b.ResetTimer()
				for i := 0; i < len(logs); i += batch {
					for _, r := range f.ApplyBatch(logs[i:min(i+batch, len(logs))]) {
						if !r.(*Result).Claimed {
							b.Fatal("nothing claimed")
						}
					}
					f.Read()
				}
			})
		}
	}
}

// BenchmarkWorkerLoop measures the state machine's share of a worker's
// loop as a busy node runs it, per job: a look for a queued job, the claim,
// a look at the lease (the heartbeat answered without an entry), the
// complete, with claims and completes applied in batches of 8 (the group
// commit seen under the bench's 16 workers). read=view takes each look on a
// consistent view (FSM.Read), read=peek on the latest state (FSM.Peek, what
// the API does).
func BenchmarkWorkerLoop(b *testing.B) {
	for _, feed := range []bool{false, true} {
		for _, mode := range []string{"view", "peek"} {
			b.Run("feed="+onOff(feed)+"/read="+mode, func(b *testing.B) { benchWorkerLoop(b, feed, mode) })
		}
	}
}

func benchWorkerLoop(b *testing.B, feed bool, mode string) {
	const batch = 8
	{
		{
			f, _ := New(Config{})
			var idx uint64
			if feed {
				idx++
				feedOn(f, idx)
			}
			fill(b, f, 100_000+b.N, &idx)
			look := f.Peek
			if mode == "view" {
				look = f.Read
			}
			streams, targets := []string{DefaultStream}, []string{"left_claw"}
			entry := func(t CommandType, c any) *raft.Log {
				idx++
				return &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(t, c)}
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				n := min(batch, b.N-done)
				claims := make([]*raft.Log, n)
				for i := range claims {
					if j, _ := look().NextClaimable(streams, targets, nil, ""); j == nil {
						b.Fatal("nothing queued")
					}
					claims[i] = entry(CmdClaim, &ClaimCommand{Now: int64(idx), Streams: streams, Targets: targets, Actor: left,
						AttemptID: fmt.Sprintf("a%d", idx), LeaseToken: fmt.Sprintf("t%d", idx), LeaseNanos: lease})
				}
				completes := make([]*raft.Log, n)
				for i, r := range f.ApplyBatch(claims) {
					j := r.(*Result).Job
					ref := LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}
					if res, ok := look().Heartbeat(&HeartbeatCommand{Now: j.Lease.ExpiresAt - lease, Ref: ref, Actor: left, LeaseNanos: lease}, 0.5); !ok || res.Err != nil {
						b.Fatal("fresh lease not confirmed")
					}
					completes[i] = entry(CmdComplete, &CompleteCommand{Now: int64(idx), Ref: ref, Actor: left})
				}
				for _, r := range f.ApplyBatch(completes) {
					if r.(*Result).Err != nil {
						b.Fatal(r.(*Result).Err)
					}
				}
			}
		}
	}
}

// heapPerJob reports the heap bytes per job that build leaves in a new FSM
// holding n jobs.
func heapPerJob(b *testing.B, n int, build func(f *FSM, idx *uint64)) {
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, _ := New(Config{})
		var idx uint64
		build(f, &idx)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "bytes/job")
		runtime.KeepAlive(f)
	}
}

// BenchmarkMemoryPerJob reports heap bytes per queued job with a 256-byte
// payload.
func BenchmarkMemoryPerJob(b *testing.B) {
	const n = 200_000
	heapPerJob(b, n, func(f *FSM, idx *uint64) { fill(b, f, n, idx) })
}

// BenchmarkMemoryPerDoneJob reports heap bytes per finished job (created,
// claimed, completed with a small result): what retention keeps.
func BenchmarkMemoryPerDoneJob(b *testing.B) {
	const n = 100_000
	heapPerJob(b, n, func(f *FSM, idx *uint64) {
		fill(b, f, n, idx)
		for k := 0; k < n; k++ {
			*idx++
			r := f.Apply(&raft.Log{Index: *idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, &ClaimCommand{
				Now: int64(*idx), Streams: []string{DefaultStream}, Targets: []string{"left_claw"}, Actor: left,
				AttemptID: fmt.Sprintf("a%d", k), LeaseToken: fmt.Sprintf("t%d", k), LeaseNanos: lease})}).(*Result)
			if !r.Claimed {
				b.Fatal("nothing claimed")
			}
			*idx++
			done := f.Apply(&raft.Log{Index: *idx, Type: raft.LogCommand, Data: MustEncode(CmdComplete, &CompleteCommand{
				Now: int64(*idx), Ref: LeaseRef{JobID: r.Job.ID, AttemptID: fmt.Sprintf("a%d", k), Token: fmt.Sprintf("t%d", k)},
				Actor: left, Result: []byte(`{"ok":true}`)})}).(*Result)
			if done.Err != nil {
				b.Fatal(done.Err)
			}
		}
	})
}

// BenchmarkMemoryPerFeedEvent reports the heap bytes the event feed holds
// per event when full (FeedRetention events, each of a job's create): the
// heap of a state with the feed on, less that of one with it off.
func BenchmarkMemoryPerFeedEvent(b *testing.B) {
	const n = FeedRetention
	heap := func(feed bool) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, _ := New(Config{})
		var idx uint64
		if feed {
			idx++
			feedOn(f, idx)
		}
		fill(b, f, n, &idx)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(f)
		return after.HeapAlloc - before.HeapAlloc
	}
	for i := 0; i < b.N; i++ {
		off := heap(false)
		on := heap(true)
		b.ReportMetric((float64(on)-float64(off))/n, "bytes/event")
	}
}

// BenchmarkSnapshot1M persists and restores 1M queued jobs.
func BenchmarkSnapshot1M(b *testing.B) {
	// A state below LevelTagged is written as the builds before it read it
	// (the positional records of version 9 at most); from it on, in the
	// tagged records of version 10.
	for _, form := range []string{"positional", "tagged"} {
		f, _ := New(Config{})
		var idx uint64
		fill(b, f, 1_000_000, &idx)
		if form == "tagged" {
			idx++
			f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdLevel, &LevelCommand{Level: LatestLevel})})
		}
		var sink memSink
		b.Run(form+"/persist", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sink.Reset()
				s, _ := f.Snapshot()
				if err := s.Persist(&sink); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sink.Len())/1e6, "MB")
		})
		b.Run(form+"/restore", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g, _ := New(Config{})
				if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaimNextAmongScheduled is BenchmarkClaimNext (batch 64, 10,000
// queued) with scheduled jobs waiting in the same stream (created with a
// runAt far ahead, so never promoted), with jobs of mixed priorities, and
// with 10,000 concurrency keys, each at its limit, with a job queued
// behind it in the same stream: what the claim path costs when those are
// present. Compare with sched=0/prio=off/keys=0.
func BenchmarkClaimNextAmongScheduled(b *testing.B) {
	for _, c := range []struct {
		sched int
		prio  bool
		keys  int
	}{{0, false, 0}, {100_000, false, 0}, {0, true, 0}, {100_000, true, 0}, {0, false, 10_000}} {
		b.Run(fmt.Sprintf("sched=%d/prio=%v/keys=%d", c.sched, onOff(c.prio), c.keys), func(b *testing.B) {
			f, _ := New(Config{})
			var idx uint64
			batch := make([]*raft.Log, 0, 512)
			flush := func(force bool) {
				if len(batch) == cap(batch) || (force && len(batch) > 0) {
					f.ApplyBatch(batch)
					batch = batch[:0]
				}
			}
			for i := 0; i < c.sched; i++ {
				idx++
				batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdCreate, &CreateCommand{Now: int64(idx), ID: fmt.Sprintf("s%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head, RunAt: 1 << 62})})
				flush(false)
			}
			// Each key: one job claimed (the key full), one queued behind it.
			for k := 0; k < c.keys; k++ {
				for range 2 {
					idx++
					batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdCreate, &CreateCommand{Now: int64(idx), ID: fmt.Sprintf("k%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head, ConcurrencyKey: fmt.Sprintf("key-%d", k), ConcurrencyLimit: 1})})
				}
				idx++
				batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, &ClaimCommand{Now: int64(idx), Streams: []string{DefaultStream}, Targets: []string{"left_claw"}, Actor: left, AttemptID: fmt.Sprintf("ka%d", idx), LeaseToken: fmt.Sprintf("kt%d", idx), LeaseNanos: lease})})
				flush(false)
			}
			for i := 0; i < 10_000+b.N; i++ {
				idx++
				cc := CreateCommand{Now: int64(idx), ID: fmt.Sprintf("q%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head}
				if c.prio {
					batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdCreate, func() *CreateCommand { c := cc; c.Priority = i % 7; return &c }())})
				} else {
					batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdCreate, &cc)})
				}
				flush(false)
			}
			flush(true)
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				idx++
				logs[i] = &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, &ClaimCommand{Now: int64(idx), Streams: []string{DefaultStream}, Targets: []string{"left_claw"}, Actor: left, AttemptID: fmt.Sprintf("a%d", i), LeaseToken: fmt.Sprintf("t%d", i), LeaseNanos: lease})}
			}
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < len(logs); i += 64 {
				for _, r := range f.ApplyBatch(logs[i:min(i+64, len(logs))]) {
					if !r.(*Result).Claimed {
						b.Fatal("nothing claimed")
					}
				}
				f.Read()
			}
		})
	}
}

// BenchmarkClaimWithCapabilities is the claim path with 10,000 queued jobs
// (and more as claims take them) of 50 requirement sets, each a gpu kind,
// a language and a zone: a claim whose capabilities cover every set (it
// looks at all 50), one that covers five (one language), and, for
// comparison, plain claims of jobs that require nothing.
func BenchmarkClaimWithCapabilities(b *testing.B) {
	set := func(i int) []string {
		return []string{fmt.Sprintf("gpu:%d", i%2), fmt.Sprintf("lang:%d", i%5), fmt.Sprintf("zone:%d", i%5)}
	}
	var all []string // the 12 labels of the 50 sets
	for i := range 50 {
		all = append(all, set(i)...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	for _, c := range []struct {
		name string
		caps []string
		// every is how many queued jobs there are per job a claim can take.
		every int
	}{{"plain", nil, 1}, {"covers-50-sets", all, 1}, {"covers-5-sets", []string{"gpu:0", "lang:0", "zone:0", "zone:1", "zone:2", "zone:3", "zone:4"}, 10}} {
		b.Run(c.name, func(b *testing.B) {
			f, _ := New(Config{})
			var idx uint64
			batch := make([]*raft.Log, 0, 512)
			flush := func(force bool) {
				if len(batch) == cap(batch) || (force && len(batch) > 0) {
					f.ApplyBatch(batch)
					batch = batch[:0]
				}
			}
			for i := 0; i < 10_000+c.every*b.N; i++ {
				idx++
				cc := CreateCommand{Now: int64(idx), ID: fmt.Sprintf("q%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head}
				if c.caps == nil {
					batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdCreate, &cc)})
				} else {
					batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdCreate,
						func() *CreateCommand { c := cc; c.Requires = set(i); return &c }())})
				}
				flush(false)
			}
			flush(true)
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				idx++
				cn := &ClaimCommand{Now: int64(idx), Streams: []string{DefaultStream}, Targets: []string{"left_claw"}, Actor: left, AttemptID: fmt.Sprintf("a%d", i), LeaseToken: fmt.Sprintf("t%d", i), LeaseNanos: lease}
				if c.caps == nil {
					logs[i] = &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, cn)}
				} else {
					logs[i] = &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, withCaps(cn, c.caps))}
				}
			}
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < len(logs); i += 64 {
				for _, r := range f.ApplyBatch(logs[i:min(i+64, len(logs))]) {
					if !r.(*Result).Claimed {
						b.Fatal("nothing claimed")
					}
				}
				f.Read()
			}
		})
	}
}

// BenchmarkWorkerLoopNext is a worker's loop as a cluster applies it: each
// entry is a complete that also claims the worker's next job (one entry per
// job), in batches of 8 as under load, at the latest level with the feed
// on, over 100,000 queued jobs. A worker's heartbeat is answered from a
// peek between its claim and its complete, as a node answers it.
func BenchmarkWorkerLoopNext(b *testing.B) {
	const workers, batch = 16, 8
	f, _ := New(Config{})
	var idx uint64
	entry := func(t CommandType, c any) *raft.Log {
		idx++
		return &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(t, c)}
	}
	f.Apply(entry(CmdLevel, &LevelCommand{Level: LatestLevel}))
	f.Apply(entry(CmdFeedOn, &FeedOnCommand{}))
	fill(b, f, 100_000+b.N+workers, &idx)
	streams, targets := []string{DefaultStream}, []string{"left_claw"}
	claim := func() *ClaimCommand {
		return &ClaimCommand{Now: int64(idx), Streams: streams, Targets: targets, Actor: left,
			AttemptID: fmt.Sprintf("a%d", idx), LeaseToken: fmt.Sprintf("t%d", idx), LeaseNanos: lease}
	}
	held := make([]*Job, workers)
	for w := range held {
		held[w] = f.Apply(entry(CmdClaim, claim())).(*Result).Job
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	w := 0
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		logs := make([]*raft.Log, n)
		for i := range logs {
			j := held[(w+i)%workers]
			ref := LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}
			if res, ok := f.Peek().Heartbeat(&HeartbeatCommand{Now: j.Lease.ExpiresAt - lease, Ref: ref, Actor: left, LeaseNanos: lease}, 0.5); !ok || res.Err != nil {
				b.Fatal("fresh lease not confirmed")
			}
			logs[i] = entry(CmdComplete, &CompleteCommand{Now: int64(idx), Ref: ref, Actor: left, Result: []byte(`{"ok":true}`), Next: claim()})
		}
		for i, r := range f.ApplyBatch(logs) {
			res := r.(*Result)
			if res.Err != nil || res.Next == nil || res.Next.Job == nil {
				b.Fatalf("complete and next: %+v", res)
			}
			held[(w+i)%workers] = res.Next.Job
		}
		w += n
	}
}
