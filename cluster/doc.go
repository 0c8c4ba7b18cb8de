// Package cluster owns Spine's replication machinery: the *raft.Raft, its
// log and stable store (raft-wal by default, raft-boltdb/v2 selectable; fsync
// always on), the file snapshot store, the TCP transport, memberlist gossip,
// the join flow and the leader loop. On the leader, a batch is written to the
// log while it replicates rather than before (overlap.go); nothing it makes
// visible gets past the leader's own fsync. It knows nothing about jobs: it replicates opaque []byte commands into
// the raft.FSM it is given and hands back the FSM's response.
//
// Nothing outside this package holds a *raft.Raft. Callers use a *Node:
//
//   - Apply proposes a command on the leader and reports honest errors:
//     ErrNotLeader when nothing was proposed, ErrOutcomeUnknown when the
//     command was proposed but its fate is unknown.
//   - IsLeader, VerifyLeader, ConsistentIndex and WaitForApplied implement
//     consistent reads: a leader serves only after its post-election Barrier,
//     confirms leadership per read, and reads state applied up to the commit
//     index it observed.
//   - AddVoter, RemoveServer and TransferLeadership change membership
//     idempotently; Status reports the raft configuration joined with gossip.
//   - RunWhileLeader registers work (such as the lease reaper) that runs only
//     while this node is the ready leader.
//
// Gossip (memberlist) carries each node's id, Raft address and HTTP address so
// any node can name the leader's HTTP URL; the set of known peers is persisted
// to DataDir/peers.json so a restarted node can find the cluster again.
package cluster
