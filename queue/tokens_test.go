package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// A named token on a real three-node cluster: created on the leader (the
// state holds its hash alone), it authenticates on a follower; a call it
// holds open there ends once the follower applied its revoke, and another
// ends at the token's expiry.
func TestTokenHeldCallsEndOnRevokeAndExpiry(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	var follower *memcluster.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	cl := &clock{}
	lsvc := service(leader, cl, queue.Config{})
	fsvc := service(follower, cl, queue.Config{})
	ctx := context.Background()

	secret, tk, idx, err := lsvc.CreateToken(ctx, queue.TokenInput{Name: "agent", Role: fsm.RoleLeftClaw, Streams: []string{"s"}}, head)
	if err != nil || tk.Hash != queue.TokenHash(secret) || tk.Hash == secret {
		t.Fatalf("create: %v %+v", err, tk)
	}
	short, _, _, err := lsvc.CreateToken(ctx, queue.TokenInput{Name: "short", Role: fsm.RoleLeftClaw,
		ExpiresAt: cl.now().Add(200 * time.Millisecond).UnixNano()}, head)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower to apply the creates", func() bool { return follower.FSM.AppliedIndex() >= idx+1 })
	caller, err := fsvc.TokenCaller(secret)
	if err != nil || caller.Token != "agent" || caller.Role != fsm.RoleLeftClaw || !caller.Scoped() {
		t.Fatalf("authenticate on the follower: %v %+v", err, caller)
	}
	if _, err := fsvc.TokenCaller("spt_not-a-secret"); !errors.Is(err, queue.ErrTokenRefused) {
		t.Fatalf("a wrong secret: %v", err)
	}
	held, release := fsvc.Hold(ctx, caller)
	defer release()
	shortCaller, err := fsvc.TokenCaller(short)
	if err != nil {
		t.Fatal(err)
	}
	heldShort, releaseShort := fsvc.Hold(ctx, shortCaller)
	defer releaseShort()

	// Expiry: the node's clock passes it.
	cl.add(time.Second)
	select {
	case <-heldShort.Done():
		if !errors.Is(context.Cause(heldShort), queue.ErrTokenRevoked) {
			t.Fatalf("cause %v", context.Cause(heldShort))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the expired token's call did not end")
	}
	if _, err := fsvc.TokenCaller(short); !errors.Is(err, queue.ErrTokenRefused) {
		t.Fatalf("an expired token: %v", err)
	}
	if held.Err() != nil {
		t.Fatal("the other token's call ended too")
	}

	// Revoke: the follower ends the call once it applied the entry.
	if _, _, err := lsvc.RevokeToken(ctx, "agent", head); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked token's call did not end on the follower")
	}
	if _, err := fsvc.TokenCaller(secret); !errors.Is(err, queue.ErrTokenRefused) {
		t.Fatalf("a revoked token: %v", err)
	}
	// A write carrying the revoked token is refused before it is proposed.
	if _, _, _, err := lsvc.Create(ctx, queue.CreateInput{Payload: payload(1), Stream: ptr("s"), Actor: fsm.Actor{Role: fsm.HeadRole, Token: "agent"}}); !errors.Is(err, queue.ErrTokenRefused) {
		t.Fatalf("a write with a revoked token: %v", err)
	}
}
