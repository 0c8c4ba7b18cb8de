// Package client is the Go client of Spine, a Raft-replicated job queue for
// AI-agent workers. It speaks the HTTP API described in docs/api.md. Of the
// rest of the Spine module it imports only package api, the contract it
// shares with the server (its Job, JobError, WorkerClaim, … are aliases of
// api's types, and the Code and Header constants are api's), and api/wire,
// the framing of the multiplexed connection below; both import only the
// standard library, and nothing of the server.
//
// # Talking to a cluster
//
// [New] takes the base URLs of one or more nodes ("seed" addresses). Any node
// accepts any request — a follower forwards writes to the leader — so
// correctness never depends on which node answers. The client still learns
// the leader's address (from the X-Spine-Leader / X-Spine-Node headers and
// GET /health) and sends writes there to save the forwarding hop. On a
// network error it rotates to the next seed address.
//
// # One connection per node
//
// By default the requests of all of a Client's goroutines share one
// multiplexed connection per node (GET /mux, Upgrade: spine-mux/1; see
// docs/api.md): each request still carries the token and is answered
// exactly as over HTTP, but requests in flight together share reads and
// writes on both sides, which costs the client and the cluster markedly
// less CPU per request than an HTTP/1.1 connection per goroutine. Blob
// uploads and downloads, https addresses and nodes that refuse the upgrade
// (an older version, a proxy) are served over plain HTTP instead. To use
// plain HTTP throughout, pass [WithHTTPClient].
//
// # Retries
//
// Requests are retried with exponential backoff and full jitter, bounded by
// [RetryPolicy] and the caller's context, on network errors and on 503
// answers (no_leader, outcome_unknown), honouring Retry-After. A request is
// only retried when a repeat cannot do harm:
//
//   - Reads, heartbeats and cluster join/remove are always retried.
//   - [Client.JobCreate] always sends an Idempotency-Key (a fresh UUID when
//     the caller gives none), so a repeated create answers the first job.
//   - [Client.JobComplete] and [Client.JobFail] are retried when they carry
//     a lease token: the server answers a repeat under the same token as
//     the first. [Client.JobRelease] is retried only with both a lease token
//     and an attempt id. If a retry after an unknown outcome is refused with
//     409 (the first try did land, on a server that does not recognise the
//     repeat) and the attempt id is known, the client re-reads the job's
//     attempts and reports success when the attempt ended the way this call
//     would have ended it.
//     The worker-contract calls ([Client.WorkerComplete], [Client.WorkerFail])
//     behave the same way.
//   - [Client.JobClaim] and [Client.WorkerClaim] are retried only when the
//     request certainly never reached a leader (connection refused,
//     no_leader). After outcome_unknown or a lost answer they return the
//     error: a retry could claim a second job.
//
// # Errors
//
// Every non-2xx answer becomes an [*APIError]. Match it with errors.Is
// against the sentinels ([ErrNotFound], [ErrConflict], [ErrStaleLease], …)
// or inspect it with errors.As.
//
// # Workers
//
// [Worker] runs the worker contract v1 loop: long-poll claim, run a handler
// under a context that is cancelled if the lease is lost, heartbeat while it
// runs, then complete or fail the attempt.
package client
