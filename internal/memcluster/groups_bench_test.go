package memcluster

import (
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

var (
	groupsRun     = flag.Duration("groups.run", 3*time.Second, "BenchmarkGroups: how long each run is measured")
	groupsFsync   = flag.Duration("groups.fsync", time.Millisecond, "BenchmarkGroups: how long one flush of a disk takes")
	groupsClients = flag.Int("groups.clients", 32, "BenchmarkGroups: closed-loop clients, spread evenly over the groups")
)

// groupsWarmUp runs before the measured window: leaders settle, the first
// batches form.
const groupsWarmUp = 300 * time.Millisecond

// groupsMaxJobs bounds each client's loop by count as well as by time.
const groupsMaxJobs = 1_000_000

// BenchmarkGroups measures jobs/s against the number of Raft groups: G
// independent groups of three in-memory nodes, each running Spine's state
// machine, with a fixed number of closed-loop clients spread over them. A
// client's job is three entries on its group: a create, a claim-next of its
// own stream and a complete. The disk models (disk.go):
//
//   - memory: appends cost nothing; only CPU limits.
//   - own: every replica of every group has a disk of its own.
//   - shared: the three machines have one disk each, under one replica of
//     every group; a flush covers every write waiting for it (one log
//     engine for all the groups on a machine).
//   - shared-serial: the same disks, one flush per append, in turn (every
//     group fsyncing a log of its own on the machine's one device).
//
// It reports jobs/s in all and per group, CPU per job (user+system of the
// whole process: every node, every group and the clients) and flushes per
// job summed over the disks. Every group shares this process's CPUs, so the
// figures show what disk parallelism buys, not what more machines would.
//
//	go test -run xxx -bench Groups -benchtime 1x ./internal/memcluster/
//	  [-args -groups.run 3s -groups.fsync 1ms -groups.clients 32]
func BenchmarkGroups(b *testing.B) {
	for _, model := range []string{"memory", "own", "shared", "shared-serial"} {
		for _, g := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("disk=%s/groups=%d", model, g), func(b *testing.B) {
				groups, disks := startGroups(b, model, g)
				for range b.N {
					r := runGroups(b, groups, disks, *groupsClients, *groupsRun)
					b.ReportMetric(r.jobsPerSec, "jobs/s")
					b.ReportMetric(r.jobsPerSec/float64(g), "jobs/s/group")
					b.ReportMetric(r.cpuPerJob, "cpu-us/job")
					if len(disks) > 0 {
						b.ReportMetric(r.flushesPerJob, "flushes/job")
						b.ReportMetric(r.meanFlush, "flush-us")
					}
				}
			})
		}
	}
}

// startGroups starts g clusters of three on the disks of the model.
func startGroups(b *testing.B, model string, g int) ([]*Cluster, []*Disk) {
	b.Helper()
	var disks []*Disk
	machine := func() []*Disk { // one disk per node of a group
		ds := []*Disk{NewDisk(*groupsFsync, true), NewDisk(*groupsFsync, true), NewDisk(*groupsFsync, true)}
		disks = append(disks, ds...)
		return ds
	}
	var shared []*Disk
	switch model {
	case "memory", "own":
	case "shared":
		shared = machine()
	case "shared-serial":
		shared = []*Disk{NewDisk(*groupsFsync, false), NewDisk(*groupsFsync, false), NewDisk(*groupsFsync, false)}
		disks = shared
	default:
		b.Fatalf("unknown disk model %q", model)
	}
	groups := make([]*Cluster, g)
	for i := range groups {
		opts := Options{Disks: shared}
		if model == "own" {
			opts.Disks = machine()
		}
		groups[i] = Start(b, opts)
	}
	return groups, disks
}

type groupsResult struct {
	jobsPerSec, cpuPerJob, flushesPerJob, meanFlush float64
}

// runGroups runs the clients for warm-up plus run and measures the run.
func runGroups(b *testing.B, groups []*Cluster, disks []*Disk, clients int, run time.Duration) groupsResult {
	b.Helper()
	var jobs atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range clients {
		c := groups[i%len(groups)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			groupsClient(b, c, i, &jobs, &stop)
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	time.Sleep(groupsWarmUp)
	flushes := func() (n uint64, took time.Duration) {
		for _, d := range disks {
			n += d.Flushes()
			took += d.FlushTime()
		}
		return n, took
	}
	j0, c0, t0 := jobs.Load(), cpuTime(), time.Now()
	f0, fn0 := flushes()
	time.Sleep(run)
	j1, c1, elapsed := jobs.Load(), cpuTime(), time.Since(t0)
	f1, fn1 := flushes()
	n := float64(j1 - j0)
	if n == 0 {
		b.Fatal("no job finished in the measured window")
	}
	r := groupsResult{jobsPerSec: n / elapsed.Seconds(), cpuPerJob: float64((c1 - c0).Microseconds()) / n,
		flushesPerJob: float64(f1-f0) / n}
	if f1 > f0 {
		r.meanFlush = float64((fn1 - fn0).Microseconds()) / float64(f1-f0)
	}
	return r
}

// groupsClient runs jobs through its group one at a time: create one in
// its own stream, claim it, complete it. Each step is in a form that may
// be repeated when its outcome is unknown (a leader lost its leadership
// with it in flight, which a CPU-starved machine can provoke): the create
// carries an idempotency key, the claim a key of the claimant's own, and
// a complete of the same attempt answers as the first one did.
func groupsClient(b *testing.B, c *Cluster, i int, jobs *atomic.Uint64, stop *atomic.Bool) {
	stream := fmt.Sprintf("s%d", i)
	actor := fsm.Actor{Role: "left_claw", WorkerID: fmt.Sprintf("w%d", i)}
	for n := 0; n < groupsMaxJobs && !stop.Load(); n++ {
		id := fmt.Sprintf("c%d-%d", i, n)
		attempt, token := "k_"+id, "t-"+id
		now := time.Now().UnixNano()
		steps := []struct {
			what string
			t    fsm.CommandType
			cmd  any
			ok   func(*fsm.Result) bool
		}{
			{"create", fsm.CmdCreate, &fsm.CreateCommand{Now: now, ID: id, Stream: stream, Payload: []byte(`{"n":1}`),
				Actor: head, IdempotencyKey: id}, func(*fsm.Result) bool { return true }},
			{"claim", fsm.CmdClaim, &fsm.ClaimCommand{Now: now, Streams: []string{stream}, Actor: actor, Keyed: true,
				AttemptID: attempt, LeaseToken: token, LeaseNanos: 60e9},
				func(r *fsm.Result) bool { return r.Claimed && r.Job.ID == id }},
			{"complete", fsm.CmdComplete, &fsm.CompleteCommand{Now: now, Actor: actor, Result: []byte(`1`),
				Ref: fsm.LeaseRef{JobID: id, AttemptID: attempt, Token: token}}, func(*fsm.Result) bool { return true }},
		}
		for _, s := range steps {
			res, _, err := c.Apply(s.t, s.cmd)
			for try := 0; errors.Is(err, cluster.ErrOutcomeUnknown) && try < 5; try++ {
				res, _, err = c.Apply(s.t, s.cmd)
			}
			if err != nil || res.Err != nil || !s.ok(res) {
				b.Errorf("%s %s: %v %+v", s.what, id, err, res)
				stop.Store(true)
				return
			}
		}
		jobs.Add(1)
	}
}

// cpuTime is the process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
