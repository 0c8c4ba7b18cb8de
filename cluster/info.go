package cluster

import "github.com/spine-queue/spine/cluster/clusterinfo"

// The vocabulary the layers above speak is declared in package clusterinfo
// (standard library only), so the HTTP API need not import this package or
// raft; these names are the same types and the same error values.

type (
	// Status is this node's view of the cluster, served by GET /cluster/status.
	Status = clusterinfo.Status
	// NodeStatus is one server of the raft configuration in Status.
	NodeStatus = clusterinfo.NodeStatus
	// LeaderInfo names the current leader in Status.
	LeaderInfo = clusterinfo.LeaderInfo
	// Member identifies a node for membership changes and join requests.
	Member = clusterinfo.Member
	// Metrics are the figures of this node an operator graphs.
	Metrics = clusterinfo.Metrics
	// KeyInfo is one key of a node's ring, by fingerprint.
	KeyInfo = clusterinfo.KeyInfo
	// SnapshotMeta describes a snapshot taken for a backup (SaveSnapshot).
	SnapshotMeta = clusterinfo.SnapshotMeta
)

// Sentinel errors (clusterinfo declares them; see there).
var (
	ErrNotLeader      = clusterinfo.ErrNotLeader
	ErrOutcomeUnknown = clusterinfo.ErrOutcomeUnknown
	ErrNoLeader       = clusterinfo.ErrNoLeader
	ErrShutdown       = clusterinfo.ErrShutdown
	ErrUnknownServer  = clusterinfo.ErrUnknownServer
	ErrInvalidConfig  = clusterinfo.ErrInvalidConfig
	ErrNoEncryption   = clusterinfo.ErrNoEncryption
	ErrJoinProof      = clusterinfo.ErrJoinProof
	ErrPeerTLS        = clusterinfo.ErrPeerTLS
)

// NodeIDRule says what a node id may be (ValidNodeID), in the words of
// the answers that refuse one.
const NodeIDRule = clusterinfo.NodeIDRule

// ValidNodeID reports whether id may name a node (NodeIDRule): a host
// name, the default, does.
func ValidNodeID(id string) bool { return clusterinfo.ValidNodeID(id) }

// ParseGossipKey decodes a base64 key of 16, 24 or 32 bytes (AES-128, -192,
// -256).
func ParseGossipKey(s string) ([]byte, error) { return clusterinfo.ParseGossipKey(s) }
