package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// builds is a leader whose servers support up to a level the test sets
// (as their gossip would say), and that counts the level entries it is
// asked to propose; hold, when set, keeps each level entry back until it
// is closed.
type builds struct {
	*cluster.Node
	supported atomic.Int64
	raises    atomic.Int64
	hold      chan struct{}
}

func (b *builds) MinSupportedLevel() int { return int(b.supported.Load()) }

func (b *builds) Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error) {
	if fsm.CommandType(cmd[0]) == fsm.CmdLevel {
		b.raises.Add(1)
		if b.hold != nil {
			<-b.hold
		}
	}
	return b.Node.Apply(ctx, cmd)
}

// levelService is a service on a one-node cluster at level 0 (no level
// raiser runs), whose servers support up to supported.
func levelService(t *testing.T, supported int, hold chan struct{}) (*queue.Service, *builds, *memcluster.Node) {
	t.Helper()
	c := memcluster.Start(t, memcluster.Options{Nodes: 1})
	n := c.Leader(5 * time.Second)
	b := &builds{Node: n.Raft, hold: hold}
	b.supported.Store(int64(supported))
	return queue.New(queue.Config{Now: (&clock{}).now}, b, n.FSM), b, n
}

// A fresh cluster starts at level 0 and its leader raises it right after
// its election: a request that needs a level every server supports but
// that is not in force yet is not refused; the leader raises the level
// first, then serves it.
func TestRequestOnAFreshClusterWaitsForTheLevel(t *testing.T) {
	svc, b, n := levelService(t, fsm.LatestLevel, nil)
	ctx := context.Background()
	if l := n.FSM.Peek().Level(); l != 0 {
		t.Fatalf("a fresh cluster at level %d", l)
	}
	if _, _, err := svc.PauseStream(ctx, "s", true, "", head); err != nil {
		t.Fatalf("pause on a fresh cluster: %v", err)
	}
	if l := n.FSM.Peek().Level(); l != fsm.LatestLevel {
		t.Fatalf("level %d after the request, want %d", l, fsm.LatestLevel)
	}
	if _, _, err := svc.PauseStream(ctx, "s", false, "", head); err != nil {
		t.Fatal(err)
	}
	if got := b.raises.Load(); got != 1 {
		t.Fatalf("%d level entries proposed, want 1", got)
	}
}

// Requests that arrive while a raise is under way wait for it, and
// propose no level entry of their own.
func TestRequestsWaitForTheRaiseUnderWay(t *testing.T) {
	hold := make(chan struct{})
	svc, b, n := levelService(t, fsm.LatestLevel, hold)
	ctx := context.Background()
	raised := make(chan error, 1)
	go func() {
		_, err := svc.RaiseLevel(ctx)
		raised <- err
	}()
	waitFor(t, "the raise to be proposed", func() bool { return b.raises.Load() == 1 })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := svc.SetStreamDefaults(ctx, "s", "k", 1, head)
			errs <- err
		}()
	}
	select {
	case err := <-errs:
		t.Fatalf("a request was answered (%v) before the level was in force", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a request that waited for the raise: %v", err)
		}
	}
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	if l := n.FSM.Peek().Level(); l != fsm.LatestLevel || b.raises.Load() != 1 {
		t.Fatalf("level %d after %d level entries, want %d after 1", l, b.raises.Load(), fsm.LatestLevel)
	}
}

// While a server runs a build that does not support a level, what needs
// it is refused at once (503 upgrade_in_progress on the API), nothing is
// proposed for that server to stop at, the sweeps that need it skip, and
// what older builds apply goes on as they do. Once the server is
// upgraded, the same request raises the level and succeeds.
func TestOlderServerHoldsTheLevelBack(t *testing.T) {
	svc, b, n := levelService(t, 0, nil)
	ctx := context.Background()
	start := time.Now()
	if _, _, err := svc.PauseStream(ctx, "s", true, "", head); !errors.Is(err, queue.ErrUpgradeInProgress) {
		t.Fatalf("pause with an older server: %v, want ErrUpgradeInProgress", err)
	}
	if _, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(1), Priority: 3, Actor: head}); !errors.Is(err, queue.ErrUpgradeInProgress) {
		t.Fatalf("a create with a priority: %v, want ErrUpgradeInProgress", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the refusals took %s: nothing should wait while a server lacks the level", d)
	}
	if _, created, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(2), Actor: head}); err != nil || !created {
		t.Fatalf("a plain create with an older server: %v", err)
	}
	if on, err := svc.StartFeed(ctx); on || err != nil {
		t.Fatalf("feed turned on below the level: %v %v", on, err)
	}
	if b.raises.Load() != 0 || n.FSM.Peek().Level() != 0 {
		t.Fatalf("level raised to %d (%d entries) while a server lacks it", n.FSM.Peek().Level(), b.raises.Load())
	}

	// The older server now supports level 1 but not 2: level-1 behaviour
	// works, delivery to push gateways is refused.
	b.supported.Store(fsm.LevelIdentity)
	if _, _, err := svc.PauseStream(ctx, "s", true, "", head); err != nil {
		t.Fatalf("pause at level 1: %v", err)
	}
	if l := n.FSM.Peek().Level(); l != fsm.LevelIdentity {
		t.Fatalf("level %d, want %d", l, fsm.LevelIdentity)
	}
	push := queue.GatewayInput{ID: "g", Address: "http://127.0.0.1:1", Capacity: 1, Delivery: fsm.DeliveryPush, Role: "left_claw", Actor: head}
	if _, _, err := svc.RegisterGateway(ctx, push); !errors.Is(err, queue.ErrUpgradeInProgress) {
		t.Fatalf("push gateway below the delivery level: %v", err)
	}
	b.supported.Store(fsm.LevelDelivery)
	if _, _, err := svc.RegisterGateway(ctx, push); err != nil {
		t.Fatalf("push gateway once every server supports delivery: %v", err)
	}
	if l := n.FSM.Peek().Level(); l != fsm.LevelDelivery {
		t.Fatalf("level %d, want %d", l, fsm.LevelDelivery)
	}
}

// The leader's raiser raises the level as soon as it starts (not a tick
// later), to the most every server supports, and ends at this build's
// latest.
func TestLevelRaiserRaisesAtOnce(t *testing.T) {
	svc, b, n := levelService(t, fsm.LevelIdentity, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		svc.LevelRaiser(time.Hour)(ctx)
		close(done)
	}()
	waitFor(t, "level 1", func() bool { return n.FSM.Peek().Level() == fsm.LevelIdentity })
	b.supported.Store(fsm.LatestLevel)
	// The hour-long tick would come too late: a request that needs the
	// level raises it.
	push := queue.GatewayInput{ID: "g", Address: "http://127.0.0.1:1", Capacity: 1, Delivery: fsm.DeliveryPush, Role: "left_claw", Actor: head}
	if _, _, err := svc.RegisterGateway(ctx, push); err != nil {
		t.Fatal(err)
	}
	if l := n.FSM.Peek().Level(); l != fsm.LatestLevel {
		t.Fatalf("level %d, want %d", l, fsm.LatestLevel)
	}
	cancel()
	<-done

	// A new leader's raiser, at the latest level, ends at once.
	over := make(chan struct{})
	go func() {
		svc.LevelRaiser(time.Hour)(context.Background())
		close(over)
	}()
	select {
	case <-over:
	case <-time.After(5 * time.Second):
		t.Fatal("the raiser goes on at the latest level")
	}
}
