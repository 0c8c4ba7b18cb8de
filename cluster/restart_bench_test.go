package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/fsm"
)

// restartJobs is how many queued jobs BenchmarkNodeRestart's node holds
// (SPINE_RESTART_JOBS overrides it), and restartTail how many entries its
// log holds after its newest snapshot.
const (
	restartJobs = 300_000
	restartTail = 5_000
)

var restartPayload = []byte(`{"task":"` + string(bytes.Repeat([]byte("x"), 256-12)) + `"}`)

// restartSnapshot is the snapshot of a state machine holding n queued jobs
// with random (version 4) UUIDs and 256-byte payloads, at the latest level
// with the feed on, as a cluster that took them through its API holds.
func restartSnapshot(tb testing.TB, n int) ([]byte, uint64) {
	tb.Helper()
	f, err := fsm.New(fsm.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	head := fsm.Actor{Role: fsm.HeadRole}
	idx := uint64(1)
	f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: fsm.MustEncode(fsm.CmdFeedOn, &fsm.FeedOnCommand{})})
	idx++
	f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: fsm.MustEncode(fsm.CmdLevel, &fsm.LevelCommand{Level: fsm.LatestLevel})})
	rng := rand.New(rand.NewPCG(1, 2))
	batch := make([]*raft.Log, 0, 512)
	var id [16]byte
	for i := range n {
		idx++
		for k := range id {
			id[k] = byte(rng.Uint32())
		}
		id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
		batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{
			Now: int64(idx), ID: uuid.UUID(id).String(), Payload: restartPayload, Actor: head})})
		if len(batch) == cap(batch) || i == n-1 {
			f.ApplyBatch(batch)
			batch = batch[:0]
		}
	}
	s, err := f.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	sink := &bufSink{}
	if err := s.Persist(sink); err != nil {
		tb.Fatal(err)
	}
	return sink.Bytes(), idx
}

type bufSink struct{ bytes.Buffer }

func (*bufSink) ID() string    { return "bench" }
func (*bufSink) Cancel() error { return nil }
func (*bufSink) Close() error  { return nil }

// BenchmarkNodeRestart restarts a one-node cluster on the real stores
// (raft-wal, the file snapshot store) that keeps two snapshots of
// restartJobs queued jobs, and restartTail/2 entries in its log after the
// newest, and reports each part of a start: open (the stores opened and
// checked: the log, the stable store, the snapshots' meta.json), restore
// (the newest snapshot opened and restored, as raft does at start, and the
// other snapshots checked meanwhile), start (New, which does both), and
// ready (New, an election and the tail applied).
// Every figure is the median of the starts, in seconds.
func BenchmarkNodeRestart(b *testing.B) {
	jobs := restartJobs
	if s := os.Getenv("SPINE_RESTART_JOBS"); s != "" {
		var err error
		if jobs, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	raw, index := restartSnapshot(b, jobs)
	b.ReportMetric(float64(len(raw))/1e6, "snapshot-MB")
	cfg := Config{NodeID: "n1", DataDir: b.TempDir(), RaftAddr: freeAddr(b), GossipAddr: freeAddr(b),
		HTTPAddr: "http://n1.invalid:8080", Bootstrap: true, DisableGossip: true,
		Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard})}
	fastTimings(&cfg)
	start := func() (*Node, *fsm.FSM) {
		f, err := fsm.New(fsm.Config{})
		if err != nil {
			b.Fatal(err)
		}
		c := cfg
		c.FSM = f
		n, err := New(c)
		if err != nil {
			b.Fatal(err)
		}
		return n, f
	}

	// The state: the snapshot restored into the cluster, then the tail,
	// then a stop.
	n, _ := start()
	waitLeader(b, []*Node{n})
	// At an index past the snapshot's, so the entries after it are too
	// (RestoreSnapshot puts it past the log only).
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(raw)), Index: index}
	if err := n.raft.Restore(meta, bytes.NewReader(raw), time.Minute); err != nil {
		b.Fatal(err)
	}
	// Half the tail, a snapshot (the node keeps two, as it does), the
	// other half.
	apply := func(from, to int) {
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := from + w; i < to; i += 16 {
					cmd := fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{Now: int64(i), ID: fmt.Sprintf("tail-%d", i),
						Payload: restartPayload, Actor: fsm.Actor{Role: fsm.HeadRole}})
					if _, _, err := n.Apply(context.Background(), cmd); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	apply(0, restartTail/2)
	if err := n.raft.Snapshot().Error(); err != nil {
		b.Fatal(err)
	}
	apply(restartTail/2, restartTail)
	last := n.raft.LastIndex()
	if err := n.Shutdown(); err != nil {
		b.Fatal(err)
	}

	var open, restore, started, ready []time.Duration
	b.ResetTimer()
	for range b.N {
		// The parts raft's start is made of, one by one.
		t0 := time.Now()
		c := cfg
		st, err := openStores(&c, func(err error) { b.Fatal(err) })
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		snaps, err := st.snaps.List()
		if err != nil || len(snaps) == 0 {
			b.Fatalf("snapshots: %v %v", snaps, err)
		}
		_, rc, err := st.snaps.Open(snaps[0].ID)
		if err != nil {
			b.Fatal(err)
		}
		f, _ := fsm.New(fsm.Config{})
		if err := f.Restore(rc); err != nil {
			b.Fatal(err)
		}
		if cs, ok := st.snaps.(*checkedSnapshots); ok {
			if err := cs.started(); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		if err := st.close(); err != nil {
			b.Fatal(err)
		}
		open = append(open, t1.Sub(t0))
		restore = append(restore, t2.Sub(t1))
		f = nil

		// The whole start.
		t3 := time.Now()
		n, g := start()
		t4 := time.Now()
		deadline := time.Now().Add(time.Minute)
		for !n.IsLeader() || g.AppliedIndex() < last {
			if time.Now().After(deadline) {
				b.Fatalf("not ready: leader %v, applied %d of %d", n.IsLeader(), g.AppliedIndex(), last)
			}
			time.Sleep(time.Millisecond)
		}
		t5 := time.Now()
		started = append(started, t4.Sub(t3))
		ready = append(ready, t5.Sub(t3))
		if err := n.Shutdown(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// Medians: the machine a benchmark runs on is seldom idle.
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	for _, m := range []struct {
		d    []time.Duration
		name string
	}{{open, "open-s"}, {restore, "restore-s"}, {started, "start-s"}, {ready, "ready-s"}} {
		b.ReportMetric(median(m.d).Seconds(), m.name)
	}
	b.ReportMetric(float64(jobs)/median(restore).Seconds(), "restored-jobs/s")
}
