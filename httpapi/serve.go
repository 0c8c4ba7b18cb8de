package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/queue"
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
	// runs with call.local set on a follower and returns queue.ErrNeedLeader to
	// have the request forwarded.
	kindLocalFirst
	// kindLongPoll is a write that may wait for work (the worker claim): a
	// follower stopping gracefully ends its forwarded wait early.
	kindLongPoll
)

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
	s.router.HandleFunc(method+" "+path, s.metrics.instrument(method, path, func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, k, who, h)
	}))
	s.routeList = append(s.routeList, method+" "+path)
	if s.methods[path] == nil {
		// The path with any method, for the 405 of a method it has not.
		// (Registered in the router, a path without a method would conflict
		// with a route of one method whose path is less specific, such as
		// GET /v1/tasks/{id} with POST /v1/tasks/route.)
		s.paths.HandleFunc(path, http.NotFound)
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
		if v := r.Header.Get(api.HeaderMinIndex); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				s.writeError(w, badRequest("%s must be a raft index (an unsigned integer), got %q", api.HeaderMinIndex, v))
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
	h.Set(api.HeaderNode, s.cluster.ID())
	id, addr := s.cluster.Leader()
	if id != "" {
		h.Set(api.HeaderLeader, id)
	}
	if addr != "" {
		h.Set(api.HeaderLeaderAddr, addr)
	}
	// Every answer names an index (docs/api.md): the state this node has
	// applied, unless a read or write sets a more precise one later.
	h.Set(api.HeaderIndex, strconv.FormatUint(s.cluster.AppliedIndex(), 10))
}

// setIndex names the state an answer reflects; 0 leaves the applied index
// setLeaderHeaders named.
func (s *Server) setIndex(w http.ResponseWriter, index uint64) {
	if index == 0 {
		return
	}
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(index, 10))
}

// serveRead serves a read at the consistency the caller asked for, from
// this node's state when the service may answer here, else on the leader.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc) error {
	level := queue.ReadDefault
	q := r.URL.Query()
	if _, stale := q["stale"]; stale && q.Get("stale") != "false" && !s.staleFilters[r.Pattern] {
		level = queue.ReadStale
	} else if c.consistent {
		level = queue.ReadConsistent
	}
	// A tentative answer is held back until the service knows the read
	// lease outlived the read (queue.Service.Read).
	var held *heldResponse
	stands, err := s.queue.Read(r.Context(), level, func(index uint64, tentative bool) error {
		if tentative {
			held = newHeldResponse()
			s.setIndex(held, index)
			return h(held, r, c)
		}
		s.setIndex(w, index)
		return h(w, r, c)
	})
	if errors.Is(err, queue.ErrNotLeader) {
		return s.forwardRead(w, r, c, h)
	}
	if stands {
		return held.release(w, err)
	}
	return err // a held answer that does not stand is dropped
}

// forwardRead sends a read this node cannot answer to the leader.
func (s *Server) forwardRead(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc) error {
	if r.Header.Get(api.HeaderForwardedBy) != "" {
		return errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "forwarded read reached a node that is not the leader")
	}
	return s.forward(w, r, c, h)
}

// serveWrite runs a write on the leader, forwarding it there if this node is
// not the leader. With localFirst a follower first lets the handler try to
// answer from its own state.
func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc, localFirst bool) error {
	limit, ok := s.bodyLimits[r.Pattern]
	if !ok {
		limit = s.cfg.MaxBodyBytes
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
		if !errors.Is(err, queue.ErrNeedLeader) {
			return err
		}
	}
	if r.Header.Get(api.HeaderForwardedBy) != "" {
		// Never forward twice: the forwarding node retries with the new leader.
		return errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "forwarded write reached a node that is not the leader")
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
			if ute.Type == reflect.TypeFor[api.JobError]() {
				return badRequest("%s must be a string or {code, message, stack, retryable}", ute.Field)
			}
			return badRequest("field %q must be %s", ute.Field, ute.Type)
		}
		return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "malformed JSON body: %v", err)
	}
	return nil
}
