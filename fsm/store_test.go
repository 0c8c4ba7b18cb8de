package fsm

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// checkIndexes fails unless every index of the published view holds exactly
// the entries the jobs in it call for, pointing at the stored version.
func checkIndexes(t testing.TB, f *FSM) {
	t.Helper()
	v := f.current()
	var queued, running, done, idem, ended, scheduled, keyed, claimableN int
	runningByKey := map[string]int{}
	lanes := [numLanes]int{}
	v.byID.Ascend(func(it idItem) bool {
		j := it.j
		if it.key != j.ID {
			t.Fatalf("id index key %q holds job %q", it.key, j.ID)
		}
		lane := laneOf(j.State)
		lanes[lane]++
		if got, ok := v.lanes[lane].Get(seqItem{seq: j.CreateIndex}); !ok || got.j != j {
			t.Fatalf("job %s (%s) missing from its state lane", j.ID, j.State)
		}
		if k, want := keyedEntry(j); want {
			keyed++
			if got, ok := v.keyed.Get(k); !ok || got.q.j != j {
				t.Fatalf("keyed job %s missing from the keyed index", j.ID)
			}
		}
		if j.Extra().ConcurrencyKey != "" && j.State == StateRunning {
			runningByKey[j.Extra().ConcurrencyKey]++
		}
		if q, want := queueEntry(j); want {
			queued++
			if got, ok := v.queue.Get(q); !ok || got.j != j {
				t.Fatalf("queued job %s missing from the queue index", j.ID)
			}
		}
		if claimable(j) {
			claimableN++
			age := ageItem{stream: j.Stream, rank: int64(j.QueueIndex), seq: j.CreateIndex}
			if got, ok := v.queueAge.Get(age); !ok || got.j != j {
				t.Fatalf("queued job %s missing from the queue-age index", j.ID)
			}
		}
		if s, want := scheduledEntry(j); want {
			scheduled++
			if got, ok := v.scheduled.Get(s); !ok || got.j != j {
				t.Fatalf("scheduled job %s missing from the scheduled index", j.ID)
			}
		}
		if l, want := leaseEntry(j); want {
			running++
			if got, ok := v.lease.Get(l); !ok || got.j != j {
				t.Fatalf("running job %s missing from the lease index", j.ID)
			}
		}
		if d, want := finishedEntry(j); want {
			done++
			if got, ok := v.finished.Get(d); !ok || got.j != j {
				t.Fatalf("done job %s missing from the finished index", j.ID)
			}
		}
		if e, want := taskEndedEntry(j); want {
			ended++
			if got, ok := v.taskEnded.Get(e); !ok || got.j != j {
				t.Fatalf("finished task %s missing from the task retention index", j.ID)
			}
		}
		if k, want := idemEntry(j); want {
			idem++
			if got, ok := v.idem.Get(k); !ok || got.j != j {
				t.Fatalf("job %s missing from the idempotency index", j.ID)
			}
		}
		return true
	})
	// Every entry is accounted for: no index keeps a stale one.
	if v.queueAge.Len() != claimableN || v.scheduled.Len() != scheduled || v.keyed.Len() != keyed {
		t.Fatalf("queue-age index holds %d, scheduled %d, keyed %d; jobs call for %d, %d, %d",
			v.queueAge.Len(), v.scheduled.Len(), v.keyed.Len(), claimableN, scheduled, keyed)
	}
	// The concurrency keys: the running counts, and in each group (key,
	// lane) its first job admitted into the queue if and only if the key
	// has room for it.
	v.keyRunning.Ascend(func(it keyCount) bool {
		if runningByKey[it.key] != it.n {
			t.Fatalf("key %s counted %d running, jobs say %d", it.key, it.n, runningByKey[it.key])
		}
		delete(runningByKey, it.key)
		return true
	})
	if len(runningByKey) > 0 {
		t.Fatalf("running keys not counted: %v", runningByKey)
	}
	heads := map[keyedItem]keyedItem{} // group → its first job
	var rated []keyedItem              // what waits on a rate
	keyAdmitted := 0
	v.byID.Ascend(func(it idItem) bool {
		if k, ok := ratedEntry(it.j); ok {
			rated = append(rated, k)
		}
		return true
	})
	v.keyed.Ascend(func(it keyedItem) bool {
		g := groupStart(it.key, it.q.key().stream, it.q.key().target)
		if _, ok := heads[g]; !ok {
			heads[g] = it
		}
		return true
	})
	admitted := 0
	for g, h := range heads {
		cur, has := v.admitted.Get(g)
		want := v.runningOfKey(g.key) < keyLimit(h.q.j)
		if has != want || (has && cur.q.j != h.q.j) {
			t.Fatalf("group %s/%s/%s: admitted %v (%v), want %v (head %s, %d running, limit %d)", g.key, g.q.key().stream, g.q.key().target, has, cur.q.j, want, h.q.j.ID, v.runningOfKey(g.key), keyLimit(h.q.j))
		}
		if has {
			admitted++
			if rateOf(h.q.j) != nil {
				rated = append(rated, keyedItem{rateOf(h.q.j).Key, h.q})
				continue
			}
			keyAdmitted++
			if got, ok := v.queue.Get(h.q); !ok || got.j != h.q.j {
				t.Fatalf("admitted job %s missing from the queue index", h.q.j.ID)
			}
		}
	}
	if v.admitted.Len() != admitted {
		t.Fatalf("%d admitted, %d groups call for it", v.admitted.Len(), admitted)
	}
	queued += keyAdmitted + checkRates(t, v, rated)
	// The requirement sets of each lane are counted as the queue holds them.
	reqs := map[reqCount]int{}
	v.queue.Ascend(func(it queueItem) bool {
		if k := it.key(); k.req != "" {
			reqs[reqCount{stream: k.stream, target: k.target, req: k.req}]++
		}
		return true
	})
	laneHeads := 0
	v.reqs.Ascend(func(rc reqCount) bool {
		n, head := rc.n, rc.head
		rc.n, rc.head = 0, queueItem{}
		if reqs[rc] != n {
			t.Fatalf("lane %s/%s counts %d jobs requiring %q, the queue holds %d", rc.stream, rc.target, n, rc.req, reqs[rc])
		}
		delete(reqs, rc)
		// Its head is the lane's first job, in the heads index.
		if first := v.firstQueued(rc.stream, rc.target, rc.req); first != head.j {
			t.Fatalf("lane %s/%s/%q: head %v, first job %v", rc.stream, rc.target, rc.req, head.j, first)
		}
		if got, ok := v.heads.Get(head); !ok || got.j != head.j {
			t.Fatalf("lane %s/%s/%q: head %s missing from the heads index", rc.stream, rc.target, rc.req, head.j.ID)
		}
		laneHeads++
		return true
	})
	if v.heads.Len() != laneHeads {
		t.Fatalf("heads index holds %d, lanes call for %d", v.heads.Len(), laneHeads)
	}
	if len(reqs) > 0 {
		t.Fatalf("requirement sets not counted: %v", reqs)
	}
	// Every job waiting on others is listed under each of them, and
	// nothing else is.
	deps := 0
	v.byID.Ascend(func(it idItem) bool {
		if j := it.j; waitingOnDeps(j) {
			for _, d := range j.Extra().DependsOn {
				deps++
				if got, ok := v.dependents.Get(depItem{dep: d, id: j.ID}); !ok || got.j != j {
					t.Fatalf("waiting job %s missing under %s in the dependents index", j.ID, d)
				}
			}
		}
		return true
	})
	if v.dependents.Len() != deps {
		t.Fatalf("dependents index holds %d, waiting jobs call for %d", v.dependents.Len(), deps)
	}
	if v.taskEnded.Len() != ended {
		t.Fatalf("task retention index holds %d, jobs call for %d", v.taskEnded.Len(), ended)
	}
	if v.queue.Len() != queued || v.lease.Len() != running || v.finished.Len() != done || v.idem.Len() != idem {
		t.Fatalf("index sizes queue %d lease %d finished %d idem %d, jobs call for %d %d %d %d",
			v.queue.Len(), v.lease.Len(), v.finished.Len(), v.idem.Len(), queued, running, done, idem)
	}
	for i := range lanes {
		if v.lanes[i].Len() != lanes[i] {
			t.Fatalf("lane %d holds %d jobs, want %d", i, v.lanes[i].Len(), lanes[i])
		}
	}
}

func TestIndexesMatchJobs(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		f, _ := New(Config{})
		for i, d := range randomLog(seed, 3000) {
			f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: d})
			if i%500 == 0 {
				checkIndexes(t, f)
			}
		}
		checkIndexes(t, f)
	}
}

// A reader's view is the state at the moment it was taken, whatever is
// applied after; and readers walking views or peeking while batches are
// applied see no torn state (run with -race: a write to a node a view
// shares, or a peek outside the writer's lock, is a race).
func TestReadViewsAreStable(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{Stream: "s"})
	r := h.f.Read()
	h.claimNext([]string{"s"}, left)
	if got, _ := r.Job(j.ID); got.State != StateQueued {
		t.Fatalf("old view sees %s", got.State)
	}
	if c, _ := r.Counts(); c[StateQueued] != 1 || c[StateRunning] != 0 {
		t.Fatalf("old view counts %v", c)
	}
	if c, _ := h.f.Read().Counts(); c[StateQueued] != 0 || c[StateRunning] != 1 {
		t.Fatalf("new view counts %v", c)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := h.f.Read()
				jobs, _, err := v.List(ListFilter{Limit: 1000})
				if err != nil {
					t.Error(err)
					return
				}
				c, _ := v.Counts()
				if total := c[StateQueued] + c[StateRunning] + c[StateDone] + c[StateFailed] + c[StateDead]; len(jobs) != min(total, 1000) {
					t.Errorf("view lists %d jobs, counts %d", len(jobs), total)
					return
				}
				if len(jobs) > 0 { // a peek reads the writer's own trees between batches
					if _, err := h.f.Peek().Job(jobs[len(jobs)-1].ID); err != nil {
						t.Errorf("peek: %v", err)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		h.create(CreateCommand{Stream: "s", ID: fmt.Sprintf("c%05d", i)})
		if i%3 == 0 {
			h.claimNext([]string{"s"}, left)
		}
	}
	close(stop)
	wg.Wait()
	checkIndexes(t, h.f)
}

// A Peek lookup sees every entry applied before it, yet publishes no view:
// after it, the writer's next change copies no node of a view (a Read
// would have made it copy a path in every tree the claim changes). Once a
// Peek reader walks, it shares one view like a Read.
func TestPeekReadsLatestWithoutPublishing(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{Stream: "s"})
	h.f.Read() // the view is current
	published := h.f.view.Load()

	h.claimNext([]string{"s"}, left)
	p := h.f.Peek()
	got, err := p.Job(j.ID)
	if err != nil || got.State != StateRunning {
		t.Fatalf("peek sees %v, %v; want the claimed job", got, err)
	}
	if next, _ := p.NextClaimable([]string{"s"}, []string{left.Role}, nil, ""); next != nil {
		t.Fatalf("peek finds %s claimable after the only job was claimed", next.ID)
	}
	if res, ok := p.Heartbeat(&HeartbeatCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, AttemptID: got.Lease.AttemptID, Token: got.Lease.Token},
		Actor: left, LeaseNanos: lease}, 0.5); !ok || res.Err != nil {
		t.Fatalf("peek heartbeat of a fresh lease: %+v, %v", res, ok)
	}
	if h.f.view.Load() != published {
		t.Fatal("a peek lookup published a view")
	}

	c, _ := p.Counts() // takes a view: later lookups share it
	if c[StateRunning] != 1 {
		t.Fatalf("peek counts %v", c)
	}
	h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, AttemptID: got.Lease.AttemptID, Token: got.Lease.Token}, Actor: left})
	if again, _ := p.Job(j.ID); again.State != StateRunning {
		t.Fatalf("after Counts, the peek reader moved on to %s", again.State)
	}
	if now, _ := h.f.Peek().Job(j.ID); now.State != StateDone {
		t.Fatalf("a new peek sees %s, want done", now.State)
	}
}

// checkRates fails unless the rate indexes are what the jobs call for:
// rated holds every job waiting on its rate, each key's live jobs are
// counted in its bucket, each group's first job is admitted into its lane
// if and only if its bucket is open, and the due index files every bucket
// an entry must look at. It returns how many jobs it admitted.
func checkRates(t testing.TB, v *tables, rated []keyedItem) int {
	t.Helper()
	if v.rated.Len() != len(rated) {
		t.Fatalf("rated index holds %d, jobs call for %d", v.rated.Len(), len(rated))
	}
	groups := map[rateGroupItem]int{}
	for _, k := range rated {
		groups[rateGroupItem{key: k.key, stream: k.q.key().stream, target: k.q.key().target}]++
	}
	if v.rateGroups.Len() != len(groups) {
		t.Fatalf("rate group counts hold %d groups, the rated jobs make %d", v.rateGroups.Len(), len(groups))
	}
	v.rateGroups.Ascend(func(g rateGroupItem) bool {
		key := g
		key.n = 0
		if groups[key] != g.n {
			t.Fatalf("rate group %s/%s/%s counts %d jobs, the rated index holds %d", g.key, g.stream, g.target, g.n, groups[key])
		}
		return true
	})
	heads := map[keyedItem]keyedItem{}
	for _, k := range rated {
		if got, ok := v.rated.Get(k); !ok || got.q.j != k.q.j {
			t.Fatalf("rated job %s missing from the rated index", k.q.j.ID)
		}
		g := groupStart(k.key, k.q.key().stream, k.q.key().target)
		if h, ok := heads[g]; !ok || lessKeyed(k, h) {
			heads[g] = k
		}
	}
	live := map[string]int{}
	v.byID.Ascend(func(it idItem) bool {
		if r := rateOf(it.j); r != nil && !it.j.State.Terminal() {
			live[r.Key]++
		}
		return true
	})
	dues := 0
	v.eachRate(func(b *rateItem) bool {
		if b.jobs != live[b.Key] {
			t.Fatalf("rate key %s counts %d live jobs, jobs say %d", b.Key, b.jobs, live[b.Key])
		}
		delete(live, b.Key)
		want := int64(0)
		switch {
		case b.Blocked:
			want = b.AllowAt()
		case b.jobs == 0:
			want = max(b.TAT, 1)
		}
		if b.due != want {
			t.Fatalf("rate key %s filed due at %d, want %d (%+v)", b.Key, b.due, want, b)
		}
		if want != 0 {
			dues++
			if _, ok := v.rateDue.Get(rateDueItem{want, b.Key}); !ok {
				t.Fatalf("rate key %s missing from the due index", b.Key)
			}
		}
		return true
	})
	if len(live) > 0 {
		t.Fatalf("rate keys without a bucket: %v", live)
	}
	if v.rateDue.Len() != dues {
		t.Fatalf("due index holds %d, buckets call for %d", v.rateDue.Len(), dues)
	}
	admitted := 0
	for g, h := range heads {
		b, _ := v.rate(g.key)
		cur, has := v.rateAdmitted.Get(g)
		if want := !b.Blocked; has != want || (has && cur.q.j != h.q.j) {
			t.Fatalf("rate group %s/%s/%s: admitted %v, want %v (head %s)", g.key, g.q.key().stream, g.q.key().target, has, want, h.q.j.ID)
		}
		if has {
			admitted++
			if got, ok := v.queue.Get(h.q); !ok || got.j != h.q.j {
				t.Fatalf("rate-admitted job %s missing from the queue index", h.q.j.ID)
			}
		}
	}
	if v.rateAdmitted.Len() != admitted {
		t.Fatalf("%d rate-admitted, %d groups call for it", v.rateAdmitted.Len(), admitted)
	}
	return admitted
}
