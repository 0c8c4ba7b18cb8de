package clusterinfo

import "errors"

// Sentinel errors of package cluster (which re-exports them under the same
// names). Match them with errors.Is.
var (
	// ErrNotLeader means this node is not the (ready) leader, and the
	// operation was not started: it definitely had no effect.
	ErrNotLeader = errors.New("cluster: not the leader")

	// ErrOutcomeUnknown means a write was proposed but its fate is unknown:
	// leadership was lost, the apply timed out or the caller gave up. The
	// command may or may not commit; callers must not report a definite
	// failure.
	ErrOutcomeUnknown = errors.New("cluster: outcome of write unknown")

	// ErrNoLeader means the cluster currently has no known leader.
	ErrNoLeader = errors.New("cluster: no leader")

	// ErrShutdown means the node has been shut down.
	ErrShutdown = errors.New("cluster: node is shut down")

	// ErrUnknownServer means a membership operation named a server that is
	// not in the raft configuration.
	ErrUnknownServer = errors.New("cluster: unknown server")

	// ErrInvalidConfig means Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("cluster: invalid config")
)

// ErrNoEncryption: keyring operations on a node started without a key.
var ErrNoEncryption = errors.New("gossip encryption is off on this node (start it with --gossip-key)")

// ErrJoinProof: a join whose gossip-key proof is missing or matches no key.
var ErrJoinProof = errors.New("the joining node does not hold a gossip key of this cluster")

// ErrPeerTLS: a node asked to be added, but its raft address does not
// complete a mutual-TLS handshake with a certificate of the cluster CA.
var ErrPeerTLS = errors.New("the node's raft address does not present a certificate of the cluster CA")
