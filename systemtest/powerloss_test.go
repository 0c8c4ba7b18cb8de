package systemtest

// Power loss (issue #27, point 3): every node's data directory is a crashfs
// mount (internal/crashfs), which holds written bytes in memory until they
// are fsynced. All three nodes are SIGKILLed at once while clients are
// writing, every mount drops what was not fsynced (the page cache a power
// cut loses), and the nodes start again from what is left: no job or
// complete the cluster acknowledged may be missing. The control run makes
// fsync a lie (the mounts answer it without applying anything) and shows
// that the same check then finds acknowledged jobs missing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/chaos"
	"github.com/spine-queue/spine/internal/crashfs"
	"github.com/spine-queue/spine/internal/testcluster"
)

// plCluster is a cluster whose nodes' data directories are crashfs mounts.
type plCluster struct {
	dir    string
	c      *testcluster.Cluster
	mounts []*crashfs.FS // mounts[i] is node i's (c.Nodes[i]) data dir
}

// plSyncDelay is how long every fsync takes at least on the test's disks:
// long enough that a power cut usually finds written bytes not yet synced
// (an fsync in progress when its node is killed applies nothing).
const plSyncDelay = 2 * time.Millisecond

// startPowerLossCluster mounts a crashfs at each node's data directory
// (Dir/nI, over Dir/backing/nI) and starts the cluster on them. The test is
// skipped when FUSE cannot be used, unless SPINE_REQUIRE_FAULTS=1. At the
// end the nodes are stopped (after the convergence check of stopCluster)
// and then the mounts are unmounted.
func startPowerLossCluster(t *testing.T) *plCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("power loss: multi-process system test (skipped with -short)")
	}
	dir := t.TempDir()
	pc := &plCluster{dir: dir}
	for i := 1; i <= 3; i++ {
		mp := filepath.Join(dir, fmt.Sprintf("n%d", i))
		f, err := crashfs.Mount(mp, filepath.Join(dir, "backing", fmt.Sprintf("n%d", i)), crashfs.WithSyncDelay(plSyncDelay))
		if err != nil {
			if errors.Is(err, crashfs.ErrUnavailable) && os.Getenv("SPINE_REQUIRE_FAULTS") != "1" {
				t.Skipf("power loss needs FUSE (root and /dev/fuse; SPINE_REQUIRE_FAULTS=1 makes this a failure): %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := f.Unmount(); err != nil {
				t.Errorf("unmount %s: %v", mp, err)
			}
			if plMounted(mp) {
				t.Errorf("%s is still mounted after the test", mp)
			}
		})
		pc.mounts = append(pc.mounts, f)
	}
	// No asynchronous preemption in the nodes: its signal (SIGURG) makes
	// the kernel interrupt a FUSE request, which crashfs answers as the
	// killed caller's fsync it models (EINTR), and a live node whose
	// fdatasync is not retried on EINTR then stops at random. A real disk
	// never answers a signal so.
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: dir, Nodes: 3,
		Env: map[string]string{"SPINE_LOG_LEVEL": "info", "GODEBUG": "asyncpreemptoff=1"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCluster(t, c) })
	pc.c = c
	return pc
}

func plMounted(mp string) bool {
	data, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == mp {
			return true
		}
	}
	return false
}

// powerCut SIGKILLs every node as close to simultaneously as possible (one
// kill(2) after another, no wait in between), waits until they are gone,
// drops every mount's unsynced bytes, and starts the nodes again. It
// returns once every node is a live voter under a leader, with how long
// the mounts' crashes took and how long the nodes took to come back.
func (pc *plCluster) powerCut(t *testing.T, afterKill func()) (crash, up time.Duration) {
	t.Helper()
	c := pc.c
	var pids []int
	for _, n := range c.Nodes {
		if pid := n.Pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, n := range c.Nodes {
		if err := c.Kill(n); err != nil {
			t.Fatal(err)
		}
	}
	if afterKill != nil {
		afterKill()
	}
	start := time.Now()
	for i, f := range pc.mounts {
		if err := f.Crash(); err != nil {
			t.Fatalf("crash %s: %v", c.Nodes[i].ID, err)
		}
	}
	crash = time.Since(start)
	start = time.Now()
	for _, n := range c.Nodes {
		if err := c.Restart(n); err != nil {
			t.Fatal(err)
		}
	}
	// Every node must come back: a node that refuses its data directory
	// after a power cut is a failure too, even if the others go on.
	if err := c.WaitVoters(3, 60*time.Second); err != nil {
		for _, n := range c.Nodes {
			if !n.Running() {
				t.Errorf("%s did not survive its restart after the power cut", n.ID)
			}
		}
		t.Fatalf("the cluster did not come back after the power cut: %v", err)
	}
	return crash, time.Since(start)
}

// plLoad is the client load of one cycle: workers that create jobs through
// every node, and claim and complete some of them, recording what the
// cluster acknowledged.
type plLoad struct {
	mu        sync.Mutex
	created   map[string]int // acknowledged creates (201): job id -> cycle
	completed map[string]int // acknowledged completes (200): job id -> cycle
	ops       atomic.Int64   // requests sent
	inflight  atomic.Int64   // requests sent and not answered yet
	cycleAck  atomic.Int64   // creates acknowledged in the current cycle
	cycleDone atomic.Int64   // completes acknowledged in the current cycle
}

func newPLLoad() *plLoad {
	return &plLoad{created: map[string]int{}, completed: map[string]int{}}
}

func (l *plLoad) request(method, u, token string, body interface{}) (*apiResp, error) {
	l.ops.Add(1)
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	return apiRequest(method, u, token, body)
}

// run creates jobs through urls with workers goroutines until ctx ends;
// every third acknowledged job is claimed and completed.
func (l *plLoad) run(ctx context.Context, urls []string, workers, cycle int) *sync.WaitGroup {
	l.cycleAck.Store(0)
	l.cycleDone.Store(0)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			base := urls[w%len(urls)]
			for seq := 0; ctx.Err() == nil; seq++ {
				r, err := l.request("POST", base+"/jobs", apiHead, map[string]interface{}{
					"payload": map[string]interface{}{"cycle": cycle, "worker": w, "seq": seq}})
				if err != nil || r.Status != http.StatusCreated {
					testcluster.SleepCtx(ctx, 20*time.Millisecond)
					continue
				}
				var j apiJob
				if json.Unmarshal(r.Body, &j) != nil || j.ID == "" {
					continue
				}
				l.mu.Lock()
				l.created[j.ID] = cycle
				l.mu.Unlock()
				l.cycleAck.Add(1)
				if seq%3 != 0 {
					continue
				}
				r, err = l.request("POST", base+"/jobs/"+j.ID+"/claim", apiLeft, map[string]string{"workerId": fmt.Sprintf("pl-%d", w)})
				if err != nil || r.Status != http.StatusOK {
					continue
				}
				var cl apiJob
				if json.Unmarshal(r.Body, &cl) != nil || cl.LeaseToken == "" {
					continue
				}
				r, err = l.request("POST", base+"/jobs/"+j.ID+"/complete", apiLeft, map[string]interface{}{
					"leaseToken": cl.LeaseToken, "result": map[string]int{"seq": seq}})
				if err != nil || r.Status != http.StatusOK {
					continue
				}
				l.mu.Lock()
				l.completed[j.ID] = cycle
				l.mu.Unlock()
				l.cycleDone.Add(1)
			}
		}(w)
	}
	return &wg
}

// plFindings is what a check after a power cut found.
type plFindings struct {
	checked int
	missing []string // acknowledged creates not found (404)
	notDone []string // acknowledged completes whose job is not done
}

// plCheck reads every job in created with ?consistent through the
// leader; a job answered 404 is missing, a job in completed that is not
// done lost its complete. Other answers (a node not ready yet) are asked
// again until timeout.
func plCheck(t *testing.T, c *testcluster.Cluster, created, completed map[string]int) plFindings {
	t.Helper()
	leader, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(created))
	for id := range created {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var (
		mu  sync.Mutex
		f   = plFindings{checked: len(ids)}
		wg  sync.WaitGroup
		bad []string
	)
	next := make(chan string)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				var status int
				var job apiJob
				err := testcluster.Eventually(30*time.Second, 50*time.Millisecond, func() error {
					base := leader.URL
					if n := c.Leader(); n != nil {
						base = n.URL
					}
					r, err := apiRequest("GET", base+"/jobs/"+id+"?consistent", apiHead, nil)
					if err != nil {
						return err
					}
					switch r.Status {
					case http.StatusOK:
						if err := json.Unmarshal(r.Body, &job); err != nil {
							return err
						}
					case http.StatusNotFound:
					default:
						return fmt.Errorf("%s", r)
					}
					status = r.Status
					return nil
				})
				mu.Lock()
				switch {
				case err != nil:
					bad = append(bad, fmt.Sprintf("%s: %v", id, err))
				case status == http.StatusNotFound:
					f.missing = append(f.missing, id)
				default:
					if _, ok := completed[id]; ok && job.Status != "done" {
						f.notDone = append(f.notDone, fmt.Sprintf("%s (status %s)", id, job.Status))
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d acknowledged jobs could not be read after the power cut, e.g. %s", len(bad), bad[0])
	}
	sort.Strings(f.missing)
	sort.Strings(f.notDone)
	return f
}

// plPlan is how many power cuts TestPowerLoss makes: POWERLOSS_CYCLES
// cycles; else 5, and with CHAOS_DURATION (a Go duration, as for `make
// chaos`) more until that much time has passed.
func plPlan(t *testing.T) (cycles int, dur time.Duration) {
	if v := os.Getenv("POWERLOSS_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			t.Fatalf("POWERLOSS_CYCLES=%q: want a number of cycles from 1 to 10000", v)
		}
		return n, 0
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive Go duration such as 3m", v)
		}
		return 5, d
	}
	return 5, 0
}

// Every node loses power at once, several times, while clients write: no
// acknowledged job or complete may be lost, and the replicas agree.
func TestPowerLoss(t *testing.T) {
	pc := startPowerLossCluster(t)
	c := pc.c
	cycles, dur := plPlan(t)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	if dur > 0 {
		t.Logf("power loss: at least %d cycles and %v, seed %d", cycles, dur, seed)
	} else {
		t.Logf("power loss: %d cycles, seed %d", cycles, seed)
	}
	began := time.Now()
	load := newPLLoad()
	v := chaos.Verdict{Scenario: "power-loss", Nodes: 3, Linearizable: "n/a"}
	var lostTotal int
	var droppedTotal int64
	backups := 0 // backups (raft snapshots) taken before the cut
	for cycle := 1; cycle <= cycles || time.Since(began) < dur; cycle++ {
		// The cut comes once the cycle has this many acknowledged creates
		// (and a few completes), at a moment the workers choose.
		target := int64(30 + rng.Intn(40))
		ctx, cancel := context.WithCancel(context.Background())
		wg := load.run(ctx, c.URLs(), 6, cycle)
		// One backup per cycle, while the load runs: the leader writes a
		// raft snapshot through the file snapshot store.
		snapDone := make(chan struct{})
		snapURL := c.Nodes[rng.Intn(3)].URL + "/v1/snapshot"
		var snapOK bool
		go func() {
			defer close(snapDone)
			r, err := apiRequest("GET", snapURL, apiHead, nil)
			snapOK = err == nil && r.Status == http.StatusOK
		}()
		// A test that fails half-way still stops its load.
		t.Cleanup(cancel)
		err := testcluster.Eventually(60*time.Second, 5*time.Millisecond, func() error {
			if a, d := load.cycleAck.Load(), load.cycleDone.Load(); a < target || d < 3 {
				return fmt.Errorf("%d creates and %d completes acknowledged, want %d and 3", a, d, target)
			}
			return nil
		})
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("cycle %d: the load did not get going: %v", cycle, err)
		}
		inflight := load.inflight.Load()
		start := time.Now()
		crashTook, upTook := pc.powerCut(t, func() {
			cancel()
			wg.Wait()
			<-snapDone
		})
		back := time.Since(start)
		if snapOK {
			backups++
		}
		var dropped int64
		for _, f := range pc.mounts {
			dropped += f.Stats().DroppedBytes
		}
		droppedTotal += dropped
		load.mu.Lock()
		created := make(map[string]int, len(load.created))
		for id, cy := range load.created {
			created[id] = cy
		}
		completed := make(map[string]int, len(load.completed))
		for id, cy := range load.completed {
			completed[id] = cy
		}
		load.mu.Unlock()
		found := plCheck(t, c, created, completed)
		t.Logf("cycle %d: cut with %d requests in flight, %d unsynced bytes dropped; back in %v (crashes %v, restart %v); %d acknowledged jobs (%d completes) read: %d missing, %d completes lost",
			cycle, inflight, dropped, back.Round(time.Millisecond), crashTook.Round(time.Millisecond), upTook.Round(time.Millisecond), found.checked, len(completed), len(found.missing), len(found.notDone))
		for i, id := range found.missing {
			if i == 10 {
				break
			}
			t.Errorf("cycle %d: acknowledged job %s (created in cycle %d) is missing", cycle, id, created[id])
		}
		for i, s := range found.notDone {
			if i == 10 {
				break
			}
			t.Errorf("cycle %d: acknowledged complete of %s is lost", cycle, s)
		}
		lostTotal = len(found.missing) + len(found.notDone)
		v.Faults++
		v.Acked = len(created)
		if lostTotal > 0 {
			break
		}
	}
	load.mu.Lock()
	completes := len(load.completed)
	load.mu.Unlock()
	v.Ops = int(load.ops.Load())
	v.Lost = lostTotal
	err := c.CheckConverged(convergeTimeout)
	v.Diverged = err != nil && strings.Contains(err.Error(), "diverge")
	v.Pass = lostTotal == 0 && err == nil
	var synced int64
	for _, f := range pc.mounts {
		synced += f.Stats().SyncedBytes
	}
	snaps, _ := filepath.Glob(filepath.Join(pc.dir, "backing", "n*", "raft", "snapshots", "*", "meta.json"))
	v.Note = fmt.Sprintf("%d all-node power cuts, %d acknowledged completes, %d unsynced bytes dropped, %d bytes fsynced, %d backups taken, %d raft snapshots on disk",
		v.Faults, completes, droppedTotal, synced, backups, len(snaps))
	t.Log(v.String())
	if err != nil {
		t.Fatalf("after the power cuts: %v", err)
	}
}

// The control: the same check with disks that lie about fsync must find
// acknowledged jobs missing. Jobs acknowledged before the lie began are
// durable and must all be there; the cluster must come back.
func TestPowerLossControlCatchesLyingFsync(t *testing.T) {
	pc := startPowerLossCluster(t)
	c := pc.c
	urls := c.URLs()
	var ops int
	create := func(n int, phase string) map[string]int {
		ids := map[string]int{}
		for i := 0; i < n; i++ {
			ops++
			r := apiDo(t, "POST", urls[i%len(urls)]+"/jobs", apiHead, map[string]interface{}{"payload": map[string]interface{}{"phase": phase, "n": i}})
			ids[apiJobOf(t, apiWant(t, r, http.StatusCreated)).ID] = 0
		}
		return ids
	}
	durable := create(30, "durable")
	for _, f := range pc.mounts {
		f.SetIgnoreSync(true)
	}
	lied := create(30, "lied")
	var held int64
	for _, f := range pc.mounts {
		held += f.Stats().HeldBytes
	}
	// The nodes restart on honest disks. Not before they are dead: an
	// honest fsync of a node still running would apply everything held.
	_, _ = pc.powerCut(t, func() {
		for _, f := range pc.mounts {
			f.SetIgnoreSync(false)
		}
	})
	all := map[string]int{}
	for id := range durable {
		all[id] = 0
	}
	for id := range lied {
		all[id] = 0
	}
	found := plCheck(t, c, all, nil)
	lostDurable, lostLied := 0, 0
	for _, id := range found.missing {
		if _, ok := durable[id]; ok {
			lostDurable++
		} else {
			lostLied++
		}
	}
	var ignored int64
	for _, f := range pc.mounts {
		ignored += f.Stats().IgnoredSyncs
	}
	// The cluster that came back takes writes again.
	after := create(3, "after")
	if f := plCheck(t, c, after, nil); len(f.missing) > 0 {
		t.Errorf("jobs created after the power cut are missing: %v", f.missing)
	}
	err := c.CheckConverged(convergeTimeout)
	v := chaos.Verdict{Scenario: "power-loss-control", Nodes: 3, Ops: ops, Faults: 1, Linearizable: "n/a",
		Acked: len(all), Lost: len(found.missing), Diverged: err != nil && strings.Contains(err.Error(), "diverge"),
		Pass: lostLied > 0 && lostDurable == 0 && err == nil,
		Note: fmt.Sprintf("fsync ignored after %d durable jobs: %d of the %d acknowledged afterwards lost, %d durable lost; %d fsyncs ignored, %d bytes held at the cut; the cluster came back and took %d new jobs",
			len(durable), lostLied, len(lied), lostDurable, ignored, held, len(after))}
	t.Log(v.String())
	if lostLied == 0 {
		t.Errorf("the check found no loss although every fsync after job %d was a lie: it would not catch a lost write", len(durable))
	}
	if lostDurable > 0 {
		t.Errorf("%d jobs acknowledged before fsync began to lie are missing", lostDurable)
	}
	if err != nil {
		t.Fatalf("after the power cut: %v", err)
	}
}
