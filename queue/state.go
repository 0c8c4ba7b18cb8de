package queue

import (
	"math"
	"sort"

	"github.com/spine-queue/spine/fsm"
)

// The control plane's read models (seed 003): the system's state and who
// works on what, built from one view of the replicated state. They take no
// lock and change nothing.

// StreamDepth is one stream's queue.
type StreamDepth struct {
	Stream  string
	Queued  int
	Running int
	// OldestQueued is when the longest-waiting queued job was last queued
	// (unix nanos; 0: none queued).
	OldestQueued int64
	// Paused: an operator paused the stream (claims skip it).
	Paused bool
	// Unmatched: queued jobs no live worker has the capabilities for.
	Unmatched []fsm.Unmatched
	// RateLimited counts the queued jobs their key's rate holds back now.
	RateLimited int
}

// Agent is a claimant: a registered worker, or anyone holding a lease
// under a worker id, with the jobs it runs.
type Agent struct {
	ID     string
	Worker *fsm.Worker // nil: not registered
	Jobs   []*fsm.Job  // running under its leases, oldest claim first
}

// SystemState is the registry, the agents and the queues in one view.
type SystemState struct {
	Gateways []*fsm.Gateway
	Agents   []*Agent // registered workers first (by id), then other claimants (by id)
	Streams  []StreamDepth
	Counts   map[fsm.State]int
}

// SystemState reads the registry, every running lease and the queues from
// one consistent view, as a caller of role may see them: the jobs, counts
// and queues of the jobs whose target it may see. Its cost grows with the
// number of streams and of running jobs, not of the others.
func (s *Service) SystemState(c Caller) *SystemState {
	role := c.ViewRole()
	r := s.state.Read()
	out := &SystemState{Gateways: r.Gateways(), Counts: map[fsm.State]int{
		fsm.StateQueued: 0, fsm.StateRunning: 0, fsm.StateDone: 0, fsm.StateFailed: 0, fsm.StateDead: 0, fsm.StateCancelled: 0}}
	out.Agents = agents(r, c)
	depth := map[string]*StreamDepth{}
	get := func(stream string) *StreamDepth {
		d := depth[stream]
		if d == nil {
			d = &StreamDepth{Stream: stream}
			depth[stream] = d
		}
		return d
	}
	// From the per-stream counts: no walk of the jobs.
	for _, sc := range r.StreamCountsFor(role) {
		if !c.InScope(sc.Stream) {
			continue
		}
		out.Counts[sc.State] += sc.N
		switch sc.State {
		case fsm.StateQueued:
			get(sc.Stream).Queued = sc.N
		case fsm.StateRunning:
			get(sc.Stream).Running = sc.N
		}
	}
	for stream, at := range r.OldestQueuedFor(role) {
		if c.InScope(stream) {
			get(stream).OldestQueued = at
		}
	}
	for _, p := range r.Paused() {
		if c.InScope(p.Stream) {
			get(p.Stream).Paused = true
		}
	}
	for stream, u := range r.UnmatchedFor(role, s.now()-LiveWindow.Nanoseconds()) {
		if c.InScope(stream) {
			get(stream).Unmatched = u
		}
	}
	for stream, n := range r.RateWaiting(role, c.InScope) {
		get(stream).RateLimited = n
	}
	for _, d := range depth {
		out.Streams = append(out.Streams, *d)
	}
	sort.Slice(out.Streams, func(i, j int) bool { return out.Streams[i].Stream < out.Streams[j].Stream })
	return out
}

// Agents lists who works on what, as a caller of role may see it: every
// registered worker (with the jobs running under its id that role may
// read), then every other worker id holding a lease on such a job. It
// walks every running job, however many: the view is exact.
func (s *Service) Agents(c Caller) []*Agent { return agents(s.state.Read(), c) }

func agents(r *fsm.Reader, c Caller) []*Agent {
	f := fsm.ListFilter{State: fsm.StateRunning, Limit: math.MaxInt, MaxScan: -1}
	if c.ViewRole() != fsm.HeadRole || c.Scoped() {
		f.Visible = func(j *fsm.Job) bool { return c.SeesJob(r, j) }
	}
	running, _, _ := r.List(f)
	byWorker := map[string][]*fsm.Job{}
	for _, j := range running {
		if j.Lease != nil {
			byWorker[j.Lease.WorkerID] = append(byWorker[j.Lease.WorkerID], j)
		}
	}
	var out []*Agent
	for _, w := range r.Workers("") {
		out = append(out, &Agent{ID: w.ID, Worker: w, Jobs: sortByStart(byWorker[w.ID])})
		delete(byWorker, w.ID)
	}
	var others []string
	for id := range byWorker {
		others = append(others, id)
	}
	sort.Strings(others)
	for _, id := range others {
		out = append(out, &Agent{ID: id, Jobs: sortByStart(byWorker[id])})
	}
	return out
}

func sortByStart(jobs []*fsm.Job) []*fsm.Job {
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].StartedAt < jobs[j].StartedAt })
	return jobs
}

// NextFor answers what a claim by agent (a worker id, with the caller's
// role) of streams would take now, without claiming it: nil when nothing.
func (s *Service) NextFor(agent string, c Caller, streams []string) (*fsm.Job, error) {
	if agent == "" {
		agent = c.WorkerID
	}
	if err := CheckWorkerID("agent_id", agent, true); err != nil {
		return nil, err
	}
	if err := c.CheckWorker(agent); err != nil {
		return nil, err
	}
	streams, err := c.ScopeStreams(streams)
	if err != nil {
		return nil, err
	}
	if streams, err = claimStreams(streams); err != nil {
		return nil, err
	}
	r := s.state.Read()
	targets, err := s.claimTargets(r, fsm.Actor{Role: c.ViewRole(), WorkerID: agent})
	if err != nil {
		return nil, err
	}
	return r.NextQueued(streams, targets, nil, agent), nil
}
