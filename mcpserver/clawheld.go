package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HeldJob is a lease the session holds.
type HeldJob struct {
	JobID                    string    `json:"job_id"`
	Stream                   string    `json:"stream"`
	WorkerID                 string    `json:"worker_id"`
	AttemptID                string    `json:"attempt_id"`
	LeaseToken               string    `json:"lease_token"`
	HeartbeatIntervalSeconds float64   `json:"heartbeat_interval_seconds"`
	ClaimedAt                time.Time `json:"claimed_at"`
}

type heldOut struct {
	WorkerID string    `json:"worker_id"`
	Jobs     []HeldJob `json:"jobs"`
}

type heldIn struct {
	WorkerID string `json:"worker_id,omitempty" jsonschema:"the worker_id of an earlier session whose jobs to take over (default: this session's)"`
}

// held lists the session's worker's running jobs from the cluster (the
// replicated state, so it survives the node that served an earlier
// session), keeps their leases in the session, and forgets the ones the
// cluster no longer lists (they ran out or were ended elsewhere). Given
// another worker id, the session becomes that worker.
func (s *server) held(ctx context.Context, _ *mcp.CallToolRequest, in heldIn) (*mcp.CallToolResult, heldOut, error) {
	worker := in.WorkerID
	if worker == "" {
		worker = s.worker()
	}
	claims, err := s.c.WorkerHeld(ctx, worker)
	if err != nil {
		return nil, heldOut{}, s.advise(err, opHeld, "")
	}
	if in.WorkerID != "" {
		s.mu.Lock()
		s.workerID = in.WorkerID
		s.mu.Unlock()
	}
	listed := map[string]bool{}
	for _, c := range claims {
		listed[c.JobID+"\x00"+c.LeaseToken] = true
		if l, ok := s.leases.get(c.JobID); ok && l.LeaseToken == c.LeaseToken {
			continue
		}
		s.leases.put(lease{JobID: c.JobID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken, WorkerID: worker, Stream: c.Stream,
			HeartbeatEvery: s.heartbeatEvery(c.HeartbeatInterval()), ClaimedAt: time.Now()})
	}
	out := heldOut{WorkerID: worker, Jobs: []HeldJob{}}
	for _, l := range s.leases.all() {
		if l.WorkerID == worker && !listed[l.JobID+"\x00"+l.LeaseToken] {
			s.leases.drop(l.JobID, l.LeaseToken)
			continue
		}
		out.Jobs = append(out.Jobs, HeldJob{JobID: l.JobID, Stream: l.Stream, WorkerID: l.WorkerID, AttemptID: l.AttemptID,
			LeaseToken: l.LeaseToken, HeartbeatIntervalSeconds: l.HeartbeatEvery.Seconds(), ClaimedAt: l.ClaimedAt})
	}
	return nil, out, nil
}
