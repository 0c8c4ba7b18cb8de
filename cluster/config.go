package cluster

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Defaults applied by Config.Validate. They are tuned for a LAN or loopback
// cluster: a dead leader is detected and replaced in about a second.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	DefaultMaxAppendEntries   = 512
	DefaultMaxInflightBatches = 1
	DefaultSnapshotInterval   = 120 * time.Second
	DefaultSnapshotThreshold  = 8192
	DefaultTrailingLogs       = 10240
	DefaultApplyTimeout       = 10 * time.Second
	// DefaultSnapshotRetain is how many snapshots the file store keeps.
	DefaultSnapshotRetain = 2
)

// Raft log backends (Config.LogBackend).
const (
	LogBackendWAL  = "wal"
	LogBackendBolt = "bolt"
)

// maxMetaSize is memberlist's limit for node metadata.
const maxMetaSize = 512

// Config configures a Node. Zero durations and counts take the defaults
// above; see Validate.
type Config struct {
	// NodeID is this node's stable raft server id and memberlist name.
	// Required.
	NodeID string
	// DataDir holds the raft log (raft/wal/, or raft/raft.db with the bolt
	// backend; fsync always on), raft/snapshots/ (file snapshot store,
	// DefaultSnapshotRetain kept) and peers.json (known peers, for
	// rejoining gossip after a restart). Required.
	DataDir string
	// LogBackend picks the raft log and stable store: LogBackendWAL
	// (hashicorp/raft-wal: append-only segments, one fsync per batch) or
	// LogBackendBolt (raft-boltdb/v2). Empty means: whatever DataDir
	// already holds, else WAL. Naming a backend other than the one on disk
	// is an error, never a silent switch.
	LogBackend string
	// RaftAddr is host:port for the raft TCP transport; it is both bound
	// and advertised, so it must be reachable by the other nodes. Required
	// unless Transport is set.
	RaftAddr string
	// GossipAddr is host:port memberlist binds to and advertises (TCP and
	// UDP). Required unless DisableGossip is set.
	GossipAddr string
	// GossipKey, if set, encrypts gossip with this key (16, 24 or 32
	// bytes; keyring.go). DataDir/keyring.json keeps the node's keys
	// across restarts and rotations; a key given here that the file lacks
	// becomes its primary.
	GossipKey []byte
	// HTTPAddr is this node's advertised HTTP base URL, such as
	// "http://127.0.0.1:36725". It travels in gossip metadata so every node
	// can name the leader's URL. Required.
	HTTPAddr string
	// Commands is the highest command type this node's state machine
	// applies (fsm.LatestCommand). It is gossiped: the builds from before
	// levels were gossiped are known by it (version.go, levelOf).
	Commands uint8
	// Level is the highest cluster level this node's state machine
	// supports (fsm.LatestLevel). It is gossiped beside Commands, so the
	// leader raises the cluster's level only once every server of the
	// configuration supports it (MinSupportedLevel). 0: the level Commands
	// tells (version.go), as for a build that gossips none.
	Level int
	// Bootstrap makes this node bootstrap a new single-voter cluster with
	// itself, but only if DataDir has no existing raft state.
	Bootstrap bool
	// Join lists HTTP base URLs of existing members. A node with no raft
	// state POSTs to <url>/cluster/join until it is added; a node with
	// existing state uses them only to find gossip peers.
	Join []string
	// JoinToken is sent as "Authorization: Bearer <JoinToken>" on join
	// requests.
	JoinToken string
	// TLS, when set, is the nodes' mutual-TLS configuration (LoadTLS):
	// the raft transport listens and dials with it (a peer without a
	// certificate from the cluster CA is refused before any RPC), and join
	// and member requests to other nodes' https URLs use it. Nil: plain
	// TCP and HTTP.
	TLS *tls.Config
	// FSM receives committed commands. If it implements raft.BatchingFSM
	// (or raft.ConfigurationStore) that is preserved. Required.
	FSM raft.FSM
	// Logger receives all logs, including raft's and memberlist's, under
	// named sub-loggers. Defaults to hclog.Default().
	Logger hclog.Logger

	// HeartbeatTimeout is how long a follower waits without leader contact
	// before starting an election.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits before a new election.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without
	// contacting a quorum. Must not exceed HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long raft waits without an Apply before sending
	// an AppendEntries carrying the commit index.
	CommitTimeout time.Duration
	// MaxAppendEntries caps entries per AppendEntries RPC and per fsync'ed
	// StoreLogs batch (group commit). At most 1024.
	MaxAppendEntries int
	// MaxInflightBatches is how many generations of proposals may be in
	// flight at once; proposals arriving meanwhile are grouped into the next
	// one (default 1: measured on a 2-core loopback cluster, it cut server
	// CPU per create by a fifth at 16 clients and raised throughput at 64).
	MaxInflightBatches int
	// SerialLogWrite makes the leader write and fsync each batch to its own
	// log before sending it to the followers (hashicorp/raft's own order).
	// By default the leader's write overlaps replication (overlapLog): a
	// commit then waits for the slower of the two fsyncs, not their sum.
	SerialLogWrite bool
	// SnapshotInterval is how often raft checks whether to snapshot.
	SnapshotInterval time.Duration
	// SnapshotThreshold is how many new log entries trigger a snapshot.
	SnapshotThreshold uint64
	// TrailingLogs is how many log entries are kept after a snapshot so
	// slow followers can catch up without a snapshot install.
	TrailingLogs uint64
	// ApplyTimeout bounds Apply, barriers and membership changes when the
	// caller's context has no earlier deadline.
	ApplyTimeout time.Duration

	// RaftMsgpack dials every peer with hashicorp/raft's msgpack protocol,
	// never the binary one (bintransport.go); the node serves both either
	// way.
	RaftMsgpack bool

	// Test hooks. Transport replaces the TCP transport (RaftAddr then
	// defaults to its LocalAddr). LogStore, StableStore and SnapshotStore
	// replace the on-disk stores. DisableGossip runs without memberlist.
	Transport     raft.Transport
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
	DisableGossip bool
	// walSegmentSize overrides raft-wal's 64 MiB segments, so tests can see
	// compaction (which drops whole sealed segments) at small log sizes.
	walSegmentSize int
}

// Validate fills in defaults and rejects an incomplete configuration. The
// error wraps ErrInvalidConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...interface{}) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.NodeID == "" {
		return bad("NodeID is required")
	}
	if !ValidNodeID(c.NodeID) {
		return bad("NodeID %q: a node id is %s", c.NodeID, NodeIDRule)
	}
	if c.DataDir == "" {
		return bad("DataDir is required")
	}
	if c.FSM == nil {
		return bad("FSM is required")
	}
	switch c.LogBackend {
	case "", LogBackendWAL, LogBackendBolt:
	default:
		return bad("LogBackend must be %q or %q, not %q", LogBackendWAL, LogBackendBolt, c.LogBackend)
	}
	if c.RaftAddr == "" && c.Transport != nil {
		c.RaftAddr = string(c.Transport.LocalAddr())
	}
	if c.RaftAddr == "" {
		return bad("RaftAddr is required")
	}
	if c.Transport == nil {
		if err := checkHostPort(c.RaftAddr); err != nil {
			return bad("RaftAddr: %v", err)
		}
	}
	if !c.DisableGossip {
		if c.GossipAddr == "" {
			return bad("GossipAddr is required")
		}
		if err := checkHostPort(c.GossipAddr); err != nil {
			return bad("GossipAddr: %v", err)
		}
	}
	if c.HTTPAddr == "" {
		return bad("HTTPAddr is required")
	}
	if u, err := url.Parse(c.HTTPAddr); err != nil || u.Scheme == "" || u.Host == "" {
		return bad("HTTPAddr %q is not an absolute URL", c.HTTPAddr)
	}
	for _, j := range c.Join {
		if u, err := url.Parse(j); err != nil || u.Scheme == "" || u.Host == "" {
			return bad("Join URL %q is not an absolute URL", j)
		}
	}
	if c.Logger == nil {
		c.Logger = hclog.Default()
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setDur(&c.ElectionTimeout, DefaultElectionTimeout)
	setDur(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	setDur(&c.CommitTimeout, DefaultCommitTimeout)
	setDur(&c.SnapshotInterval, DefaultSnapshotInterval)
	setDur(&c.ApplyTimeout, DefaultApplyTimeout)
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		c.LeaderLeaseTimeout = c.HeartbeatTimeout
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return bad("ElectionTimeout (%s) must be >= HeartbeatTimeout (%s)", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.MaxInflightBatches <= 0 {
		c.MaxInflightBatches = DefaultMaxInflightBatches
	}
	if c.MaxAppendEntries <= 0 {
		c.MaxAppendEntries = DefaultMaxAppendEntries
	}
	if c.MaxAppendEntries > 1024 {
		return bad("MaxAppendEntries must be <= 1024")
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	// Room for the state hash the node gossips beside its addresses.
	m := c.meta()
	m.HashIndex, m.Hash = ^uint64(0), strings.Repeat("f", 64)
	if b, _ := json.Marshal(m); len(b) >= maxMetaSize {
		return bad("gossip metadata is %d bytes, limit %d", len(b), maxMetaSize)
	}
	return nil
}

func (c *Config) meta() nodeMeta {
	return nodeMeta{ID: c.NodeID, RaftAddr: c.RaftAddr, HTTPAddr: c.HTTPAddr, Commands: c.Commands, Level: c.Level}
}

func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.MaxAppendEntries = c.MaxAppendEntries
	// Buffer the apply channel to MaxAppendEntries: proposals queue while the
	// leader is writing the previous batch and go out together in the next
	// one (group commit). Apply's enqueue timeout is then not enforced, which
	// Apply does not rely on: its ctx bounds the wait for the outcome.
	rc.BatchApplyCh = true
	rc.SnapshotInterval = c.SnapshotInterval
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.Logger = newRaftLogger(c.Logger.Named("raft"))
	return rc
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("%q has no host (it is advertised, so it must be reachable)", addr)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", addr)
	}
	return nil
}
