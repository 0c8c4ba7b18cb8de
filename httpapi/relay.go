package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"syscall"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// The relay carries requests a follower forwards to the leader over one
// long-lived connection per leader instead of one HTTP exchange each, and the
// mux carries a client's requests to any node the same way (api/wire).
//
// A follower opens the relay with an HTTP Upgrade on the leader's own port,
// authenticated by a key both nodes derive from their token configuration.
// Nothing about a request changes on the way: the leader runs it through the
// same router, authenticates the caller's own token and answers exactly what
// it would answer over HTTP, so forwarding semantics (never twice, no_leader
// retried, outcome_unknown when an answer is lost) are those of forward.go.
// A leader that does not speak the relay (an older version during a rolling
// upgrade) gets plain HTTP forwarding, as do large bodies (blobs).
//
// A client opens the mux (GET /mux, Upgrade: spine-mux/1) with any valid
// token. Each request on it carries its own Authorization and is served by
// the same router as over HTTP, forwarded to the leader if need be.

// muxMaxInFlight bounds the requests of one client connection served at
// once; a client past it waits for answers before more of its requests are
// read (long polls included, so it is generous).
const muxMaxInFlight = 4096

// relayKey is the bearer credential of a relay upgrade: a digest of the
// node's whole token configuration, so only a node configured with the same
// tokens can open one (and no token travels in it).
func relayKey(t *Tokens) string {
	sums := make([]string, 0, len(t.entries))
	for _, e := range t.entries {
		sums = append(sums, e.role+":"+hex.EncodeToString(e.sum[:]))
	}
	sort.Strings(sums)
	h := sha256.New()
	io.WriteString(h, "spine relay key v1\n")
	for _, s := range sums {
		io.WriteString(h, s+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// handleRelay upgrades a follower's connection and serves relayed requests
// on it until either side closes it.
func (s *Server) handleRelay(w http.ResponseWriter, r *http.Request) {
	s.setLeaderHeaders(w)
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.relayKey)) != 1 {
		s.writeError(w, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "relay key does not match this node's token configuration"))
		return
	}
	s.upgrade(w, r, wire.RelayProtocol, s.relaySrv)
}

// handleMux upgrades a client's connection to the multiplexed protocol.
func (s *Server) handleMux(w http.ResponseWriter, r *http.Request) {
	s.setLeaderHeaders(w)
	if _, err := s.authenticate(r); err != nil {
		s.writeError(w, err)
		return
	}
	s.upgrade(w, r, wire.MuxProtocol, s.muxSrv)
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, protocol string, srv *wire.Server) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), protocol) {
		s.writeError(w, badRequest("%s needs Upgrade: %s", r.URL.Path, protocol))
		return
	}
	c, err := wire.Accept(w, r, protocol)
	if err != nil {
		s.logger.Debug("upgrade failed", "protocol", protocol, "error", err)
		return
	}
	go func() {
		err := srv.Serve(c)
		if err != nil && !errors.Is(err, io.EOF) && !isClosedConn(err) {
			s.logger.Debug("connection ended", "protocol", protocol, "peer", c.RemoteAddr().String(), "error", err)
		}
	}()
}

// isClosedConn reports the usual end of a connection: closed by either side.
func isClosedConn(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

// relayTo sends r (with body) to the leader at addr over the relay. A
// request read from a client's mux frame goes as that frame, with only the
// forwarded-by field set (wire.AppendForwarded), and its answer comes back
// as the leader's frame (fwdAnswer.writeTo): docs/design.md §3, "A
// client's mux request is passed through".
func (s *Server) relayTo(ctx context.Context, addr string, r *http.Request, body []byte) (fwdAnswer, error) {
	rc, err := s.relay.Get(ctx, addr, s.relayKey)
	if err != nil {
		return fwdAnswer{}, err
	}
	self := s.cluster.ID()
	if p, ok := passable(r, body); ok && !s.reencode {
		a, err := rc.RoundTripAnswer(ctx, func(b []byte) []byte {
			out, err := wire.AppendForwarded(b, p, api.HeaderForwardedBy, self)
			if err != nil { // not for a frame the mux server decoded
				return appendForwardRequest(b, r, body, self)
			}
			return out
		})
		return fwdAnswer{frame: a}, err
	}
	resp, err := rc.RoundTrip(ctx, appendForwardRequest(nil, r, body, self))
	return fwdAnswer{resp: resp}, err
}

// appendForwardRequest appends the relay frame of r, with body, as
// forwarded by node self.
func appendForwardRequest(b []byte, r *http.Request, body []byte, self string) []byte {
	h := r.Header.Clone()
	h.Set(api.HeaderForwardedBy, self)
	return wire.AppendRequest(b, r.Method, r.URL.RequestURI(), h, body)
}

// passable returns the frame r was read from when the frame, forwarded as
// it is, carries the request as re-encoding it would: its URI is the one
// re-encoding sends (not, say, an absolute URI, whose host that drops), and
// body is the frame's body (a read forwards none, whatever its frame
// carried).
func passable(r *http.Request, body []byte) ([]byte, bool) {
	p, ok := wire.RequestFrame(r.Body)
	if !ok {
		return nil, false
	}
	fb, _ := wire.BodyBytes(r.Body)
	return p, len(fb) == len(body) && r.URL.RequestURI() == r.RequestURI
}

// relayable reports whether a forwarded request goes over the relay: blob
// uploads and downloads go as their own HTTP exchanges (a frame, and so a
// blob, would be held whole in memory on both sides).
func relayable(r *http.Request, body []byte) bool {
	return wire.Carries(int64(len(body))) && !isBlobPath(r.URL.Path)
}

func isBlobPath(path string) bool { return path == "/blobs" || strings.HasPrefix(path, "/blobs/") }
