package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// jobReport is what a handler reports about its job (ReportProgress,
// SaveCheckpoint), reachable from its context.
type jobReport struct {
	w     *Worker
	claim *WorkerClaim
	mu    sync.Mutex
	// progress waits for the next heartbeat; nil when none does.
	progress json.RawMessage
}

type reportKey struct{}

// ErrNotAWorkerJob: ReportProgress or SaveCheckpoint was given a context
// that is not (derived from) a [Worker] handler's.
var ErrNotAWorkerJob = errors.New("client: not the context of a Worker handler")

func reportOf(ctx context.Context, v any, limit int) (*jobReport, json.RawMessage, error) {
	r, _ := ctx.Value(reportKey{}).(*jobReport)
	if r == nil {
		return nil, nil, ErrNotAWorkerJob
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	if len(raw) > limit {
		return nil, nil, fmt.Errorf("client: %d bytes of JSON, over the limit of %d", len(raw), limit)
	}
	return r, raw, nil
}

// ReportProgress records v (as JSON, at most 4 KiB), such as a percentage
// and a message, as the progress of the job whose handler ctx is; the
// Worker sends it with its next heartbeat, and the job shows it until the
// attempt ends. A later call before that heartbeat replaces it.
func ReportProgress(ctx context.Context, v any) error {
	r, raw, err := reportOf(ctx, v, 4<<10)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.progress = raw
	r.mu.Unlock()
	return nil
}

// SaveCheckpoint saves v (as JSON, at most 64 KiB) as the checkpoint of the
// job whose handler ctx is, and returns once the cluster holds it: if this
// attempt ends without completing (a crash, a fail with requeue, a lost
// lease), the next claim's WorkerClaim.Checkpoint is v, and its handler can
// resume from there instead of starting over.
func SaveCheckpoint(ctx context.Context, v any) error {
	r, raw, err := reportOf(ctx, v, 64<<10)
	if err != nil {
		return err
	}
	_, err = r.w.c.WorkerHeartbeat(ctx, &WorkerHeartbeatParams{WorkerID: r.w.cfg.WorkerID, JobID: r.claim.JobID,
		LeaseToken: r.claim.LeaseToken, Checkpoint: raw})
	return err
}
