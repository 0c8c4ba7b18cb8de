package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/cluster/clusterinfo"
	"github.com/spine-queue/spine/queue"
)

// Cluster is what the API needs of the replication layer (*cluster.Node):
// where the leader is, to route requests, and membership. Its types and
// errors are package clusterinfo's, so this package imports neither cluster
// nor raft (internal/layers). Everything about the queue goes through the
// service (package queue).
type Cluster interface {
	ID() string
	IsLeader() bool
	Leader() (id, httpAddr string)
	LeaderCh() <-chan struct{}
	AppliedIndex() uint64
	Status(ctx context.Context) (clusterinfo.Status, error)
	AddVoter(ctx context.Context, m clusterinfo.Member) error
	RemoveServer(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, to string) error
}

// Config configures the API server. Zero values take the documented
// defaults. The queue's own settings (lease, limits, clock) are the
// service's (queue.Config).
type Config struct {
	// Tokens are the accepted bearer tokens; at least one is required.
	Tokens *Tokens
	// MaxBodyBytes caps JSON request bodies (default 1 MiB).
	MaxBodyBytes int64
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
	// DisableRelay makes this node forward every request to the leader as
	// its own HTTP exchange instead of over the relay connection.
	DisableRelay bool
	// Metrics is the registry the server's metrics join (nil: one of its
	// own); the caller may register more in it (Go runtime, raft's).
	Metrics *prometheus.Registry
	// SnapshotDir holds a restore's upload while it is checked (default
	// the system's temporary directory).
	SnapshotDir string
	// NodeTLS, when set, is the nodes' mutual-TLS configuration
	// (cluster.LoadTLS): forwarding and the relay reach other nodes' https
	// URLs with it, presenting this node's certificate, and the paths only
	// nodes use (the relay's upgrade, requests marked forwarded by a node)
	// are refused unless the caller presented a certificate that verified
	// against the cluster CA (the listener's ClientCAs).
	NodeTLS *tls.Config
	// MCP bounds the MCP sessions of /mcp (zero values: the defaults).
	MCP MCPLimits
}

// Server is the HTTP API of one node.
type Server struct {
	cfg     Config
	cluster Cluster
	queue   *queue.Service
	logger  hclog.Logger
	router  *http.ServeMux
	// paths holds every route's path without its method: which paths
	// exist, for the 405 of a method a path does not have.
	paths *http.ServeMux
	// uiPages are the web UI's page templates (ui.go).
	uiPages map[string]*template.Template
	// routes are the served "METHOD /pattern"s; methods is each pattern's
	// methods, for the Allow header of a 405.
	routeList []string
	methods   map[string][]string
	// allowed is who may call each route ("METHOD /pattern"), web UI pages
	// included: the table the authorization test walks.
	allowed map[string]allow
	fwd     *http.Client
	// bodyLimits are the routes whose bodies may be larger than
	// MaxBodyBytes, by pattern.
	bodyLimits map[string]int64
	// staleFilters are the read routes whose own "stale" query parameter is
	// a filter, not the consistency option (GET /api/tasks?stale=true: the
	// stale tasks, as seed 004 names it).
	staleFilters map[string]bool

	// relay: this node's connection to the leader (follower side) and the
	// connections followers opened to it (leader side); see relay.go.
	// leaderHdr is the leader's header values answers share
	// (leaderHeaders).
	leaderHdr atomic.Pointer[leaderHdr]

	relay    *wire.Pool
	relayKey string
	// reencode makes the follower decode and encode again what it relays
	// (tests and benchmarks compare it with passing frames through).
	reencode bool
	relaySrv *wire.Server // followers' relays, served as leader
	muxSrv   *wire.Server // clients' mux connections
	mcp      *mcpEndpoint // /mcp
	metrics  *metrics
	// tokenLookups are the lookups of named tokens this follower has not
	// applied yet (tokenlookup.go).
	tokenLookups *tokenLookups
	// draining ends when Shutdown begins: long polls answer at once.
	draining     context.Context
	stopDraining context.CancelFunc
}

// New builds the API server of a node, serving q.
func New(cfg Config, c Cluster, q *queue.Service) (*Server, error) {
	if cfg.Tokens == nil || cfg.Tokens.Len() == 0 {
		return nil, errors.New("httpapi: no token configured: set HEAD_TOKEN(S), LEFT_CLAW_TOKEN(S) or RIGHT_CLAW_TOKEN(S)")
	}
	if err := cfg.Tokens.check(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.LeaderHold <= 0 {
		cfg.LeaderHold = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, cluster: c, queue: q, logger: cfg.Logger.Named("http"), fwd: newForwardClient(cfg.NodeTLS),
		relayKey: relayKey(cfg.Tokens), tokenLookups: newTokenLookups()}
	s.relay = &wire.Pool{Path: wire.RelayPath, Protocol: wire.RelayProtocol, Single: true, TLS: cfg.NodeTLS}
	s.draining, s.stopDraining = context.WithCancel(context.Background())
	if err := s.uiTemplates(); err != nil {
		return nil, fmt.Errorf("httpapi: web UI templates: %w", err)
	}
	m, err := newMetrics(s, cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("httpapi: metrics: %w", err)
	}
	s.metrics = m
	s.routes()
	s.relaySrv = &wire.Server{Handler: s.router, MaxFrame: wire.MaxFrame}
	s.muxSrv = &wire.Server{
		// A frame is a request like any other: the same limits, then the
		// router (a follower's relay carries requests it checked already).
		Handler: http.HandlerFunc(s.serveRequest), MaxInFlight: muxMaxInFlight,
		MaxFrame: uint32(max(cfg.MaxBodyBytes, wire.MaxBody)) + 64<<10,
		// A client's request is forwarded like any other: only a node
		// marks a request as forwarded.
		Prepare: func(r *http.Request) { r.Header.Del(api.HeaderForwardedBy) },
	}
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.NodeTLS != nil && !nodeVerified(r) && (r.URL.Path == wire.RelayPath || r.Header.Get(api.HeaderForwardedBy) != "") {
			s.setLeaderHeaders(w)
			s.writeError(w, errorf(http.StatusForbidden, api.CodeForbidden,
				"%s is for the cluster's nodes: it needs a client certificate from the cluster CA", nodeOnlyWhat(r)))
			return
		}
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
		s.serveRequest(w, r)
	})
}

// serveRequest serves one API request, read from an HTTP connection or from
// a clients' mux frame: the limits every request is held to, then the
// router.
func (s *Server) serveRequest(w http.ResponseWriter, r *http.Request) {
	if err := unservedTarget(r); err != nil {
		// net/http's router would answer these itself, in plain text
		// or with a redirect (which a client may follow with another
		// method, losing the body).
		s.setLeaderHeaders(w)
		s.writeError(w, err)
		return
	}
	if n := headerBytes(r); n > MaxHeaderBytes {
		s.setLeaderHeaders(w)
		s.writeError(w, errorf(http.StatusRequestHeaderFieldsTooLarge, api.CodeHeadersTooLarge,
			"the request's headers and URL are %d bytes, over the limit of %d", n, MaxHeaderBytes))
		return
	}
	s.router.ServeHTTP(w, r)
}

// unservedTarget refuses, in the API's terms, a request target that
// net/http's router answers on its own: "*" (OPTIONS *), a CONNECT, and a
// path that is not in its clean form (an empty segment, "." or "..").
// The web UI keeps the router's redirect to the clean path.
func unservedTarget(r *http.Request) error {
	if r.RequestURI == "*" {
		return badRequest("the request target * is not served: name a path, such as /health")
	}
	if r.Method == http.MethodConnect {
		return errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "method CONNECT is not allowed: this is not a proxy")
	}
	p := r.URL.EscapedPath()
	if cp := cleanPath(p); cp != p && !strings.HasPrefix(cp, "/ui/") && cp != "/ui" {
		return errorf(http.StatusNotFound, api.CodeNotFound,
			"no route %s %s: a path has no empty segments, \".\" or \"..\" (its clean form is %s)", r.Method, p, cp)
	}
	return nil
}

// cleanPath is p as net/http's router cleans it: rooted, without empty
// segments, "." or "..", keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] == '/' && !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p // clean already (the common case: no allocation)
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// nodeVerified reports whether r came over TLS with a client certificate
// that verified against the listener's ClientCAs (the cluster CA).
func nodeVerified(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

func nodeOnlyWhat(r *http.Request) string {
	if r.URL.Path == wire.RelayPath {
		return "the relay"
	}
	return "a request marked " + api.HeaderForwardedBy
}

// MaxHeaderBytes caps a request's header fields and URL: what a client
// sends there is a token, a few ids and cursors. (http.Server's own
// limit, far higher, answers in plain text; spine serve sets it to
// 1 MiB.)
const MaxHeaderBytes = 32 << 10

// headerBytes counts a request's URL and header fields as sent.
func headerBytes(r *http.Request) int {
	n := len(r.RequestURI)
	if n == 0 { // a request read from a mux or relay frame
		n = len(r.URL.String())
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
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
	s.queue.Drain()
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
