package api

import "time"

// Health is a node's answer of GET /health: its role and Raft position and
// the counters docs/api.md describes. The fields are in the order the
// server writes them (by name).
type Health struct {
	AppliedIndex uint64 `json:"applied_index"`
	// ClaimWaiters: worker claims waiting in a long poll on this node.
	ClaimWaiters int64  `json:"claim_waiters"`
	CommitIndex  uint64 `json:"commit_index"`
	// CPUSeconds is the node process's user and system CPU time; nil when
	// the node does not report it.
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"`
	// HashChecks, HashIndex, HashMismatches: see [ClusterStatus].
	HashChecks     uint64 `json:"hash_checks"`
	HashIndex      uint64 `json:"hash_index"`
	HashMismatches uint64 `json:"hash_mismatches"`
	// LastContact is when this node last heard from the leader (now, on
	// the leader); zero if never.
	LastContact time.Time `json:"last_contact,omitzero"`
	LeaderAddr  string    `json:"leader_addr"`
	LeaderID    string    `json:"leader_id"`
	// LeaseMisses: answers from this node's own state withheld because its
	// read lease (leader) or its contact with the leader (follower) ran out
	// while it read.
	LeaseMisses uint64 `json:"lease_misses"`
	// LocalHeartbeats: heartbeats this node answered from its own state.
	LocalHeartbeats uint64 `json:"local_heartbeats"`
	// LogAppendSeconds, LogBatches, LogEntries, LogWritesOverlapped: see
	// [ClusterStatus].
	LogAppendSeconds    float64 `json:"log_append_seconds"`
	LogBatches          uint64  `json:"log_batches"`
	LogEntries          uint64  `json:"log_entries"`
	LogWritesOverlapped uint64  `json:"log_writes_overlapped"`
	// MCPSessions: MCP sessions (/mcp) open on this node.
	MCPSessions int `json:"mcp_sessions"`
	// MuxConnections: clients' multiplexed connections this node serves.
	MuxConnections int    `json:"mux_connections"`
	NodeID         string `json:"node_id"`
	OK             bool   `json:"ok"`
	// Role is "leader", "follower" or "candidate".
	Role string `json:"role"`
	// State is the Raft state: "Leader", "Follower", "Candidate" or "Shutdown".
	State     string `json:"state"`
	StateHash string `json:"state_hash"`
	Term      uint64 `json:"term"`
	// Time is the node's clock when it answered.
	Time time.Time `json:"time"`
	// TimerSlackNS is the node process's timer slack in nanoseconds; nil
	// when unknown (off Linux).
	TimerSlackNS *int64 `json:"timer_slack_ns,omitempty"`
}

// Member names a node joining the cluster: the body of POST /cluster/join.
type Member struct {
	NodeID     string `json:"node_id"`     // required
	RaftAddr   string `json:"raft_addr"`   // host:port, required
	HTTPAddr   string `json:"http_addr"`   // advertised HTTP base URL
	GossipAddr string `json:"gossip_addr"` // memberlist host:port
	// GossipProof proves the joining node holds a gossip key of the
	// cluster (required when gossip is encrypted): base64 HMAC-SHA256 of
	// "spine-join:"+node_id under the key.
	GossipProof string `json:"gossip_proof,omitempty"`
	// RaftTransport is the version of Spine's binary raft protocol the
	// node serves (absent: hashicorp/raft's msgpack only), so the leader
	// dials it in that protocol from the first AppendEntries.
	RaftTransport int `json:"raft_transport,omitempty"`
}

// KeyringAnswer is a node's gossip keyring (GET /v1/keyring and the
// answer of a change): its keys by fingerprint, the primary first.
type KeyringAnswer struct {
	NodeID    string    `json:"node_id"`
	Encrypted bool      `json:"encrypted"`
	Keys      []KeyInfo `json:"keys"`
}

// KeyInfo names one key without revealing it.
type KeyInfo struct {
	Fingerprint string `json:"fingerprint"`
	Primary     bool   `json:"primary"`
}

// KeyringRequest is the body of POST /v1/keyring/{op}: a base64 key.
type KeyringRequest struct {
	Key string `json:"key"`
}

// ClusterRemoveRequest is the body of POST /cluster/remove.
type ClusterRemoveRequest struct {
	NodeID string `json:"node_id"`
}

// ClusterTransferRequest is the body of POST /cluster/transfer-leader.
type ClusterTransferRequest struct {
	// To is the node to hand leadership to; "" lets Raft pick a voter.
	To string `json:"to,omitempty"`
}

// ClusterLeader names the leader in a [ClusterStatus].
type ClusterLeader struct {
	ID       string `json:"id"`        // "" if unknown
	HTTPAddr string `json:"http_addr"` // "" if unknown
}

// ClusterNode is one server of the Raft configuration in a [ClusterStatus].
type ClusterNode struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`   // "" if not known yet
	GossipAddr string `json:"gossip_addr"` // "" if not known yet
	// Suffrage is "voter", "nonvoter" or "staging".
	Suffrage string `json:"suffrage"`
	// Alive: memberlist sees the node alive and raft does not say
	// otherwise (the leader has heard from it, or it is the leader this
	// node hears from, within about a second); always true for the
	// answering node itself.
	Alive bool `json:"alive"`
	// HashIndex and StateHash are the node's latest state hash as it
	// gossiped it; absent if unknown.
	HashIndex uint64 `json:"hash_index,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
	// SupportedLevel is the highest cluster level the node's build
	// supports, as it gossiped it; absent if unknown (not heard from
	// yet). The cluster's level rises to the lowest of them.
	SupportedLevel *int `json:"supported_level,omitempty"`
}

// ClusterStatus is a node's view of the cluster: the answer of GET
// /cluster/status and of the membership calls.
type ClusterStatus struct {
	Leader ClusterLeader  `json:"leader"`
	Nodes  []*ClusterNode `json:"nodes"`
	// Term is the current Raft term.
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	NodeID       string `json:"node_id"`
	// State is "Leader", "Follower", "Candidate" or "Shutdown".
	State string `json:"state"`
	// LastContact is the time since the leader was last heard from, as a Go
	// duration ("0s" on the leader, "never" if never).
	LastContact string `json:"last_contact"`
	// LogBatches and LogEntries count the batches Raft appended to this
	// node's log since it started (one write and one fsync each) and the
	// entries in them; LogAppendSeconds is the time those took.
	// LogWritesOverlapped counts the batches this node, as leader, wrote
	// while they were already being replicated.
	LogBatches          uint64  `json:"log_batches"`
	LogEntries          uint64  `json:"log_entries"`
	LogAppendSeconds    float64 `json:"log_append_seconds"`
	LogWritesOverlapped uint64  `json:"log_writes_overlapped"`
	// HashIndex and StateHash are the node's running hash of the commands
	// it has applied, and the index of the last one: equal on nodes that
	// applied the same log up to the same index. HashChecks counts peers'
	// gossiped hashes compared with it at the same index; HashMismatches
	// those that differed (the replicas diverged): it must be 0.
	HashIndex      uint64 `json:"hash_index"`
	StateHash      string `json:"state_hash"`
	HashChecks     uint64 `json:"hash_checks"`
	HashMismatches uint64 `json:"hash_mismatches"`
	// Level is the cluster level in this node's state: the rules and
	// features in force (docs/operations.md, "Cluster level"). The leader
	// raises it once every node runs a build that supports it (each
	// node's SupportedLevel).
	Level int `json:"level"`
}

// ClusterNodes is the answer of GET /cluster/nodes (any token): every
// node's API address, whether gossip sees it alive, and which leads.
type ClusterNodes struct {
	Leader string     `json:"leader"`
	Nodes  []NodeAddr `json:"nodes"`
}

// NodeAddr is one node of ClusterNodes.
type NodeAddr struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	Alive    bool   `json:"alive"`
	Leader   bool   `json:"leader"`
}
