package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// A leader stopped gracefully (SIGTERM, as in a rolling restart) while Go
// clients create, long-poll and complete over their multiplexed connections
// costs them no error at all: its parked long polls answer claimed:false,
// the requests it read are answered, the ones it did not read fail as not
// sent and the client sends them to the next leader. Every job is done
// exactly once.
func TestGracefulLeaderStopCostsClientsNothing(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, _ := apiRoles(t, c)
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.URL)
	}
	newClient := func(token string) *client.Client {
		cl, err := client.New(addrs, client.WithToken(token), client.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	head, claws := newClient(testcluster.HeadToken), newClient(testcluster.LeftToken)
	stream := wName("drain")
	const jobs, workers, stopAt = 150, 6, 50
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var errMu sync.Mutex
	var errs []string
	fail := func(format string, args ...interface{}) {
		errMu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		errMu.Unlock()
	}
	var completed sync.Map // job id -> worker
	var doneCount atomic.Int64
	// Workers long-poll as the Go Worker does (20 s); wctx ends their last poll.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(worker string) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cl, err := claws.WorkerClaim(wctx, &client.WorkerClaimParams{WorkerID: worker, Streams: []string{stream}, MaxWait: 20 * time.Second})
				if err != nil {
					if wctx.Err() == nil {
						fail("%s claim: %v", worker, err)
					}
					return
				}
				if !cl.Claimed {
					continue
				}
				if _, err := claws.WorkerComplete(ctx, &client.WorkerCompleteParams{WorkerID: worker, JobID: cl.JobID,
					AttemptID: cl.AttemptID, LeaseToken: cl.LeaseToken, Stream: cl.Stream, MessageID: cl.MessageID,
					Result: json.RawMessage(`"ok"`)}); err != nil {
					fail("%s complete %s: %v", worker, cl.JobID, err)
					continue
				}
				if prev, dup := completed.LoadOrStore(cl.JobID, worker); dup {
					fail("job %s completed by %s and %s", cl.JobID, prev, worker)
				}
				doneCount.Add(1)
			}
		}(fmt.Sprintf("w%d", i))
	}

	ids := map[string]bool{}
	for k := 0; k < jobs; k++ {
		if k == stopAt {
			if err := c.Terminate(leader); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped leader %s gracefully after %d creates", leader.ID, k)
		}
		j, err := head.JobCreate(ctx, &client.JobCreateParams{Payload: json.RawMessage(fmt.Sprint(k)), Stream: stream,
			IdempotencyKey: fmt.Sprintf("%s-%d", stream, k)})
		if err != nil {
			fail("create %d: %v", k, err)
			continue
		}
		ids[j.ID] = true
	}
	err := testcluster.Eventually(45*time.Second, 100*time.Millisecond, func() error {
		if n := doneCount.Load(); n < int64(len(ids)) {
			return fmt.Errorf("%d of %d jobs completed", n, len(ids))
		}
		return nil
	})
	close(stop)
	wcancel()
	wg.Wait()
	if err != nil {
		t.Error(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
	if len(ids) != jobs {
		t.Fatalf("%d jobs created, want %d", len(ids), jobs)
	}
	var live string
	for _, n := range c.Nodes {
		if n.Running() {
			live = n.URL
		}
	}
	for id := range ids {
		if _, ok := completed.Load(id); !ok {
			t.Errorf("job %s never completed", id)
			continue
		}
		var evs struct {
			Events []wEvent `json:"events"`
		}
		wGetRetrying(t, live, "/jobs/"+id+"/events", &evs)
		if n := wCountEvents(evs.Events, "completed"); n != 1 {
			t.Errorf("job %s: %d completed events, want 1", id, n)
		}
	}
}
