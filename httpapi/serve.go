package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/fsm"
)

// The request wrapper: every route runs through serve, which authenticates,
// reads the consistency the caller asked for, and hands reads to serveRead
// and writes to serveWrite (which forward to the leader when needed).

// kind says how a route meets consistency.
type kind int

const (
	kindPublic kind = iota // served locally, no auth
	kindRead               // read: local when allowed, else forwarded
	kindWrite              // write: on the leader, else forwarded
	// kindLocalFirst is a write whose handler may answer from this node's
	// own state when no entry is needed (a heartbeat on a fresh lease); it
	// runs with call.local set on a follower and returns errNeedLeader to
	// have the request forwarded.
	kindLocalFirst
	// kindLongPoll is a write that may wait for work (the worker claim): a
	// follower stopping gracefully ends its forwarded wait early.
	kindLongPoll
)

// errNeedLeader is returned by a kindLocalFirst handler that cannot answer
// on this follower.
var errNeedLeader = errors.New("needs the leader")

// call carries what the wrapper learned about a request.
type call struct {
	role string
	// body is the raw request body, already read (writes are buffered so a
	// forward can be retried).
	body []byte
	// longPoll is set for a kindLongPoll request.
	longPoll bool
	// local is set while a kindLocalFirst handler runs on a follower.
	local bool
	// consistent is set when the caller asked for a linearizable answer
	// (?consistent).
	consistent bool
	// minIndex is the caller's X-Spine-Min-Index (0: none).
	minIndex uint64
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

func (s *Server) route(method, path string, k kind, who allow, h handlerFunc) {
	s.router.HandleFunc(method+" "+path, func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, k, who, h)
	})
	s.routeList = append(s.routeList, method+" "+path)
	if s.methods[path] == nil {
		// The same path with any other method: 405 in the API's JSON.
		s.router.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			s.setLeaderHeaders(w)
			w.Header().Set("Allow", strings.Join(s.methods[path], ", "))
			s.writeError(w, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
		})
	}
	s.methods[path] = append(s.methods[path], method)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, k kind, who allow, h handlerFunc) {
	s.setLeaderHeaders(w)
	c := &call{}
	if k != kindPublic {
		role, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		if !who.permits(role) {
			s.writeError(w, forbidden(role, r.Method+" "+routeTemplate(r)))
			return
		}
		c.role = role
		if r.URL.RawQuery != "" {
			_, c.consistent = r.URL.Query()["consistent"]
		}
		if v := r.Header.Get(headerMinIndex); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				s.writeError(w, badRequest("%s must be a raft index (an unsigned integer), got %q", headerMinIndex, v))
				return
			}
			c.minIndex = n
		}
	}
	var err error
	switch k {
	case kindPublic:
		err = h(w, r, c)
	case kindRead:
		err = s.serveRead(w, r, c, h)
	case kindWrite, kindLocalFirst, kindLongPoll:
		c.longPoll = k == kindLongPoll
		err = s.serveWrite(w, r, c, h, k == kindLocalFirst)
	}
	if err != nil {
		if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
			// The caller went away (e.g. left a long poll): nobody to answer.
			s.logger.Debug("caller left before the answer", "path", r.URL.Path)
			return
		}
		s.writeError(w, err)
	}
}

// routeTemplate is the route's path pattern ("/jobs/{id}"), else the path.
func routeTemplate(r *http.Request) string {
	if _, p, ok := strings.Cut(r.Pattern, " "); ok {
		return p
	}
	return r.URL.Path
}

func (s *Server) setLeaderHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set(headerNode, s.cluster.ID())
	id, addr := s.cluster.Leader()
	if id != "" {
		h.Set(headerLeader, id)
	}
	if addr != "" {
		h.Set(headerLeaderURL, addr)
	}
	// Every answer names an index (docs/api.md): the state this node has
	// applied, unless a read or write sets a more precise one later.
	h.Set(headerIndex, strconv.FormatUint(s.cluster.AppliedIndex(), 10))
}

func (s *Server) setIndex(w http.ResponseWriter, index uint64) {
	w.Header().Set(headerIndex, strconv.FormatUint(index, 10))
}

// serveRead serves a read at the consistency the caller asked for.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc) error {
	q := r.URL.Query()
	if _, stale := q["stale"]; stale && q.Get("stale") != "false" {
		s.setIndex(w, s.cluster.AppliedIndex())
		return h(w, r, c)
	}
	if !s.cluster.IsLeader() {
		return s.forwardRead(w, r, c, h)
	}
	if !c.consistent {
		// A default read is answered from this node's state while it holds
		// the leader's read lease, which is checked after the read: a leader
		// paused mid-read (SIGSTOP, a stalled VM) wakes to find the lease
		// gone and answers from a quorum round instead, or sends the read
		// on to the leader that replaced it.
		held := newHeldResponse()
		s.setIndex(held, s.cluster.AppliedIndex())
		err := h(held, r, c)
		if s.cluster.StillRecent() {
			return held.release(w, err)
		}
		s.leaseMisses.Add(1)
		if !s.cluster.IsLeader() {
			return s.forwardRead(w, r, c, h)
		}
	}
	idx, err := s.cluster.ConsistentIndex(r.Context())
	if err != nil {
		return err
	}
	if err := s.cluster.WaitForApplied(r.Context(), idx); err != nil {
		return err
	}
	s.setIndex(w, s.cluster.AppliedIndex())
	return h(w, r, c)
}

// forwardRead sends a read this node cannot answer to the leader.
func (s *Server) forwardRead(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc) error {
	if r.Header.Get(forwardedHeader) != "" {
		return errorf(http.StatusServiceUnavailable, codeNoLeader, "forwarded read reached a node that is not the leader")
	}
	return s.forward(w, r, c, h)
}

// serveWrite runs a write on the leader, forwarding it there if this node is
// not the leader. With localFirst a follower first lets the handler try to
// answer from its own state.
func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc, localFirst bool) error {
	limit := s.cfg.MaxBodyBytes
	if r.URL.Path == "/blobs" {
		limit = s.cfg.MaxBlobBytes + 1<<20 // multipart framing
	}
	body, inMemory := wire.BodyBytes(r.Body) // a request from a mux or relay frame
	if inMemory && int64(len(body)) > limit {
		return &http.MaxBytesError{Limit: limit}
	}
	if !inMemory {
		var err error
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit)); err != nil {
			return err
		}
	}
	c.body = body
	if s.cluster.IsLeader() {
		return h(w, r, c)
	}
	if localFirst {
		c.local = true
		err := h(w, r, c)
		c.local = false
		if !errors.Is(err, errNeedLeader) {
			return err
		}
	}
	if r.Header.Get(forwardedHeader) != "" {
		// Never forward twice: the forwarding node retries with the new leader.
		return errorf(http.StatusServiceUnavailable, codeNoLeader, "forwarded write reached a node that is not the leader")
	}
	return s.forward(w, r, c, h)
}

// decode parses a JSON request body into v. An empty body is an empty object.
func decode(c *call, v interface{}) error {
	if len(c.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return badRequest("field %q must be %s", ute.Field, ute.Type)
		}
		return errorf(http.StatusBadRequest, codeInvalidJSON, "malformed JSON body: %v", err)
	}
	return nil
}

// apply proposes a command on the leader and returns the state machine's
// result. A refused command comes back as an error carrying the job.
func (s *Server) apply(ctx context.Context, w http.ResponseWriter, t fsm.CommandType, cmd interface{}) (*fsm.Result, error) {
	data, err := fsm.Encode(t, cmd)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxEntryBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, codeTooLarge,
			"the %s would make a %d-byte log entry; payload, result, stdout and stderr together must stay under %d bytes (upload large outputs as blobs and pass their ids)",
			t, len(data), MaxEntryBytes)
	}
	resp, index, err := s.cluster.Apply(ctx, data)
	if err != nil {
		return nil, err
	}
	if w != nil {
		s.setIndex(w, index)
	}
	res, ok := resp.(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("apply %s: unexpected response %T", t, resp)
	}
	return s.result(res)
}

// result turns the state machine's refusal into the API's error, carrying
// the job it refers to.
func (s *Server) result(res *fsm.Result) (*fsm.Result, error) {
	if res.Err != nil {
		ae := classify(res.Err)
		if res.Job != nil {
			ae.Job = viewJob(res.Job)
		}
		return res, ae
	}
	return res, nil
}
