package fsm

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Capabilities. A job may require capabilities: labels such as gpu,
// gpu:a100 or lang:python (Job.Requires). A claim may name the capabilities
// its worker has (ClaimCommand.Capabilities); it is handed only jobs whose every
// requirement is among them, oldest first as always among those, and a
// claim that names none only jobs that require nothing.
//
// A job's requirements, as a canonical key (sorted, comma-joined), are part
// of its queue lane: (stream, target, requirements). A lane with no
// requirements is where every job of earlier versions is, and a claim
// without capabilities looks only there, exactly as before. For the lanes
// with requirements, the heads index holds the first job of each, in queue
// order: a claim with capabilities walks the heads of its stream's lanes
// from the oldest and stops at the first it covers, or at the first that
// could not beat the job without requirements it found. A claim whose
// capabilities cover the oldest head does one seek more than a plain one;
// each head it passes over (a set it does not cover, older than what it
// takes) costs one step of an in-order walk, never a search.
//
// Whether some worker can take a job is soft knowledge the state keeps as
// replicated facts: when a claim with each capability set was last applied
// (capsSeen; a running job's heartbeats refresh the set of the claim that
// runs it). A reader decides with its own clock which sets are live.

// Limits of requirement and capability lists.
const (
	MaxRequires     = 16
	MaxCapabilities = 32
	// maxCapsSeen bounds the capability sets remembered; the one seen
	// longest ago makes room.
	maxCapsSeen = 256
	// capsSeenStep: a set's last-seen time moves only by at least this, so
	// the table changes about once a minute per set, not on every claim.
	capsSeenStep = int64(60e9) // a minute
)

// validLabel reports whether l may be a capability label: 1-64 letters,
// digits or _ . : / = + -, starting with a letter or digit (no comma, the
// key's separator, and no spaces).
func validLabel(l string) bool {
	if len(l) == 0 || len(l) > 64 {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && strings.IndexByte("_.:/=+-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// CapabilityKey returns the canonical key of a list of labels (sorted,
// without repeats, comma-joined; "" for none), or an ErrInvalid error
// naming a bad label or a list longer than most.
func CapabilityKey(labels []string, most int) (string, error) {
	if len(labels) == 0 {
		return "", nil
	}
	s := slices.Clone(labels)
	slices.Sort(s)
	s = slices.Compact(s)
	if len(s) > most {
		return "", fmt.Errorf("%w: at most %d capability labels", ErrInvalid, most)
	}
	for _, l := range s {
		if !validLabel(l) {
			return "", fmt.Errorf("%w: capability label %q: 1-64 letters, digits or _ . : / = + -, starting with a letter or digit", ErrInvalid, l)
		}
	}
	return strings.Join(s, ","), nil
}

// Labels splits a capability key into its labels (nil for "").
func Labels(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ",")
}

// covers reports whether the sorted labels caps include every label of
// the requirement key req.
func covers(caps []string, req string) bool {
	for req != "" {
		l, rest, _ := strings.Cut(req, ",")
		if _, ok := slices.BinarySearch(caps, l); !ok {
			return false
		}
		req = rest
	}
	return true
}

// reqCount counts the jobs of one requirement set in one queue lane (only
// sets that are not empty), and holds the lane's first job (its item in the
// heads index).
type reqCount struct {
	stream, target, req string
	n                   int
	head                queueItem
}

// lessHead orders the heads index: by stream and target, then in queue
// order.
func lessHead(a, b queueItem) bool {
	if c := cmpStreamTarget(a, b); c != 0 {
		return c < 0
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.lane != b.lane && a.key().req < b.key().req
}

func lessReqCount(a, b reqCount) bool {
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	if a.target != b.target {
		return a.target < b.target
	}
	return a.req < b.req
}

// queueInsert and queueDelete change the queue index and keep the reqs
// index's counts with it.
func (w *writer) queueInsert(it queueItem) {
	if _, replaced := insertRun(w.t.queue, lessQueue, it); !replaced && it.key().req != "" {
		w.addReq(it, 1)
	}
	w.dirty[tQueue] = true
}

func (w *writer) queueDelete(it queueItem) {
	if _, found := w.t.queue.Delete(it); found && it.key().req != "" {
		w.addReq(it, -1)
	}
	w.dirty[tQueue] = true
}

// queueUpdate moves a job's queue entry from o to n (see update); it
// reports whether the index changed.
func (w *writer) queueUpdate(o queueItem, hadO bool, n queueItem, hasN bool) bool {
	if hadO && hasN && !lessQueue(o, n) && !lessQueue(n, o) {
		// The same place, a new version of the job: a lane's head holds
		// the new one too.
		insertRun(w.t.queue, lessQueue, n)
		w.dirty[tQueue] = true
		if nk := n.key(); nk.req != "" {
			k := reqCount{stream: nk.stream, target: nk.target, req: nk.req}
			if c, ok := w.t.reqs.Get(k); ok && c.head.j == o.j {
				c.head = n
				w.t.reqs.ReplaceOrInsert(c)
				w.t.heads.ReplaceOrInsert(n)
				w.dirty[tReqs], w.dirty[tHeads] = true, true
			}
		}
		return true
	}
	if hadO {
		w.queueDelete(o)
	}
	if hasN {
		w.queueInsert(n)
	}
	return hadO || hasN
}

// addReq counts it (d 1) into or out of (d -1) its lane's requirement set,
// after the queue index took the change, and keeps the lane's head.
func (w *writer) addReq(it queueItem, d int) {
	ik := it.key()
	k := reqCount{stream: ik.stream, target: ik.target, req: ik.req}
	c, had := w.t.reqs.Get(k)
	k.n, k.head = c.n+d, c.head
	switch {
	case k.n <= 0:
		w.t.reqs.Delete(k)
		w.t.heads.Delete(c.head)
	case !had || (d > 0 && lessQueue(it, c.head)):
		// A new lane, or a job ahead of its head.
		if had {
			w.t.heads.Delete(c.head)
		}
		k.head = it
		w.t.heads.ReplaceOrInsert(it)
		w.t.reqs.ReplaceOrInsert(k)
	case d < 0 && it.j == c.head.j:
		// The head left: the lane's next job leads.
		w.t.heads.Delete(c.head)
		w.t.queue.AscendGreaterOrEqual(queueItem{lane: it.lane, rank: math.MinInt64}, func(q queueItem) bool {
			k.head = q
			return false
		})
		w.t.heads.ReplaceOrInsert(k.head)
		w.t.reqs.ReplaceOrInsert(k)
	default:
		w.t.reqs.ReplaceOrInsert(k)
	}
	w.dirty[tReqs], w.dirty[tHeads] = true, true
}

// MaxNotFor bounds the workers a job remembers as not to be handed it
// (Job.NotFor); maxNotForSkips bounds the jobs one lane's look passes over
// because the claiming worker released them as not for it.
const (
	MaxNotFor      = 16
	maxNotForSkips = 64
)

// firstFor is the first job of lane (stream, target, req) that worker did
// not release as not for it, or nil (also after maxNotForSkips such jobs).
func (t *tables) firstFor(stream, target, req, worker string) *Job {
	if worker == "" {
		return t.firstQueued(stream, target, req)
	}
	var j *Job
	skips := 0
	from := laneStart(stream, target, req)
	t.queue.AscendGreaterOrEqual(from, func(it queueItem) bool {
		if it.lane != from.lane {
			return false
		}
		if !slices.Contains(it.j.Extra().NotFor, worker) {
			j = it.j
			return false
		}
		skips++
		return skips < maxNotForSkips
	})
	return j
}

// bestOfLane is the first job of lane (stream, target) that a claim by
// worker with the sorted capabilities caps may take, better than best (by
// rank), or best.
func (t *tables) bestOfLane(stream, target string, caps []string, worker string, best *Job) *Job {
	consider := func(j *Job) {
		if j != nil && (best == nil || queueRank(j) < queueRank(best)) {
			best = j
		}
	}
	consider(t.firstFor(stream, target, "", worker))
	if len(caps) == 0 {
		return best
	}
	t.heads.AscendGreaterOrEqual(laneStart(stream, target, ""), func(h queueItem) bool {
		hk := h.key()
		if hk.stream != stream || hk.target != target || (best != nil && queueRank(best) <= h.rank) {
			return false // past the lane, or no head from here on beats best
		}
		if !covers(caps, hk.req) {
			return true
		}
		if worker == "" || !slices.Contains(h.j.Extra().NotFor, worker) {
			consider(h.j)
			return false // the oldest head it may take
		}
		// The worker gave this head back as not for it: the lane's next
		// job it may take competes, and later heads may be older than it.
		consider(t.firstFor(stream, target, hk.req, worker))
		return true
	})
	return best
}

// seeCaps records that a worker with capability set key was heard from at
// now. The map is replaced, never changed in place: published views share
// it.
func (a *applier) seeCaps(key string, now int64) {
	if key == "" {
		return
	}
	old := a.t.capsSeen
	if at, ok := old[key]; ok && now-at < capsSeenStep {
		return
	}
	m := make(map[string]int64, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = now
	if len(m) > maxCapsSeen {
		// Forget the set heard from longest ago (ties: the smallest key).
		victim := ""
		for k, v := range m {
			if victim == "" || v < m[victim] || (v == m[victim] && k < victim) {
				victim = k
			}
		}
		delete(m, victim)
	}
	a.t.capsSeen = m
	a.t.capabilities = true
}

// CapsSeen is a capability set and when a claim with it (or a heartbeat
// of a job such a claim runs) was last applied.
type CapsSeen struct {
	Key string
	At  int64
}

func (t *tables) capsSeenList() []CapsSeen {
	out := make([]CapsSeen, 0, len(t.capsSeen))
	for k, v := range t.capsSeen {
		out = append(out, CapsSeen{k, v})
	}
	slices.SortFunc(out, func(a, b CapsSeen) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Unmatched is a requirement set of queued, claimable jobs in a stream, and
// how many there are.
type Unmatched struct {
	Requires string
	Jobs     int
}

// Unmatched lists, per stream, the requirement sets of its claimable jobs
// that no capability set seen at or after liveSince covers: jobs no live
// worker can take.
func (r *Reader) Unmatched(liveSince int64) map[string][]Unmatched {
	return r.UnmatchedFor(HeadRole, liveSince)
}

// UnmatchedFor is Unmatched of the jobs whose target a caller of role may
// see.
func (r *Reader) UnmatchedFor(role string, liveSince int64) map[string][]Unmatched {
	counts := map[string]map[string]int{} // stream → requirement key → jobs
	r.point(func(t *tables) {
		var live [][]string
		for k, at := range t.capsSeen {
			if at >= liveSince {
				live = append(live, Labels(k))
			}
		}
		t.reqs.Ascend(func(rc reqCount) bool {
			if !t.seesTarget(role, rc.target) {
				return true
			}
			for _, caps := range live {
				if covers(caps, rc.req) {
					return true
				}
			}
			if counts[rc.stream] == nil {
				counts[rc.stream] = map[string]int{}
			}
			counts[rc.stream][rc.req] += rc.n
			return true
		})
	})
	out := make(map[string][]Unmatched, len(counts))
	for s, m := range counts {
		for req, n := range m {
			out[s] = append(out[s], Unmatched{req, n})
		}
		slices.SortFunc(out[s], func(a, b Unmatched) int { return cmp.Compare(a.Requires, b.Requires) })
	}
	return out
}

// CapsSeen lists the capability sets claims were made with, and when each
// was last heard from, by key.
func (r *Reader) CapsSeen() []CapsSeen { return r.view().capsSeenList() }

// CapsSeenAt is when a claim with the capability set key was last heard
// from (0: never, or forgotten).
func (r *Reader) CapsSeenAt(key string) int64 { return r.view().capsSeen[key] }
