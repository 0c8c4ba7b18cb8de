package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// Concurrent comments on one job stop at the job's limit, exactly: every
// comment past it is refused with a CommentLimitError and adds nothing,
// and every replica holds the same comments.
func TestCommentLimitHoldsUnderConcurrency(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	svc := service(leader, &clock{}, queue.Config{})
	ctx := context.Background()
	j, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(1), Actor: head})
	if err != nil {
		t.Fatal(err)
	}
	const tries = queue.MaxComments + 40
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		added, refusals int
		other           []error
	)
	for i := range tries {
		wg.Go(func() {
			_, _, err := svc.Comment(ctx, j.ID, claw, strings.Repeat("x", 1+i%7))
			var limit *queue.CommentLimitError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				added++
			case errors.As(err, &limit):
				refusals++
			default:
				other = append(other, err)
			}
		})
	}
	wg.Wait()
	if len(other) > 0 || added != queue.MaxComments || refusals != tries-queue.MaxComments {
		t.Fatalf("%d comments added, %d refused for the limit, other errors %v; want %d and %d", added, refusals, other,
			queue.MaxComments, tries-queue.MaxComments)
	}
	got, _ := leader.FSM.Read().Job(j.ID)
	if len(got.Extra().Comments) != queue.MaxComments {
		t.Fatalf("the job has %d comments, want %d", len(got.Extra().Comments), queue.MaxComments)
	}
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A job's comments stop at MaxCommentBytes of text as well: the comment
// that would pass it is refused whole, a smaller one still fits.
func TestCommentBytesLimit(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	svc := service(c.Leader(5*time.Second), &clock{}, queue.Config{})
	ctx := context.Background()
	j, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(1), Actor: head})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("y", queue.MaxTextBytes)
	for range queue.MaxCommentBytes / queue.MaxTextBytes {
		if _, _, err := svc.Comment(ctx, j.ID, claw, big); err != nil {
			t.Fatal(err)
		}
	}
	var limit *queue.CommentLimitError
	if _, _, err := svc.Comment(ctx, j.ID, claw, "one byte too many"); !errors.As(err, &limit) {
		t.Fatalf("a comment past %d bytes: %v, want a CommentLimitError", queue.MaxCommentBytes, err)
	}
	if got, _ := svc.Job(queue.RoleCaller(head.Role), j.ID); len(got.Extra().Comments) != queue.MaxCommentBytes/queue.MaxTextBytes {
		t.Fatalf("the job has %d comments after the refusal", len(got.Extra().Comments))
	}
}
