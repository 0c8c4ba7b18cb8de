package clusterinfo

// LeaderInfo names the current leader in Status.
type LeaderInfo struct {
	// ID is the leader's node id, "" if unknown.
	ID string `json:"id"`
	// HTTPAddr is the leader's advertised HTTP URL, "" if unknown.
	HTTPAddr string `json:"http_addr"`
}

// NodeStatus is one server of the raft configuration in Status.
type NodeStatus struct {
	// ID is the node id.
	ID string `json:"id"`
	// RaftAddr is the raft address from the configuration.
	RaftAddr string `json:"raft_addr"`
	// HTTPAddr is the advertised HTTP URL ("" if not known yet).
	HTTPAddr string `json:"http_addr"`
	// GossipAddr is the memberlist address ("" if not known yet).
	GossipAddr string `json:"gossip_addr"`
	// Suffrage is "voter", "nonvoter" or "staging".
	Suffrage string `json:"suffrage"`
	// Alive is true if memberlist sees the node alive and Raft does not say
	// otherwise (reach.go): the leader counts a follower that has not
	// answered its AppendEntries for about a second as not alive; a follower
	// counts so the leader once it has not heard from it that long, and the
	// nodes the leader gossips as not answering. Always true for self.
	Alive bool `json:"alive"`
	// HashIndex and StateHash are the node's latest state hash as it
	// gossiped it (this node's own, current, for self); absent if unknown.
	HashIndex uint64 `json:"hash_index,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
	// SupportedLevel is the highest cluster level the node's build
	// supports, as it gossiped it (this node's own for self); nil if
	// unknown (not heard from yet).
	SupportedLevel *int `json:"supported_level,omitempty"`
}

// Status is this node's view of the cluster, served by GET /cluster/status.
type Status struct {
	// Leader is the current leader, as this node knows it.
	Leader LeaderInfo `json:"leader"`
	// Nodes is the raft configuration joined with gossip metadata.
	Nodes []NodeStatus `json:"nodes"`
	// Term is the current raft term.
	Term uint64 `json:"term"`
	// CommitIndex is the highest log index known committed.
	CommitIndex uint64 `json:"commit_index"`
	// AppliedIndex is the highest index applied to the local FSM.
	AppliedIndex uint64 `json:"applied_index"`
	// NodeID is this node's id.
	NodeID string `json:"node_id"`
	// State is "Leader", "Follower", "Candidate" or "Shutdown".
	State string `json:"state"`
	// LastContact is the time since the leader was last heard from, as a
	// Go duration ("0s" on the leader, "never" if never).
	LastContact string `json:"last_contact"`
	// LogBatches and LogEntries count, since this process started, the
	// batches raft appended to this node's log (one write and one fsync
	// each) and the entries in them: entries per batch is how much group
	// commit is saving.
	LogBatches uint64 `json:"log_batches"`
	LogEntries uint64 `json:"log_entries"`
	// LogAppendSeconds is the time those batches took to write and fsync:
	// divided by LogBatches, the disk's cost of one durable append.
	LogAppendSeconds float64 `json:"log_append_seconds"`
	// LogWritesOverlapped counts the batches this node, as leader, wrote to
	// its log while they were being replicated instead of before (always 0
	// with SerialLogWrite).
	LogWritesOverlapped uint64 `json:"log_writes_overlapped"`
	// HashIndex and StateHash are this node's running hash of the commands
	// it has applied, and the index of the last one: equal on two nodes
	// that have applied the same log up to the same index ("" if the state
	// machine keeps none, or it is unknown after restoring a snapshot of a
	// build without it).
	HashIndex uint64 `json:"hash_index"`
	StateHash string `json:"state_hash"`
	// HashChecks counts the peers' gossiped state hashes this node
	// compared with its own at the same index; HashMismatches those that
	// differed. A mismatch means the replicas diverged: it is logged at
	// error level and must stay 0.
	HashChecks     uint64 `json:"hash_checks"`
	HashMismatches uint64 `json:"hash_mismatches"`
}

// Member identifies a node for membership changes and join requests. Its JSON
// form is the body of POST /cluster/join.
type Member struct {
	// ID is the node's raft server id and memberlist name.
	ID string `json:"node_id"`
	// RaftAddr is the node's raft transport address (host:port).
	RaftAddr string `json:"raft_addr"`
	// HTTPAddr is the node's advertised HTTP base URL.
	HTTPAddr string `json:"http_addr"`
	// GossipAddr is the node's memberlist address (host:port).
	GossipAddr string `json:"gossip_addr"`
	// GossipProof, on a join, proves the node holds a gossip key of the
	// cluster's ring (keyring.go); required when gossip is encrypted.
	GossipProof string `json:"gossip_proof,omitempty"`
	// Transport, on a join, is the binary raft protocol version the node
	// serves (0: msgpack only), until its gossip says so.
	Transport uint8 `json:"raft_transport,omitempty"`
}
