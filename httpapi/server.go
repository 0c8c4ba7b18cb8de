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
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/wire"
)

// Cluster is what the API needs of the replication layer (*cluster.Node).
type Cluster interface {
	ID() string
	Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error)
	IsLeader() bool
	Leader() (id, httpAddr string)
	LeaderCh() <-chan struct{}
	ConsistentIndex(ctx context.Context) (uint64, error)
	RecentIndex() (index uint64, ok bool)
	StillRecent() bool
	WaitForApplied(ctx context.Context, index uint64) error
	AppliedIndex() uint64
	Status(ctx context.Context) (cluster.Status, error)
	AddVoter(ctx context.Context, m cluster.Member) error
	RemoveServer(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, to string) error
}

// State is what the API needs of the job state machine (*fsm.FSM).
type State interface {
	// Read is a consistent view; Peek is for point lookups on hot paths
	// (see fsm.Reader).
	Read() *fsm.Reader
	Peek() *fsm.Reader
}

// Config configures the API server. Zero values take the documented defaults.
type Config struct {
	// Tokens are the accepted bearer tokens; at least one is required.
	Tokens *Tokens
	// Lease is the default lease of a claim (LEASE_SECONDS; default 300s).
	Lease time.Duration
	// MaxBodyBytes caps JSON request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MaxBlobBytes caps an uploaded blob (SPINE_MAX_BLOB_BYTES; default 8 MiB).
	MaxBlobBytes int64
	// MaxClaimWait caps a worker claim's max_wait_ms (default 30s).
	MaxClaimWait time.Duration
	// LeaderHold is how long a request waits for a leader during an
	// election before answering 503 (default 5s).
	LeaderHold time.Duration
	// SkillMD is served at GET /skill.md.
	SkillMD []byte
	// CPUSeconds, when set, reports this process's CPU time in /health.
	CPUSeconds func() float64
	// TimerSlack, when set, reports the process's timer slack in /health
	// (negative: unknown, and then omitted).
	TimerSlack func() time.Duration
	Logger     hclog.Logger
	// LeaseRenewFraction: a heartbeat writes a log entry only when it would
	// move the lease's expiry by at least this fraction of the lease; one
	// that comes sooner is answered from the committed lease after a read
	// index (SPINE_LEASE_RENEW_FRACTION; the server's default is 0.1).
	// Unlike the other fields, zero is not replaced by a default: it means
	// every heartbeat is written.
	LeaseRenewFraction float64
	// DisableRelay makes this node forward every request to the leader as
	// its own HTTP exchange instead of over the relay connection.
	DisableRelay bool
	// Now and NewID are the leader's clock and id source (tests replace them).
	Now   func() time.Time
	NewID func() string
}

// Server is the HTTP API of one node.
type Server struct {
	cfg     Config
	cluster Cluster
	state   State
	logger  hclog.Logger
	router  *http.ServeMux
	// routes are the served "METHOD /pattern"s; methods is each pattern's
	// methods, for the Allow header of a 405.
	routeList []string
	methods   map[string][]string
	fwd       *http.Client
	// claimWaiters counts worker claims waiting in a long poll on this node.
	claimWaiters atomic.Int64
	// localHeartbeats counts heartbeats this node answered from its own
	// recent state: no entry, no forward, no quorum round.
	localHeartbeats atomic.Uint64
	// leaseMisses counts answers from local state withheld because the
	// node's lease (leader) or contact (follower) ran out while it read.
	leaseMisses atomic.Uint64

	// relay: this node's connection to the leader (follower side) and the
	// connections followers opened to it (leader side); see relay.go.
	relay    *wire.Pool
	relayKey string
	relaySrv *wire.Server // followers' relays, served as leader
	muxSrv   *wire.Server // clients' mux connections
	// draining ends when Shutdown begins: long polls answer at once.
	draining     context.Context
	stopDraining context.CancelFunc
}

const (
	// forwardedHeader marks a request a follower forwarded to the leader,
	// so it is never forwarded twice.
	forwardedHeader = "X-Spine-Forwarded-By"
	headerNode      = "X-Spine-Node"
	headerLeader    = "X-Spine-Leader"
	headerLeaderURL = "X-Spine-Leader-Addr"
	headerIndex     = "X-Spine-Index"
	// headerMinIndex on a request names the highest index the caller has
	// seen in an answer (its X-Spine-Index): a node answering from its own
	// state first applies at least that much, so the caller reads its own
	// writes wherever it asks.
	headerMinIndex = "X-Spine-Min-Index"
)

// MaxEntryBytes caps one replicated command. Large Raft entries delay
// heartbeats and cause needless elections, so every entry stays well under
// 512 KiB; bigger content goes through /blobs, which is chunked.
const MaxEntryBytes = 384 << 10

// New builds the API server.
func New(cfg Config, c Cluster, st State) (*Server, error) {
	if cfg.Tokens == nil || cfg.Tokens.Len() == 0 {
		return nil, errors.New("httpapi: no token configured: set HEAD_TOKEN(S), LEFT_CLAW_TOKEN(S) or RIGHT_CLAW_TOKEN(S)")
	}
	if err := cfg.Tokens.check(); err != nil {
		return nil, err
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 300 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxBlobBytes <= 0 {
		cfg.MaxBlobBytes = 8 << 20
	}
	if cfg.MaxClaimWait <= 0 {
		cfg.MaxClaimWait = 30 * time.Second
	}
	if cfg.LeaderHold <= 0 {
		cfg.LeaderHold = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.NewString() }
	}
	s := &Server{cfg: cfg, cluster: c, state: st, logger: cfg.Logger.Named("http"), fwd: newForwardClient(),
		relayKey: relayKey(cfg.Tokens)}
	s.relay = &wire.Pool{Path: wire.RelayPath, Protocol: wire.RelayProtocol, Single: true}
	s.draining, s.stopDraining = context.WithCancel(context.Background())
	s.routes()
	s.relaySrv = &wire.Server{Handler: s.router, MaxFrame: wire.MaxFrame}
	s.muxSrv = &wire.Server{
		Handler: s.router, MaxInFlight: muxMaxInFlight,
		MaxFrame: uint32(max(cfg.MaxBodyBytes, wire.MaxBody)) + 64<<10,
		// A client's request is forwarded like any other: only a node
		// marks a request as forwarded.
		Prepare: func(r *http.Request) { r.Header.Del(forwardedHeader) },
	}
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			switch r.URL.Path {
			case wire.RelayPath:
				s.handleRelay(w, r) // node to node; not part of the public API
				return
			case wire.MuxPath:
				s.handleMux(w, r)
				return
			}
		}
		s.router.ServeHTTP(w, r)
	})
}

// Shutdown drains the mux and relay connections this node serves: each
// stops reading requests, tells its peer which ones it read, answers those
// and closes, so no caller is left in doubt about a request unless ctx ends
// first (requests it never read fail as not sent and are retried
// elsewhere). Clients' connections go first; followers' relays are served
// until then, as long as this node's HTTP requests are (run Shutdown beside
// http.Server.Shutdown, then Close).
func (s *Server) Shutdown(ctx context.Context) {
	// Claims parked in a long poll answer {"claimed":false} now rather than
	// hold the drain up to its deadline and then be cut off (an outcome
	// their callers could not know); their claws poll again elsewhere.
	s.stopDraining()
	s.muxSrv.Shutdown(ctx)
	s.relaySrv.Shutdown(ctx)
}

// Close releases forwarding connections and closes relays and mux
// connections at once.
func (s *Server) Close() {
	s.fwd.CloseIdleConnections()
	s.relay.Close()
	s.relaySrv.Close()
	s.muxSrv.Close()
}

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

// heartbeat extends a lease, or answers from the committed lease when it
// is fresh enough (Config.LeaseRenewFraction) that a log entry would only
// move its expiry by a little.
//
// A fresh lease the caller holds is confirmed at default consistency, with
// no quorum round: by the leader from its own state, which holds every
// write it acknowledged; or by a follower that heard from the leader within
// the leader lease, if the caller says what it has seen (X-Spine-Min-Index,
// the index of its claim or of its last answer): the follower first applies
// that index and the commit index it knows (cluster RecentIndex). Every
// lease a node applies is committed, so no failover takes back what the
// answer says; it may only miss another client's change committed within
// the last leader lease (a head's release), which the next heartbeat or
// the fenced complete reports. With ?consistent, and for every refusal, the
// leader answers from a linearizable view instead: it confirms its
// leadership with a quorum and waits until it has applied everything
// committed before the heartbeat arrived; a refusal needs no entry either.
func (s *Server) heartbeat(ctx context.Context, w http.ResponseWriter, c *call, cmd *fsm.HeartbeatCommand) (*fsm.Result, error) {
	f := s.cfg.LeaseRenewFraction
	if f > 0 && !c.consistent && (!c.local || c.minIndex > 0) {
		if res, idx, ok := s.recentHeartbeat(ctx, cmd, f, c.minIndex); ok {
			if w != nil {
				s.setIndex(w, idx)
			}
			return res, nil
		}
	}
	if c.local {
		return nil, errNeedLeader
	}
	if f > 0 {
		// A local look first, so a heartbeat that will be written pays for
		// no quorum round trip.
		if _, ok := s.state.Peek().Heartbeat(cmd, f); ok {
			idx, err := s.cluster.ConsistentIndex(ctx)
			if err != nil {
				return nil, err
			}
			if err := s.cluster.WaitForApplied(ctx, idx); err != nil {
				return nil, err
			}
			if res, ok := s.state.Peek().Heartbeat(cmd, f); ok {
				if w != nil {
					s.setIndex(w, s.cluster.AppliedIndex())
				}
				return s.result(res)
			}
		}
	}
	return s.apply(ctx, w, fsm.CmdHeartbeat, cmd)
}

// recentWait bounds how long a node waits to apply the commit index it
// knows before answering a heartbeat itself; past it the leader answers.
const recentWait = 50 * time.Millisecond

// recentHeartbeat confirms a fresh lease from this node's own recent state
// (see heartbeat), once it has applied the commit index it knows. ok is false
// when this node cannot vouch for its state, does not yet know minIndex to be
// committed, or the lease is not the caller's or is due for an extension.
func (s *Server) recentHeartbeat(ctx context.Context, cmd *fsm.HeartbeatCommand, renewFraction float64, minIndex uint64) (*fsm.Result, uint64, bool) {
	idx, ok := s.cluster.RecentIndex()
	if !ok || idx < minIndex {
		// A follower learns that an entry is committed from the leader's
		// next append; until then the caller's write is not its to read.
		return nil, 0, false
	}
	if s.cluster.AppliedIndex() < idx {
		wctx, cancel := context.WithTimeout(ctx, recentWait)
		err := s.cluster.WaitForApplied(wctx, idx)
		cancel()
		if err != nil {
			return nil, 0, false
		}
	}
	res, ok := s.state.Peek().Heartbeat(cmd, renewFraction)
	if !ok || res.Err != nil {
		return nil, 0, false
	}
	// Checked again after the read: a node paused since RecentIndex may
	// have read a state the cluster has moved on from.
	if !s.cluster.StillRecent() {
		s.leaseMisses.Add(1)
		return nil, 0, false
	}
	s.localHeartbeats.Add(1)
	return res, idx, true
}

func (s *Server) now() int64 { return s.cfg.Now().UnixNano() }

func (s *Server) routes() {
	s.router = http.NewServeMux()
	s.methods = map[string][]string{}
	// Every path no route has: 404 in the API's JSON.
	s.router.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.setLeaderHeaders(w)
		s.writeError(w, errorf(http.StatusNotFound, codeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})

	s.route("GET", "/health", kindPublic, allowPublic, s.handleHealth)
	s.route("GET", "/skill.md", kindPublic, allowPublic, s.handleSkill)

	s.route("POST", "/jobs", kindWrite, allowHead, s.handleCreate)
	s.route("GET", "/jobs", kindRead, allowAll, s.handleList)
	s.route("GET", "/jobs/{id}", kindRead, allowAll, s.handleGet)
	s.route("GET", "/jobs/{id}/events", kindRead, allowAll, s.handleEvents)
	s.route("GET", "/jobs/{id}/attempts", kindRead, allowAll, s.handleAttempts)
	s.route("POST", "/jobs/{id}/claim", kindWrite, allowClaws, s.handleClaim)
	s.route("POST", "/jobs/{id}/heartbeat", kindLocalFirst, allowAll, s.handleHeartbeat)
	s.route("POST", "/jobs/{id}/complete", kindWrite, allowAll, s.handleComplete)
	s.route("POST", "/jobs/{id}/fail", kindWrite, allowAll, s.handleFail)
	s.route("POST", "/jobs/{id}/release", kindWrite, allowAll, s.handleRelease)
	s.route("POST", "/jobs/{id}/comment", kindWrite, allowAll, s.handleComment)

	s.route("POST", "/blobs", kindWrite, allowAll, s.handleBlobPut)
	s.route("GET", "/blobs/{id}", kindPublic, allowPublic, s.authorized(allowAll, s.handleBlobGet))

	s.route("POST", "/internal/worker/claim", kindLongPoll, allowClaws, s.handleWorkerClaim)
	s.route("POST", "/internal/worker/heartbeat", kindLocalFirst, allowClaws, s.handleWorkerHeartbeat)
	s.route("POST", "/internal/worker/complete", kindWrite, allowClaws, s.handleWorkerComplete)
	s.route("POST", "/internal/worker/fail", kindWrite, allowClaws, s.handleWorkerFail)

	s.route("GET", "/dlq", kindRead, allowHead, s.handleDLQList)
	s.route("POST", "/dlq/{id}/redrive", kindWrite, allowHead, s.handleRedrive)

	s.route("GET", "/cluster/status", kindPublic, allowPublic, s.authorized(allowHead, s.handleClusterStatus))
	s.route("POST", "/cluster/join", kindWrite, allowHead, s.handleJoin)
	s.route("POST", "/cluster/remove", kindWrite, allowHead, s.handleRemove)
	s.route("POST", "/cluster/transfer-leader", kindWrite, allowHead, s.handleTransfer)
}

// authorized wraps a locally served handler with authentication, for routes
// that neither forward nor need leader consistency.
func (s *Server) authorized(who allow, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		role, err := s.authenticate(r)
		if err != nil {
			return err
		}
		if !who.permits(role) {
			return forbidden(role, r.Method+" "+routeTemplate(r))
		}
		c.role = role
		return h(w, r, c)
	}
}
