package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// The leader's health monitor on a real cluster: silence makes a worker
// suspect, then dead; a heartbeat brings it back; only changes are
// written (no entry while nothing changes); a new leader neither revives
// the dead nor condemns anyone for silence it did not watch.
func TestHealthMonitor(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := svc.RegisterGateway(ctx, queue.GatewayInput{ID: "g1", Address: "http://g1", Capacity: 2, Actor: head}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.RegisterWorker(ctx, queue.WorkerInput{ID: "w1", Gateway: "g1", Capacity: 1, Actor: head}); err != nil {
		t.Fatal(err)
	}
	// g1 marked suspect although it has just registered: the monitor's
	// first look brings it back (and shows the monitor is running).
	if _, _, err := c.Apply(fsm.CmdHealthSet, &fsm.HealthSetCommand{Changes: []fsm.HealthChange{{Gateway: true, ID: "g1", Health: fsm.HealthSuspect}}}); err != nil {
		t.Fatal(err)
	}
	cfg := queue.HealthConfig{SuspectAfter: 10 * time.Second, DeadAfter: 30 * time.Second, Interval: 5 * time.Millisecond}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { svc.HealthMonitor(cfg)(mctx); close(done) }()
	health := func(n *memcluster.Node, worker bool) string {
		if worker {
			return n.FSM.Read().Worker("w1").Health
		}
		return n.FSM.Read().Gateway("g1").Health
	}
	waitHealth := func(worker bool, want string) {
		t.Helper()
		waitFor(t, "health "+want, func() bool { return health(leader, worker) == want })
	}
	beat := func() {
		if _, err := svc.GatewayHeartbeat("g1"); err != nil {
			t.Fatal(err)
		}
	}
	waitHealth(false, fsm.HealthHealthy)
	cl.add(8 * time.Second)
	beat()
	cl.add(4 * time.Second) // w1 silent 12 s, g1 4 s
	waitHealth(true, fsm.HealthSuspect)
	if health(leader, false) != fsm.HealthHealthy {
		t.Fatal("the gateway that beat went suspect")
	}
	// Nothing changes: nothing is written.
	idx := leader.FSM.AppliedIndex()
	time.Sleep(50 * time.Millisecond) // ten monitor ticks
	if got := leader.FSM.AppliedIndex(); got != idx {
		t.Fatalf("the monitor wrote %d entries with no change of health", got-idx)
	}
	cl.add(20 * time.Second) // w1 silent 32 s, g1 24 s
	waitHealth(true, fsm.HealthDead)
	waitHealth(false, fsm.HealthSuspect)
	if _, err := svc.WorkerHeartbeat(fsm.Actor{Role: fsm.HeadRole}, "w1"); err != nil {
		t.Fatal(err)
	}
	waitHealth(true, fsm.HealthHealthy)
	if _, err := svc.WorkerHeartbeat(fsm.Actor{Role: fsm.HeadRole}, "nope"); err == nil {
		t.Fatal("a heartbeat of an unknown worker was taken")
	}
	stop()
	<-done

	// A new leader, much later: g1 (suspect) and w1 (healthy, beat 0 s
	// ago) keep their health until the new leader has watched the silence.
	c.Stop(leader)
	next := c.Leader(10 * time.Second)
	svc2 := service(next, cl, queue.Config{})
	cl.add(time.Hour)
	// A gateway registered now, marked dead: the new monitor's first look
	// brings it back, which shows it is running.
	if _, _, err := svc2.RegisterGateway(ctx, queue.GatewayInput{ID: "g2", Address: "http://g2", Capacity: 1, Actor: head}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Apply(fsm.CmdHealthSet, &fsm.HealthSetCommand{Changes: []fsm.HealthChange{{Gateway: true, ID: "g2", Health: fsm.HealthDead}}}); err != nil {
		t.Fatal(err)
	}
	go svc2.HealthMonitor(cfg)(ctx)
	waitFor(t, "the new leader's monitor to revive g2", func() bool { return next.FSM.Read().Gateway("g2").Health == fsm.HealthHealthy })
	if g, w := health(next, false), health(next, true); g != fsm.HealthSuspect || w != fsm.HealthHealthy {
		t.Fatalf("a leader change turned g1 %s and w1 %s", g, w)
	}
	cl.add(31 * time.Second)
	waitFor(t, "all dead under the new leader", func() bool {
		return health(next, false) == fsm.HealthDead && health(next, true) == fsm.HealthDead &&
			next.FSM.Read().Gateway("g2").Health == fsm.HealthDead
	})
	c.Restart(leader)
	if err := c.CheckConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}
