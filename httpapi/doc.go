// Package httpapi serves Spine's HTTP API on every node.
//
// It depends on two small interfaces it declares itself — Cluster (apply a
// command on the leader, find the leader, membership) and State (read the
// replicated job state) — so handlers are tested with httptest and fakes,
// without a cluster.
//
// A write that reaches a follower is forwarded, as the same HTTP request
// with the caller's credentials, to the leader's HTTP address. On the
// leader, the handler stamps the command with the time and any new ids and
// lease tokens, proposes it through Raft, and answers with the state machine's
// result. Reads are served locally once this node is sure its state is at
// least as new as the read demands (see docs/api.md, "Consistency of reads").
package httpapi
