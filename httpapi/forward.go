package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// newForwardClient is the client a follower forwards requests to the
// leader with; tc (nil: none) is the nodes' TLS configuration, for https
// URLs.
func newForwardClient(tc *tls.Config) *http.Client {
	if tc != nil {
		tc = tc.Clone()
	}
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:     tc,
			TLSHandshakeTimeout: 2 * time.Second,
			DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   false,
		},
		// Never follow redirects: the leader's answer goes back as it is.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// hopHeaders are not copied between the caller and the leader.
var hopHeaders = wire.HopHeaders

// forward sends the request to the leader with the caller's credentials and
// copies the answer back. While there is no reachable leader it waits, up to
// LeaderHold, for one (handling the request itself if this node is elected).
// A request that may have reached the leader is never sent twice: if its
// answer is lost the caller gets outcome_unknown.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc) error {
	ctx := r.Context()
	if c.longPoll {
		// This node stopping gracefully ends a forwarded long poll: the
		// leader is told to cancel it (as when a caller leaves, a claim that
		// commits meanwhile is given back there), and the caller is told no
		// job was claimed, so it polls again elsewhere instead of holding
		// this node's drain and being cut off with no answer.
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(s.draining, stop)()
	}
	drained := func() bool { return c.longPoll && s.draining.Err() != nil && r.Context().Err() == nil }
	// The hold is made when the first wait begins (most forwards never
	// wait), with the deadline it has from the start.
	holdUntil := time.Now().Add(s.cfg.LeaderHold)
	var hold context.Context
	for {
		if s.cluster.IsLeader() {
			s.setLeaderHeaders(w)
			return h(w, r, c)
		}
		if drained() {
			// No job was claimed for the caller (a claim that committed on
			// the leader as it was cancelled is given back there).
			emptyLongPoll(w, r)
			return nil
		}
		id, addr := s.cluster.Leader()
		if id != "" && addr != "" && id != s.cluster.ID() {
			s.metrics.forwarded.Inc()
			ans, err := s.sendToLeader(ctx, r, c, addr)
			if err != nil && drained() {
				continue // answered above
			}
			if err == nil && !ans.refusedUnapplied() {
				ans.writeTo(w, s.cluster.ID())
				return nil
			}
			switch {
			case err == nil:
				// The node had just lost leadership and did nothing with the
				// request (no_leader): send it again to the next leader.
				ans.close()
				s.logger.Debug("forward target is no longer the leader, waiting for a new one", "target", id)
			case !notSent(err):
				if r.Method == http.MethodGet {
					return errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "leader %s did not answer: %v", id, err)
				}
				return errorf(http.StatusServiceUnavailable, api.CodeOutcomeUnknown,
					"forwarded to leader %s, but its answer was lost (%v); the write may or may not have happened", id, err)
			default:
				s.logger.Debug("leader unreachable, waiting for a new one", "leader", id, "error", err)
			}
		}
		if hold == nil {
			var cancel context.CancelFunc
			hold, cancel = context.WithDeadline(ctx, holdUntil)
			defer cancel()
		}
		select {
		case <-s.cluster.LeaderCh():
		case <-time.After(100 * time.Millisecond):
		case <-hold.Done():
			if drained() {
				continue // answered above
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &apiError{Status: http.StatusServiceUnavailable, Code: api.CodeNoLeader,
				Message: "no leader is available (election in progress or quorum lost); retry shortly", Leader: addr}
		}
	}
}

func (s *Server) sendToLeader(ctx context.Context, r *http.Request, c *call, addr string) (fwdAnswer, error) {
	if !s.cfg.DisableRelay && relayable(r, c.body) {
		ans, err := s.relayTo(ctx, addr, r, c.body)
		if !errors.Is(err, wire.ErrUnsupported) {
			return ans, err
		}
	}
	u := addr + r.URL.RequestURI()
	out, err := http.NewRequestWithContext(ctx, r.Method, u, bytes.NewReader(c.body))
	if err != nil {
		return fwdAnswer{}, err
	}
	for k, vs := range r.Header {
		if !hopHeaders[k] {
			out.Header[k] = vs
		}
	}
	out.Header.Set(api.HeaderForwardedBy, s.cluster.ID())
	out.ContentLength = int64(len(c.body))
	resp, err := s.fwd.Do(out)
	return fwdAnswer{resp: resp}, err
}

// fwdAnswer is the leader's answer to a forwarded request: an HTTP
// response, or (resp nil) a relay answer frame as it arrived.
type fwdAnswer struct {
	resp  *http.Response
	frame wire.Answer
}

// refusedUnapplied reports whether the answer is a 503 no_leader: the node
// did not take the request (it was no longer the leader, or had none), so
// sending it elsewhere cannot apply it twice. The body stays readable.
func (a fwdAnswer) refusedUnapplied() bool {
	var b []byte
	if a.resp != nil {
		if a.resp.StatusCode != http.StatusServiceUnavailable {
			return false
		}
		b, _ = io.ReadAll(io.LimitReader(a.resp.Body, 64<<10))
		a.resp.Body.Close()
		a.resp.Body = io.NopCloser(bytes.NewReader(b))
	} else {
		if a.frame.Status != http.StatusServiceUnavailable {
			return false
		}
		b = a.frame.Body[:min(len(a.frame.Body), 64<<10)]
	}
	var eb api.ErrorBody
	return json.Unmarshal(b, &eb) == nil && eb.Error.Code == api.CodeNoLeader
}

func (a fwdAnswer) close() {
	if a.resp != nil {
		a.resp.Body.Close()
	}
}

// writeTo answers the caller with the leader's answer (copyAnswer). A
// relay answer to a client's mux request becomes the client's answer frame
// as it is, with this node's X-Spine-Node (wire.AnswerPasser): the same
// answer, without building a response or header map for it.
func (a fwdAnswer) writeTo(w http.ResponseWriter, self string) {
	if a.resp != nil {
		defer a.resp.Body.Close()
		copyAnswer(w, a.resp, self)
		return
	}
	if sr, ok := w.(*statusRecorder); ok {
		if p, ok := sr.ResponseWriter.(wire.AnswerPasser); ok {
			h := sr.Header()
			if v := h[api.HeaderNode]; len(v) != 1 || v[0] != self {
				h.Set(api.HeaderNode, self)
			}
			sr.WriteHeader(a.frame.Status)
			p.PassAnswer(a.frame, api.HeaderNode)
			return
		}
	}
	copyAnswer(w, a.frame.Response(), self)
}

// notSent reports whether err proves the request never reached the leader,
// so sending it again cannot apply it twice.
func notSent(err error) bool {
	if errors.Is(err, wire.ErrNotSent) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return false
}

func copyAnswer(w http.ResponseWriter, resp *http.Response, self string) {
	h := w.Header()
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			h[k] = vs
		}
	}
	// The caller talked to this node, not the leader.
	h.Set(api.HeaderNode, self)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// emptyLongPoll answers a long poll that found nothing: the worker
// contract's {"claimed":false}, or 204 for the developer queue's claim and
// peek.
func emptyLongPoll(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/internal/worker/claim" {
		writeJSON(w, http.StatusOK, api.WorkerClaim{Claimed: false})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
