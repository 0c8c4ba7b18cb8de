// Package fsm is Spine's replicated job state machine.
//
// It is pure: it knows jobs, streams, leases, attempts, events and blobs, and
// nothing about networks or clocks. Every change arrives as a typed command
// (one type byte followed by a versioned binary body, see codec.go) that the
// Raft leader has already
// stamped with the time, the new ids and the lease tokens, so applying the
// same log on any node gives the same state.
//
// State lives in copy-on-write B-trees (store.go), one per question the
// state machine asks, each answering in O(log n): "the oldest queued job of
// stream S for target T" (the queue index), "running jobs whose lease
// expires before T" (the lease index), jobs by id, by idempotency key, by
// state and by finish time. The apply goroutine changes its own copy; an
// immutable view of it is published when a reader needs state newer than the
// last one (see FSM.current), and readers and snapshots use a view without
// locks. Long-poll claims wait on a Watch that fires when a job
// enters one of their queue lanes.
package fsm
