package systemtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/client"
)

// Workers that take each next job from their complete ("next"), across a
// leader kill: every job ends done and is completed once (one completed
// event); a job whose combined answer was lost with the leader is
// redelivered when its lease runs out, never lost or run to completion
// twice.
func TestCompleteNextAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "4", "REAPER_INTERVAL_MS": "200", "SPINE_LEASE_GRACE_MS": "500"})
	leader, fs := apiRoles(t, c)
	const stream, total, workers = "next", 240, 6
	ids := apiCreateJobs(t, fs, stream, total)
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	var completes, fromNext atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		cl, err := client.New(c.URLs(), client.WithToken(apiLeft), client.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wid := fmt.Sprintf("nx-%d", w)
		wg.Go(func() {
			var held *client.WorkerClaim
			for i := 0; i < 10*total && ctx.Err() == nil; i++ {
				job := held
				held = nil
				if job == nil {
					wc, err := cl.WorkerClaim(ctx, &client.WorkerClaimParams{WorkerID: wid, Streams: []string{stream}, MaxWait: time.Second})
					if err != nil || !wc.Claimed {
						continue
					}
					job = wc
				} else {
					fromNext.Add(1)
				}
				ack, err := cl.WorkerComplete(ctx, &client.WorkerCompleteParams{WorkerID: wid, JobID: job.JobID, AttemptID: job.AttemptID,
					LeaseToken: job.LeaseToken, Result: []byte(`{"ok":true}`), Next: &client.WorkerNextParams{Streams: []string{stream}}})
				if err != nil {
					continue // the lease runs out and the job is handed out again
				}
				completes.Add(1)
				if ack.Next != nil && ack.Next.Claimed {
					held = ack.Next
				}
			}
		})
	}
	apiEventually(t, 60*time.Second, "a third of the jobs to be completed", func() error {
		if n := completes.Load(); n < total/3 {
			return fmt.Errorf("%d completed", n)
		}
		return nil
	})
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apiDoneOnce(t, nl.URL, stream, ids, 90*time.Second)
	stop()
	wg.Wait()
	if fromNext.Load() < total/2 {
		t.Fatalf("only %d of %d jobs came from a complete's next", fromNext.Load(), total)
	}
}
