// Package queue is Spine's service layer: the one place that turns what a
// caller asks for into a stamped command, proposes it through the cluster,
// and maps the state machine's answer. It also runs what no single request
// owns: the long-poll claim, the heartbeat fast path, and the leader's
// timed sweeps (reaper, purger). Every way in to the queue (the HTTP API
// today; task views, the web UI and MCP tools next) calls this package and
// nothing below it, so a rule lives here once.
//
// The package speaks in fsm types. Turning them into JSON, statuses and
// headers is the surface's job (package httpapi for HTTP).
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/fsm"
)

// Cluster is what the service needs of the replication layer
// (*cluster.Node): proposing entries and the read side of the log.
type Cluster interface {
	Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error)
	IsLeader() bool
	ConsistentIndex(ctx context.Context) (uint64, error)
	RecentIndex() (index uint64, ok bool)
	StillRecent() bool
	WaitForApplied(ctx context.Context, index uint64) error
	AppliedIndex() uint64
	// MinSupportedLevel is the highest cluster level every server of the
	// configuration supports (the most the leader may raise it to).
	MinSupportedLevel() int
	// RecordHeartbeat and LastSeen are the gossiped last-seen times of
	// gateways and workers (soft state: never a log entry).
	RecordHeartbeat(key string, at int64)
	LastSeen(key string) (int64, bool)
}

// State is what the service reads of the job state machine (*fsm.FSM).
type State interface {
	// Read is a consistent view; Peek is for point lookups on hot paths
	// (see fsm.Reader).
	Read() *fsm.Reader
	Peek() *fsm.Reader
}

// Config configures the service. Zero values take the documented defaults.
type Config struct {
	// Lease is the default lease of a claim (LEASE_SECONDS; default 300s).
	Lease time.Duration
	// MaxClaimWait caps how long a claim-next may wait for work (default 30s).
	MaxClaimWait time.Duration
	// MaxBlobBytes caps a stored blob (SPINE_MAX_BLOB_BYTES; default 8 MiB).
	MaxBlobBytes int64
	// LeaseRenewFraction: a heartbeat writes a log entry only when it would
	// move the lease's expiry by at least this fraction of the lease; one
	// that comes sooner is answered from the committed lease
	// (SPINE_LEASE_RENEW_FRACTION). Zero is not replaced by a default: it
	// means every heartbeat is written.
	LeaseRenewFraction float64
	// RetryBackoff is the backoff (seconds) a job created without one
	// gets (SPINE_RETRY_BACKOFF; default 1s doubling to 5m): stamped into
	// the create entry, so the job carries it whatever node later runs it.
	// A zero Base: a fail with requeue queues the job again at once.
	RetryBackoff RetryBackoff
	// MaxScan bounds the jobs one page of a list examines, so a filter
	// that matches little cannot make one request walk every job (default
	// fsm.DefaultMaxScan); such a page may come short, with a cursor.
	MaxScan int
	Logger  hclog.Logger
	// Now and NewID are the leader's clock and id source (tests replace them).
	Now   func() time.Time
	NewID func() string
}

// RetryBackoff is a retry backoff in whole seconds: Base*2^(n-1) after
// the n-th failed attempt, at most Max (0: no ceiling).
type RetryBackoff struct{ Base, Max int64 }

// Service is the queue's operations on one node.
type Service struct {
	cfg     Config
	cluster Cluster
	state   State
	logger  hclog.Logger

	// raising holds the one raise of the cluster's level under way on
	// this node (level.go).
	raising chan struct{}

	claimWaiters    atomic.Int64
	localHeartbeats atomic.Uint64
	leaseMisses     atomic.Uint64

	// comments serializes a job's comments on this node (Comment).
	comments keyLocks

	// draining ends when Drain is called: claims waiting for work answer
	// at once.
	draining     context.Context
	stopDraining context.CancelFunc

	// held are the open long-lived calls of named tokens (tokens.go).
	held tokenCalls
}

// New builds the service of one node.
func New(cfg Config, c Cluster, st State) *Service {
	if cfg.Lease <= 0 {
		cfg.Lease = 300 * time.Second
	}
	if cfg.MaxClaimWait <= 0 {
		cfg.MaxClaimWait = 30 * time.Second
	}
	if cfg.MaxBlobBytes <= 0 {
		cfg.MaxBlobBytes = 8 << 20
	}
	if cfg.MaxScan <= 0 {
		cfg.MaxScan = fsm.DefaultMaxScan
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	s := &Service{cfg: cfg, cluster: c, state: st, logger: cfg.Logger.Named("queue"), raising: make(chan struct{}, 1)}
	s.draining, s.stopDraining = context.WithCancel(context.Background())
	return s
}

// Config is the service's configuration with defaults applied.
func (s *Service) Config() Config { return s.cfg }

// Drain ends every claim waiting for work (each answers that nothing was
// claimed) and makes later ones answer at once: the node is stopping, and
// its claimants should poll elsewhere rather than be cut off.
func (s *Service) Drain() { s.stopDraining() }

// Stats are the service's counters on this node.
type Stats struct {
	// ClaimWaiters: claims waiting for work now.
	ClaimWaiters int64
	// LocalHeartbeats: heartbeats confirmed from this node's own recent
	// state (no entry, no forward, no quorum round).
	LocalHeartbeats uint64
	// LeaseMisses: answers from local state withheld because the node's
	// lease (leader) or contact (follower) ran out while it read.
	LeaseMisses uint64
}

// Stats reads the counters.
func (s *Service) Stats() Stats {
	return Stats{ClaimWaiters: s.claimWaiters.Load(), LocalHeartbeats: s.localHeartbeats.Load(), LeaseMisses: s.leaseMisses.Load()}
}

func (s *Service) now() int64 { return s.cfg.Now().UnixNano() }

// MaxEntryBytes caps one replicated command. Large Raft entries delay
// heartbeats and cause needless elections, so every entry stays well under
// 512 KiB; bigger content goes through blobs, which are chunked.
const MaxEntryBytes = 384 << 10

// Errors of the service. Refusals by the state machine come back as a
// *Refusal wrapping the fsm error (fsm.ErrNotFound, fsm.ErrStaleLease...);
// failures of the cluster wrap its errors (cluster.ErrNotLeader,
// cluster.ErrOutcomeUnknown...).
var (
	// ErrNeedLeader: a follower cannot answer from its own state; the
	// request must go to the leader.
	ErrNeedLeader = errors.New("queue: this needs the leader")
	// ErrLeadershipLost: this node stopped being the leader while a claim
	// waited for work; nothing was claimed.
	ErrLeadershipLost = errors.New("this node lost leadership while the claim waited; retry")
)

// InputError is a request the service refuses before proposing anything.
type InputError struct{ Message string }

func (e *InputError) Error() string { return e.Message }

func invalid(format string, args ...interface{}) *InputError {
	return &InputError{Message: fmt.Sprintf(format, args...)}
}

// TooLargeError is a request whose content is over a limit.
type TooLargeError struct{ Message string }

func (e *TooLargeError) Error() string { return e.Message }

// Refusal is a command the state machine applied and refused. Job is the
// job it concerns, when there is one (its current state); Index is the
// refusing entry's.
type Refusal struct {
	Err   error
	Job   *fsm.Job
	Index uint64
}

func (e *Refusal) Error() string { return e.Err.Error() }
func (e *Refusal) Unwrap() error { return e.Err }

// Propose encodes cmd, proposes it and returns the state machine's result
// and the entry's index. A refusal is a *Refusal.
func (s *Service) Propose(ctx context.Context, t fsm.CommandType, cmd interface{}) (*fsm.Result, uint64, error) {
	if err := s.authorizeWrite(cmd); err != nil {
		return nil, 0, err
	}
	// Written as the cluster's level says every server reads it.
	data, err := fsm.EncodeAt(s.state.Peek().Level(), t, cmd)
	if err != nil {
		return nil, 0, err
	}
	if len(data) > MaxEntryBytes {
		what, parts := entryContent(t)
		return nil, 0, &TooLargeError{Message: fmt.Sprintf(
			"%s is too large: it takes %d bytes as stored, over the limit of %d; %s together must stay under it (upload large inputs and outputs as blobs and pass their ids)",
			what, len(data), MaxEntryBytes, parts)}
	}
	resp, index, err := s.cluster.Apply(ctx, data)
	if err != nil {
		return nil, 0, err
	}
	res, ok := resp.(*fsm.Result)
	if !ok {
		return nil, 0, fmt.Errorf("apply %s: unexpected response %T", t, resp)
	}
	if res.Err != nil {
		return res, index, &Refusal{Err: res.Err, Job: res.Job, Index: index}
	}
	return res, index, nil
}

// createCmds are the commands proposeCreate proposes; Propose keeps none.
var createCmds = sync.Pool{New: func() any { return new(fsm.CreateCommand) }}

// proposeCreate proposes cmd from a pooled copy: cmd stays on its caller's
// stack, and the leader makes no garbage of a job's size for it
// (design.md §1, "What a job costs in memory").
func (s *Service) proposeCreate(ctx context.Context, cmd *fsm.CreateCommand) (*fsm.Result, uint64, error) {
	pc := createCmds.Get().(*fsm.CreateCommand)
	*pc = *cmd
	res, index, err := s.Propose(ctx, fsm.CmdCreate, pc)
	*pc = fsm.CreateCommand{}
	createCmds.Put(pc)
	return res, index, err
}

// entryContent names, in the API's terms, what a command of type t
// stores and the parts of it that count against MaxEntryBytes: a refusal
// speaks of the job, never of the command that carries it.
func entryContent(t fsm.CommandType) (what, parts string) {
	switch t {
	case fsm.CmdCreate, fsm.CmdTaskCreate:
		return "the job", "its payload and its other fields"
	case fsm.CmdComplete:
		return "the completion", "its result, stdout and stderr"
	case fsm.CmdFail:
		return "the failure", "its error, stdout and stderr"
	case fsm.CmdTaskStep:
		return "the task's step", "its result, error, stdout and stderr"
	case fsm.CmdHeartbeat:
		return "the heartbeat", "its progress and checkpoint"
	case fsm.CmdComment:
		return "the comment", "its text"
	case fsm.CmdRegistrySet:
		return "the registry", "its project, task classes, tools and scripts"
	case fsm.CmdGatewayRegister, fsm.CmdWorkerRegister:
		return "the registration", "its metadata, capabilities and address"
	case fsm.CmdSessionCreate, fsm.CmdStreamCreate, fsm.CmdStreamDefaults:
		return "the stream or session", "its description, instructions and defaults"
	case fsm.CmdRelease:
		return "the release", "its reason and fields"
	case fsm.CmdScheduleSet:
		return "the schedule", "its job template and its other fields"
	}
	return "the request", "its fields"
}

// Local returns a consistent view of this node's state machine as it is,
// without waiting for anything: for figures (metrics), never for answers
// that promise consistency.
func (s *Service) Local() *fsm.Reader { return s.state.Read() }
