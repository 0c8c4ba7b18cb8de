package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/strictjson"
	"github.com/spine-queue/spine/queue"
)

// The request wrapper: every route runs through serve, which authenticates,
// reads the consistency the caller asked for, and hands reads to serveRead
// and writes to serveWrite (which forward to the leader when needed).

// kind says how a route meets consistency.
type kind int

const (
	kindLocal kind = iota // served by the node it reaches, from its own state
	kindRead              // read: local when allowed, else forwarded
	kindWrite             // write: on the leader, else forwarded
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
	// caller is who calls (authenticate); role is the role whose view it
	// reads (queue.Caller.ViewRole).
	caller queue.Caller
	role   string
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
	// contentType is the request's Content-Type, for decode.
	contentType string
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// route adds a route to the table: its method and path, how it meets
// consistency, who may call it (the first check of every request; the
// queue's rules decide the rest: authz.go) and its handler.
func (s *Server) route(method, path string, k kind, who allow, h handlerFunc) {
	s.router.HandleFunc(method+" "+path, s.metrics.instrument(method, path, func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, k, who, h)
	}))
	s.routeList = append(s.routeList, method+" "+path)
	s.allowed[method+" "+path] = who
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
	if who != allowPublic {
		caller, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		if !who.permits(caller, r.Method) {
			s.writeError(w, forbidden(caller, r.Method+" "+routeTemplate(r)))
			return
		}
		c.caller, c.role = caller, caller.ViewRole()
		if caller.Token != "" {
			// A named token's call ends when the token is revoked or
			// expires (a long poll, an event stream), as this node applies it.
			ctx, release := s.queue.Hold(r.Context(), caller)
			defer release()
			r = r.WithContext(ctx)
		}
		if r.URL.RawQuery != "" {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				s.writeError(w, badRequest("the query string is malformed: %s", queryProblem(err)))
				return
			}
			if c.consistent, err = flagParam(q, "consistent"); err != nil {
				s.writeError(w, err)
				return
			}
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
	case kindLocal:
		err = h(w, r, c)
	case kindRead:
		err = s.serveRead(w, r, c, h)
	case kindWrite, kindLocalFirst, kindLongPoll:
		c.longPoll = k == kindLongPoll
		err = s.serveWrite(w, r, c, h, k == kindLocalFirst)
	}
	if err != nil {
		if errors.Is(context.Cause(r.Context()), queue.ErrTokenRevoked) {
			s.writeError(w, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "token %s was revoked or expired during the call", c.caller.Token))
			return
		}
		if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
			// The caller went away (e.g. left a long poll): nobody to answer.
			s.logger.Debug("caller left before the answer", "path", r.URL.Path)
			return
		}
		s.writeError(w, s.forCaller(r, c.caller, err))
	}
}

// forCaller keeps an error from showing a job its caller may not read
// (queue.Service.ForCaller): such a job is not found.
func (s *Server) forCaller(r *http.Request, caller queue.Caller, err error) error {
	return s.queue.ForCaller(caller, r.PathValue("id"), err)
}

// routeTemplate is the route's path pattern ("/jobs/{id}"), else the path.
func routeTemplate(r *http.Request) string {
	if _, p, ok := strings.Cut(r.Pattern, " "); ok {
		return p
	}
	return r.URL.Path
}

// serveRead serves a read at the consistency the caller asked for, from
// this node's state when the service may answer here, else on the leader.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request, c *call, h handlerFunc) error {
	level := queue.ReadDefault
	stale := false
	if !s.staleFilters[r.Pattern] {
		var err error
		if stale, err = flagParam(r.URL.Query(), "stale"); err != nil {
			return err
		}
	}
	if stale {
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
		held.drop()
		return s.forwardRead(w, r, c, h)
	}
	if stands {
		return held.release(w, err)
	}
	held.drop() // a held answer that does not stand is dropped
	return err
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
	body, err := s.readBody(w, r, limit)
	if err != nil {
		return err
	}
	c.body = body
	c.contentType = r.Header.Get("Content-Type")
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

// decode parses a JSON request body into v. An empty body (or one of
// white space only) is an empty object. Anything else must be one JSON
// object of v's fields, sent as JSON and written in UTF-8: a body that is
// not an object (null, an array, a string...), an unknown field (a
// misspelt one would otherwise be ignored and its default used), a value
// of the wrong type, text that is not UTF-8 (a decoder would silently
// replace it), trailing data or a body sent as another media type is
// refused, naming what is wrong.
func decode(c *call, v interface{}) error {
	body := trimJSONSpace(c.body)
	if len(body) == 0 {
		return nil
	}
	if err := jsonMediaType(c.contentType); err != nil {
		return err
	}
	if err := checkText(body); err != nil {
		return err
	}
	if what := nonObject(body); what != "" {
		return badRequest("the body must be a JSON object ({\"field\": value, ...}), not %s", what)
	}
	if fastDecode(body, v) {
		return nil
	}
	if u, ok := v.(json.Unmarshaler); ok && json.Valid(body) {
		// One well-formed object for a type that decodes itself (a job's
		// create, strictly): what the decoder below would hand it, without
		// a second decoder's copy of the body.
		if err := u.UnmarshalJSON(body); err != nil {
			return bodyError(err, v)
		}
		return nil
	}
	// A body a pooled decoder takes as one object is decoded; anything else
	// is decoded (again) by a new decoder, whose error is the answer.
	if strictjson.TryDecode(body, v) {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return bodyError(err, v)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the body must be one JSON object, with nothing after it")
	}
	return nil
}

// decodeRequired is decode for a route whose body cannot be left out:
// an empty body is refused, saying what the route needs.
func decodeRequired(c *call, v interface{}, needs string) error {
	if len(trimJSONSpace(c.body)) == 0 {
		return badRequest("the body is required: %s", needs)
	}
	return decode(c, v)
}

// noFields checks the body of a route that takes no fields: none, or {}.
func noFields(c *call) error {
	return decode(c, &struct{}{})
}

// jsonMediaType refuses a body declared as anything but JSON. A request
// with no Content-Type is read as JSON.
func jsonMediaType(ct string) error {
	// The usual value, without the parser's map of parameters.
	if ct == "" || ct == "application/json" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return errorf(http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType,
		"the body must be JSON, sent with Content-Type: application/json (got %q)", ct)
}

// bodyError turns a JSON decoding error into the answer that says what is
// wrong in the caller's terms (JSON types and field names, never Go's).
func bodyError(err error, v interface{}) error {
	var fe *api.FieldError
	if errors.As(err, &fe) {
		return badRequest("%s", fe.Error())
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		if ute.Field == "" {
			return badRequest("the body must be a JSON object, not %s", valueName(ute.Value))
		}
		if ute.Type == reflect.TypeFor[api.JobError]() {
			return badRequest("%s must be a string or {code, message, stack, retryable}", ute.Field)
		}
		msg := fmt.Sprintf("field %q must be %s, not %s", ute.Field, jsonKind(ute.Type), valueName(ute.Value))
		if r, ok := fieldRanges[ute.Field]; ok {
			msg += " (" + r + ")"
		}
		return badRequest("%s", msg)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		if noFieldsIn(v) {
			return badRequest("unknown field %q: this route takes no fields (send no body, or {})", name)
		}
		msg := fmt.Sprintf("unknown field %q", name)
		if near := nearestField(v, name); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return badRequest("%s; the fields are documented in docs/api.md", msg)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "malformed JSON body at byte %d: %s", se.Offset,
			strings.TrimPrefix(se.Error(), "json: "))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "malformed JSON body: it ends before the object is closed")
	}
	// Any other error of a value's own decoding (api's types name their
	// fields with api.FieldError): say where, not what Go said.
	return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "malformed JSON body: a value does not have the form docs/api.md gives it")
}

// fieldRanges says what a numeric field allows, for the answer to a value
// JSON cannot give it (1e12 for an integer, a fraction).
var fieldRanges = map[string]string{
	"max_wait_ms":  "a whole number of milliseconds, 0 or more; waits are capped at 30000",
	"maxAttempts":  "a whole number, 1 or more",
	"leaseSeconds": "a whole number of seconds, 1 or more",
	"lease_ms":     "a whole number of milliseconds",
	"timeout":      "a whole number of seconds",
	"limit":        "a whole number from 1",
	"capacity":     "a whole number, 0 or more",
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another JSON type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// nearestField is the JSON field of v's struct closest to name (a
// misspelling: at most two edits, or the same letters in another case),
// or "".
func nearestField(v interface{}, name string) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	best, bestD := "", 3
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" || !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			d := editDistance(strings.ToLower(tag), strings.ToLower(name))
			if d < bestD {
				best, bestD = tag, d
			}
		}
	}
	walk(t)
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
