package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// A runAt outside what the API documents (before 1970, past the
// scheduling horizon, past what nanoseconds since 1970 hold) is refused,
// and creates nothing.
func TestRunAtRange(t *testing.T) {
	for _, in := range []string{"2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1600-01-01T00:00:00Z", "1969-12-31T23:59:59Z"} {
		at, _ := time.Parse(time.RFC3339, in)
		if _, err := queue.RunAtNanos(at); err == nil || !strings.Contains(err.Error(), "runAt must be between 1970-01-01T00:00:00Z and 365 days from now") {
			t.Errorf("runAt %s: %v", in, err)
		}
	}
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{})
	ctx := context.Background()
	before := leader.Raft.AppliedIndex()
	far := cl.now().Add(366 * 24 * time.Hour).UnixNano()
	if _, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(1), RunAt: far, Actor: head}); err == nil ||
		!strings.Contains(err.Error(), "365 days from now") {
		t.Fatalf("runAt 366 days ahead: %v", err)
	}
	if after := leader.Raft.AppliedIndex(); after != before {
		t.Fatalf("a refused create wrote %d entries", after-before)
	}
	// A past runAt (from 1970 on) means now.
	past, _ := queue.RunAtNanos(time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC))
	j, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(1), RunAt: past, Actor: head})
	if err != nil || j.NotBefore != 0 || j.State != fsm.StateQueued {
		t.Fatalf("runAt in 1970: %v %+v, want a job claimable now", err, j)
	}
}
