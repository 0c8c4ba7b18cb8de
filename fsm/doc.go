// Package fsm is Spine's replicated job state machine.
//
// It is pure: it knows jobs, streams, leases, attempts, events and blobs, and
// nothing about networks or clocks. Every change arrives as a typed command
// (one type byte followed by a versioned binary body, see codec.go) that the
// Raft leader has already
// stamped with the time, the new ids and the lease tokens, so applying the
// same log on any node gives the same state.
//
// State lives in go-memdb. Its indexes answer the hot questions in O(log n):
// "the oldest queued job of stream S for target T" (the queue index) and
// "running jobs whose lease expires before T" (the lease index). Readers take
// a read transaction, which is an immutable snapshot; watch channels from
// those reads drive long-poll claims.
package fsm
