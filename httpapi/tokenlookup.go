package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/queue"
)

// A named token is accepted from the state a node applied. The leader
// answers a token's create once a quorum has it, and a follower outside
// that quorum (one catching up, one that just joined) may not have applied
// it yet: the token is listed (a list is the leader's answer) but this
// node would refuse it. So a follower that does not know a secret asks the
// leader who it is (GET /v1/whoami, forwarded with the caller's own
// Authorization); if the leader knows it, the follower waits until it has
// applied as much as the leader had, and looks again. A token thus works
// on every node from the moment its create is answered.
//
// What a lookup costs is bounded: callers of the same secret share one
// lookup, at most maxTokenLookups secrets are looked up at once (past it,
// an unknown secret is refused at once, as it would be without lookups),
// and one lasts at most tokenLookupWait. The leader never looks up (its
// state has every token it answered a create of), nor does a node serving
// a request another node forwarded.
const (
	maxTokenLookups = 16
	tokenLookupWait = 5 * time.Second
)

// tokenLookups is a node's state of lookups in flight.
type tokenLookups struct {
	slots  chan struct{}
	flight singleflight.Group
}

func newTokenLookups() *tokenLookups {
	return &tokenLookups{slots: make(chan struct{}, maxTokenLookups)}
}

// namedCaller is the caller a named token's secret makes: from this node's
// applied state, or, for a secret it does not know, once it caught up with
// a leader that does.
func (s *Server) namedCaller(r *http.Request, secret string) (queue.Caller, error) {
	c, err := s.queue.TokenCaller(secret)
	if !errors.Is(err, queue.ErrTokenUnknown) || r.Header.Get(api.HeaderForwardedBy) != "" || s.cluster.IsLeader() {
		return c, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), tokenLookupWait)
	defer cancel()
	v, _, _ := s.tokenLookups.flight.Do(queue.TokenHash(secret), func() (any, error) {
		select {
		case s.tokenLookups.slots <- struct{}{}:
			defer func() { <-s.tokenLookups.slots }()
		default:
			return lookupBusy, nil
		}
		// Its callers share it: the first one leaving does not end it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenLookupWait)
		defer cancel()
		return s.leaderIndexFor(lctx, secret), nil
	})
	idx, _ := v.(uint64)
	switch idx {
	case lookupBusy:
		s.metrics.tokenLookups.WithLabelValues("busy").Inc()
		return c, err
	case 0:
		s.metrics.tokenLookups.WithLabelValues("refused").Inc()
		return c, err
	}
	c, err = s.queue.TokenCallerAfter(ctx, secret, idx)
	if err != nil {
		s.metrics.tokenLookups.WithLabelValues("refused").Inc()
	} else {
		s.metrics.tokenLookups.WithLabelValues("accepted").Inc()
	}
	return c, err
}

// lookupBusy is a lookup not made: maxTokenLookups were under way.
const lookupBusy = ^uint64(0)

// leaderIndexFor asks the leader who secret makes: the index of the
// leader's state when it accepted the secret, or 0 when it did not (or
// there is no leader to ask, or it did not answer).
func (s *Server) leaderIndexFor(ctx context.Context, secret string) uint64 {
	id, addr := s.cluster.Leader()
	if id == "" || addr == "" || id == s.cluster.ID() {
		return 0
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, whoAmIPath, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	ans, err := s.sendToLeader(ctx, req, &call{}, addr)
	if err != nil {
		return 0
	}
	defer ans.close()
	resp := ans.resp
	if resp == nil {
		resp = ans.frame.Response()
	}
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	idx, err := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	if err != nil {
		return 0
	}
	return idx
}
