package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// ack is one acknowledged create: when its call started and when the answer
// arrived, and whether the probe made it.
type ack struct {
	start, end time.Time
	probe      bool
}

// recorder collects everything the load goroutines saw acknowledged.
type recorder struct {
	mu sync.Mutex
	// created: acknowledged job id → true; probe marks probe jobs.
	created map[string]bool
	probe   map[string]bool
	// keyToID catches an idempotency key answered with two different jobs.
	keyToID    map[string]string
	keyClashes []string
	acks       []ack // every acknowledged create, in answer order
	createErrs int   // producer create calls that gave up (retried with the same key)
	probeErrs  int   // failed probe tries (the probe does its own retries)
	duplicates int   // creates answered as a duplicate of an earlier try

	// completed: job id → attempt ids whose complete was acknowledged.
	completed    map[string]map[string]bool
	claims       int            // claims answered
	claimsByJob  map[string]int // job id → claims this drill's workers got
	claimErrs    int            // claim calls that failed (the claim may have landed)
	completeErrs map[string]int // job id → failed complete calls
	staleRefused int            // completes refused as stale (the lease had been reaped)
}

func newRecorder() *recorder {
	return &recorder{
		created: map[string]bool{}, probe: map[string]bool{}, keyToID: map[string]string{},
		completed: map[string]map[string]bool{}, claimsByJob: map[string]int{}, completeErrs: map[string]int{},
	}
}

func (r *recorder) created1(key string, j *client.Job, probe bool, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := time.Now() // under the lock: acks stay in answer order
	if prev, ok := r.keyToID[key]; ok && prev != j.ID {
		r.keyClashes = append(r.keyClashes, fmt.Sprintf("key %s answered job %s then %s", key, prev, j.ID))
	}
	r.keyToID[key] = j.ID
	r.created[j.ID] = true
	if probe {
		r.probe[j.ID] = true
	}
	if j.Duplicate {
		r.duplicates++
	}
	r.acks = append(r.acks, ack{start, end, probe})
}

// firstProbeAckAfter returns the answer time of the earliest-answered probe
// create whose call started at or after t.
func (r *recorder) firstProbeAckAfter(t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best time.Time
	found := false
	// acks are appended in answer order: scan back to the first one sent
	// after t; sending after t also means answering after t.
	for i := len(r.acks) - 1; i >= 0; i-- {
		a := r.acks[i]
		if a.end.Before(t) {
			break
		}
		if a.probe && !a.start.Before(t) && (!found || a.end.Before(best)) {
			best, found = a.end, true
		}
	}
	return best, found
}

// producerGap is the hole in the producers' acknowledgements around t: from
// the last answer before t to the first one after it. It includes the
// client's own retry waits (backoff, Retry-After).
func (r *recorder) producerGap(t time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var before, after time.Time
	for _, a := range r.acks {
		if a.probe {
			continue
		}
		if !a.end.After(t) {
			before = a.end
		} else {
			after = a.end
			break
		}
	}
	if before.IsZero() || after.IsZero() {
		return 0, false
	}
	return after.Sub(before), true
}

func (r *recorder) ackCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks)
}

// doubles lists the jobs acknowledged complete for more than one attempt.
func (r *recorder) doubles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, atts := range r.completed {
		if len(atts) > 1 {
			ids := make([]string, 0, len(atts))
			for a := range atts {
				ids = append(ids, a)
			}
			sort.Strings(ids)
			out = append(out, fmt.Sprintf("job %s completed for attempts %v", id, ids))
		}
	}
	sort.Strings(out)
	return out
}

// clients is the drill's set of Spine clients, all seeded with every node.
type clients struct {
	addrs []string
	log   *slog.Logger // nil: none
}

func (cs clients) opts(token string, timeout time.Duration, p client.RetryPolicy, name string) []client.Option {
	o := []client.Option{client.WithToken(token), client.WithTimeout(timeout), client.WithRetry(p)}
	if cs.log != nil {
		o = append(o, client.WithLogger(cs.log.With("client", name)))
	}
	return o
}

func (cs clients) head(name string, timeout time.Duration, p client.RetryPolicy) *client.Client {
	c, err := client.New(cs.addrs, cs.opts(testcluster.HeadToken, timeout, p, name)...)
	if err != nil {
		panic(err) // addrs come from the harness: cannot be bad
	}
	return c
}

func (cs clients) claw(i int, timeout time.Duration, p client.RetryPolicy) *client.Client {
	tok := testcluster.LeftToken
	if i%2 == 1 {
		tok = testcluster.RightToken
	}
	c, err := client.New(cs.addrs, cs.opts(tok, timeout, p, fmt.Sprintf("worker%d", i))...)
	if err != nil {
		panic(err)
	}
	return c
}

// loadRetry rides out an election quickly: short waits, bounded per call.
var loadRetry = client.RetryPolicy{MaxAttempts: 100, BaseDelay: 20 * time.Millisecond,
	MaxDelay: 250 * time.Millisecond, MaxElapsed: 10 * time.Second}

// probeRetry makes one try per call: the probe loops itself, every
// ProbeInterval, so that it sees the cluster accept writes again as soon as
// it does (the client's own retries honour Retry-After, a whole second).
var probeRetry = client.RetryPolicy{MaxAttempts: 1}

// producer creates jobs until ctx ends, each with its own idempotency key;
// a create that gives up is retried with the same key after retryPause.
func producer(ctx context.Context, c *client.Client, rec *recorder, id int, interval, retryPause time.Duration, probe bool) {
	kind := "load"
	if probe {
		kind = "probe"
	}
	for n := 0; ctx.Err() == nil; n++ {
		key := uuid.NewString()
		payload, _ := json.Marshal(map[string]any{"kind": kind, "producer": id, "n": n})
		for ctx.Err() == nil {
			start := time.Now()
			j, err := c.JobCreate(ctx, &client.JobCreateParams{Payload: payload, IdempotencyKey: key})
			if err == nil {
				rec.created1(key, j, probe, start)
				break
			}
			if ctx.Err() != nil {
				return
			}
			rec.mu.Lock()
			if probe {
				rec.probeErrs++
			} else {
				rec.createErrs++
			}
			rec.mu.Unlock()
			testcluster.SleepCtx(ctx, retryPause)
		}
		testcluster.SleepCtx(ctx, interval)
	}
}

// worker runs the worker contract v1 by hand (claim, then complete with the
// lease token and attempt id), recording every acknowledged complete.
func worker(ctx context.Context, c *client.Client, rec *recorder, id int) {
	wid := fmt.Sprintf("drill-w%d", id)
	fails := 0
	for ctx.Err() == nil {
		cl, err := c.WorkerClaim(ctx, &client.WorkerClaimParams{WorkerID: wid, MaxWait: 500 * time.Millisecond})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			rec.mu.Lock()
			rec.claimErrs++
			rec.mu.Unlock()
			fails++
			testcluster.SleepCtx(ctx, min(time.Duration(fails)*20*time.Millisecond, 300*time.Millisecond))
			continue
		}
		fails = 0
		if !cl.Claimed {
			continue
		}
		rec.mu.Lock()
		rec.claims++
		rec.claimsByJob[cl.JobID]++
		rec.mu.Unlock()
		// Report even if the drain is stopping: the job is ours until then.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		a, err := c.WorkerComplete(cctx, &client.WorkerCompleteParams{
			WorkerID: wid, JobID: cl.JobID, AttemptID: cl.AttemptID, LeaseToken: cl.LeaseToken,
			Stream: cl.Stream, MessageID: cl.MessageID, Result: json.RawMessage(`{"ok":true}`),
		})
		cancel()
		rec.mu.Lock()
		switch {
		case err == nil && a.OK:
			if rec.completed[cl.JobID] == nil {
				rec.completed[cl.JobID] = map[string]bool{}
			}
			rec.completed[cl.JobID][cl.AttemptID] = true
		case errors.Is(err, client.ErrStaleLease):
			rec.staleRefused++
			rec.completeErrs[cl.JobID]++
		default:
			rec.completeErrs[cl.JobID]++
		}
		rec.mu.Unlock()
	}
}
