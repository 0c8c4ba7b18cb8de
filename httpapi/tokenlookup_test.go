package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// lookupPair is a leader env serving over HTTP and a follower env of it
// whose state has applied only what the test replays into it from the
// leader's log (a follower that lags).
type lookupPair struct {
	lead, follow *env
	leader       *fakeLeader
	mu           sync.Mutex
	log          [][]byte // the leader's commands after the pair was made
}

func newLookupPair(t *testing.T) *lookupPair {
	p := &lookupPair{lead: newEnv(t, atLevel(fsm.LatestLevel)), follow: newEnv(t, atLevel(fsm.LatestLevel))}
	p.lead.fc.intercept = func(_ fsm.CommandType, cmd []byte) (any, bool) {
		p.mu.Lock()
		p.log = append(p.log, append([]byte(nil), cmd...))
		p.mu.Unlock()
		return nil, false
	}
	p.leader = newFakeLeader(t, p.lead.h.ServeHTTP)
	p.follow.fc.id = "n2"
	p.follow.fc.setFollower("n1", p.leader.URL)
	return p
}

// catchUp applies to the follower every command the leader applied since.
func (p *lookupPair) catchUp(t *testing.T) {
	p.mu.Lock()
	log := p.log
	p.log = nil
	p.mu.Unlock()
	for _, cmd := range log {
		if _, _, err := p.follow.fc.Apply(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
}

// lookups counts the whoami requests the leader saw.
func (p *lookupPair) lookups() int {
	n := 0
	for _, r := range p.leader.requests() {
		if r.URI == whoAmIPath && r.Header.Get(api.HeaderForwardedBy) == "n2" {
			n++
		}
	}
	return n
}

// A token whose create this follower has not applied yet is accepted: the
// follower asks the leader, waits until it applied as much, and looks
// again. The answer is the follower's own, from its own state.
func TestTokenLookupLaggingFollowerAccepts(t *testing.T) {
	p := newLookupPair(t)
	secret := p.lead.newToken(api.TokenCreateRequest{Name: "fresh", Role: fsm.RoleLeftClaw, WorkerID: "w1"})

	got := make(chan resp, 1)
	go func() { got <- p.follow.do("GET", "/v1/whoami", secret, nil) }()
	deadline := time.Now().Add(10 * time.Second)
	for p.lookups() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the follower never asked the leader")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-got:
		t.Fatalf("answered before this follower applied the token: %d %s", r.Code, r.Body)
	case <-time.After(50 * time.Millisecond):
	}
	p.catchUp(t)
	r := <-got
	var who api.WhoAmI
	if r.Code != http.StatusOK || json.Unmarshal(r.Body, &who) != nil || who.Token != "fresh" || who.WorkerID != "w1" {
		t.Fatalf("whoami on the follower: %d %s", r.Code, r.Body)
	}
	if r.Header.Get(api.HeaderNode) != "n2" {
		t.Errorf("answered by %q, want the follower itself", r.Header.Get(api.HeaderNode))
	}
	// Known now: no second lookup.
	p.follow.do("GET", "/v1/whoami", secret, nil)
	if n := p.lookups(); n != 1 {
		t.Errorf("the leader saw %d lookups, want 1", n)
	}
	if n := testutil.ToFloat64(p.follow.srv.metrics.tokenLookups.WithLabelValues("accepted")); n != 1 {
		t.Errorf("accepted lookups = %v, want 1", n)
	}
}

// A secret the leader does not know either is refused, as without a
// lookup; so is one revoked before this follower caught up (the follower
// answers from its own state, never from the leader's word).
func TestTokenLookupRefusals(t *testing.T) {
	p := newLookupPair(t)
	r := p.follow.do("GET", "/jobs?stale", "spt_nobody-has-this-one", nil)
	if e := r.apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized); !strings.Contains(e["message"].(string), "invalid token") {
		t.Errorf("message %v", e["message"])
	}
	if n := p.lookups(); n != 1 {
		t.Fatalf("the leader saw %d lookups, want 1", n)
	}

	secret := p.lead.newToken(api.TokenCreateRequest{Name: "short-lived", Role: fsm.RoleLeftClaw})
	p.lead.do("DELETE", "/v1/tokens/short-lived", headTok, nil)
	p.catchUp(t) // the create and the revoke
	p.follow.do("GET", "/v1/whoami", secret, nil).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	if n := testutil.ToFloat64(p.follow.srv.metrics.tokenLookups.WithLabelValues("refused")); n != 2 {
		t.Errorf("refused lookups = %v, want 2", n)
	}
}

// No lookup where none can help or where it would go round: on a request
// another node forwarded, with no leader known, on the leader itself; and
// past maxTokenLookups at once, a secret is refused without one.
func TestTokenLookupNotMade(t *testing.T) {
	p := newLookupPair(t)
	secret := p.lead.newToken(api.TokenCreateRequest{Name: "fresh", Role: RoleHead})

	p.follow.do("GET", "/v1/whoami", secret, nil, api.HeaderForwardedBy, "n3").apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	p.lead.do("GET", "/v1/whoami", "spt_unknown", nil).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	for range maxTokenLookups {
		p.follow.srv.tokenLookups.slots <- struct{}{}
	}
	p.follow.do("GET", "/v1/whoami", secret, nil).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	if n := testutil.ToFloat64(p.follow.srv.metrics.tokenLookups.WithLabelValues("busy")); n != 1 {
		t.Errorf("busy lookups = %v, want 1", n)
	}
	for range maxTokenLookups {
		<-p.follow.srv.tokenLookups.slots
	}
	p.follow.fc.setFollower("", "")
	p.follow.do("GET", "/v1/whoami", secret, nil).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	if n := p.lookups(); n != 0 {
		t.Errorf("the leader saw %d lookups, want none", n)
	}
}
