package chaos

import (
	"slices"
	"strings"
)

// fsmResult is what the state machine does with one command in a state.
type fsmResult struct {
	next          jobState
	ok            bool
	code          string
	dup           bool
	requeued, dlq bool
}

// authorized: the call holds the current lease of a running job.
func authorized(s jobState, in *linOp) bool {
	return s.Exists && s.Status == stRunning && s.Hidden == hiddenNone && in.attempt != "" && s.Attempt == in.attempt
}

// leaseFloor is the earliest a lease granted or confirmed by a call made at
// call can expire: granted (or extended) at the call at the earliest, for
// its whole length; a heartbeat answered without a write confirms a lease
// with at least 1-SPINE_LEASE_RENEW_FRACTION (at most 0.5) of it left.
func (m *jobModel) leaseFloor(call int64, whole bool) int64 {
	if whole {
		return call + m.lease - m.slack
	}
	return call + m.lease/2 - m.slack
}

// fsm applies in to s as fsm/apply.go, apply_attempt.go and apply_expire.go do.
func (m *jobModel) fsm(s jobState, in *linOp) fsmResult {
	r := fsmResult{next: s}
	refuse := func(code string) fsmResult {
		r.code = code
		return r
	}
	if in.kind == OpCreate {
		if s.Exists {
			r.ok, r.dup = true, true
			return r
		}
		r.ok = true
		r.next = jobState{Exists: true, Status: stQueued, Max: in.job.max}
		return r
	}
	if !s.Exists {
		if in.kind == OpWorkerClaim {
			return refuse(codeNothing)
		}
		return refuse(codeNotFound)
	}
	leaseRefusal := func() fsmResult {
		if s.Status != stRunning {
			return refuse(codeIllegal)
		}
		return refuse(codeStale)
	}
	n := &r.next
	switch in.kind {
	case OpGet:
		r.ok = true
	case OpClaim, OpWorkerClaim:
		if s.Status != stQueued {
			if in.kind == OpWorkerClaim {
				return refuse(codeNothing)
			}
			return refuse(codeIllegal)
		}
		if s.Attempts >= s.Max {
			n.Status = stDead
			if in.kind == OpWorkerClaim {
				return refuse(codeNothing)
			}
			return refuse(codeMaxAttempts)
		}
		n.Status, n.Attempts, n.Attempt, n.Hidden = stRunning, s.Attempts+1, in.attempt, hiddenNone
		if in.attempt == "" {
			n.Hidden = hiddenClaim
			if in.kind == OpWorkerClaim {
				n.Hidden = hiddenWorker
			}
		}
		n.Floor = m.leaseFloor(in.call, true)
		r.ok = true
	case OpHeartbeat:
		if !authorized(s, in) {
			return leaseRefusal()
		}
		n.Floor = max(s.Floor, m.leaseFloor(in.call, false))
		r.ok = true
	case OpComplete:
		if v, ok := endedGet(s.Ended, in.attempt); ok && v == "c" {
			r.ok, r.dup = true, true
			return r
		}
		if !authorized(s, in) {
			return leaseRefusal()
		}
		n.Status, n.Attempt, n.Floor = stDone, "", 0
		n.Ended = endedPut(s.Ended, in.attempt, "c")
		r.ok = true
	case OpFail:
		if v, ok := endedGet(s.Ended, in.attempt); ok && strings.HasPrefix(v, "f") && len(v) == 3 {
			r.ok, r.dup, r.requeued, r.dlq = true, true, v[1] == '1', v[2] == '1'
			return r
		}
		if !authorized(s, in) {
			return leaseRefusal()
		}
		n.Attempt, n.Floor = "", 0
		switch {
		case in.requeue && s.Attempts < s.Max:
			n.Status, r.requeued = stQueued, true
		case in.requeue:
			n.Status, r.dlq = stDead, true
		default:
			n.Status, r.dlq = stFailed, true
		}
		n.Ended = endedPut(s.Ended, in.attempt, "f"+bit(r.requeued)+bit(r.dlq))
		r.ok = true
	case OpRelease:
		if !authorized(s, in) {
			return leaseRefusal()
		}
		n.Status, n.Attempts, n.Attempt, n.Floor = stQueued, s.Attempts-1, "", 0
		r.ok = true
	case OpRedrive:
		if s.Status != stFailed && s.Status != stDead {
			return refuse(codeIllegal)
		}
		n.Status, n.Attempts = stQueued, 0
		r.ok = true
	default:
		panic("chaos: no model for operation " + string(in.kind))
	}
	return r
}

// internal returns s and the states the job may reach from it without an
// operation, before an operation that returned at ret: the reaper ending a
// lease that may have expired, a lost worker claim taking the queued job,
// the server giving back the job of a lost worker claim.
func (m *jobModel) internal(s jobState, ret int64) []jobState {
	out := []jobState{s}
	avail := m.hiddenBefore(ret)
	for i := 0; i < len(out); i++ {
		c := out[i]
		var next []jobState
		if c.Status == stRunning && ret >= c.Floor {
			n := c
			n.Attempt, n.Hidden, n.Floor = "", hiddenNone, 0
			n.Status = stQueued
			if c.Attempts >= c.Max {
				n.Status = stDead
			}
			next = append(next, n)
		}
		// A give-back right after the claim in the same gap would only use
		// up a lost claim: from the state before the gap only.
		if i == 0 && c.Status == stRunning && c.Hidden == hiddenWorker {
			n := c
			n.Status, n.Attempts, n.Attempt, n.Hidden, n.Floor = stQueued, c.Attempts-1, "", hiddenNone, 0
			next = append(next, n)
		}
		if c.Exists && c.Status == stQueued && c.Attempts < c.Max && c.Used < avail {
			n := c
			n.Status, n.Attempts, n.Attempt, n.Hidden, n.Used = stRunning, c.Attempts+1, "", hiddenWorker, c.Used+1
			// Taken no earlier than now, nor than the first lost claim's call.
			n.Floor = m.leaseFloor(max(c.Now, m.hiddenCalls[0]), true)
			next = append(next, n)
		}
		for _, n := range next {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// matchView reports whether v shows state s; a hidden lease whose attempt
// no answer has shown yet takes the id v shows.
func matchView(s jobState, v *JobView, job *linJob) (jobState, bool) {
	if !s.Exists || v.Status != s.Status || v.Attempts != s.Attempts || v.MaxAttempts != s.Max {
		return s, false
	}
	if s.Status != stRunning {
		return s, v.AttemptID == ""
	}
	if s.Hidden != hiddenNone && s.Attempt == "" {
		if v.AttemptID == "" || job.known[v.AttemptID] {
			return s, false
		}
		s.Attempt = v.AttemptID
		return s, true
	}
	return s, v.AttemptID == s.Attempt
}

// answers reports whether out is what the state machine answers (r), and
// the state after it.
func answers(in *linOp, out *linOut, r fsmResult) (jobState, bool) {
	if out.ok != r.ok {
		return r.next, false
	}
	if out.ok {
		switch in.kind {
		case OpCreate:
			if out.dup != r.dup {
				return r.next, false
			}
		case OpFail:
			if out.ack && (out.requeued != r.requeued || out.dlq != r.dlq) {
				return r.next, false
			}
		case OpWorkerClaim:
			if out.claimAttempts > 0 && (out.claimAttempts != r.next.Attempts || out.claimMax != r.next.Max) {
				return r.next, false
			}
		}
	} else {
		code := r.code
		if in.worker && code == codeIllegal {
			code = codeStale // the worker routes call every lease refusal stale (httpapi.workerRefusal)
		}
		if out.code != code {
			return r.next, false
		}
	}
	if out.view != nil {
		return matchView(r.next, out.view, in.job)
	}
	return r.next, true
}
