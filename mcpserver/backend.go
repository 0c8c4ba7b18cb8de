package mcpserver

import (
	"context"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// Backend is what the tools need of the cluster: the queue's operations
// (claim, heartbeat, complete, fail, release, cancel, create, read) under
// the identity of the session's agent, answered in the API's types
// (package api; the client's names are aliases of them). A refusal is a
// *client.APIError with the API's status and code, so that a tool says the
// same thing whichever backend answered.
//
// There are two. A *client.Client is one: `spine mcp` over stdio reaches a
// cluster from outside, as any client does. The node's /mcp (package
// httpapi) has one that calls the node's queue service directly with the
// caller's role, sending a write to the leader when the node is a
// follower.
type Backend interface {
	Streams(ctx context.Context) ([]api.StreamInfo, error)
	Stream(ctx context.Context, name string) (*api.StreamInfo, error)
	SkillMD(ctx context.Context) ([]byte, error)

	JobCreate(ctx context.Context, params *api.JobCreateRequest) (*api.Job, error)
	JobGet(ctx context.Context, id string) (*api.Job, error)
	JobList(ctx context.Context, params *client.JobListParams) (*api.JobList, error)
	JobEvents(ctx context.Context, id string) ([]*api.JobEvent, error)
	JobAttempts(ctx context.Context, id string) ([]*api.JobAttempt, error)
	JobComment(ctx context.Context, id, text string) (*api.Job, error)
	JobCancel(ctx context.Context, id, reason string) (*api.Job, error)
	DLQRedrive(ctx context.Context, id string) (*api.Job, error)
	TaskRequeue(ctx context.Context, id, stream string) (*api.Task, error)
	ClusterStatus(ctx context.Context) (*api.ClusterStatus, error)

	// Named tokens (head): create (the answer carries the secret, once),
	// list, revoke.
	TokenCreate(ctx context.Context, params *api.TokenCreateRequest) (*api.TokenCreated, error)
	Tokens(ctx context.Context) ([]api.Token, error)
	TokenRevoke(ctx context.Context, name string) (*api.Token, error)

	WorkerClaim(ctx context.Context, params *client.WorkerClaimParams) (*api.WorkerClaim, error)
	WorkerHeld(ctx context.Context, workerID string) ([]api.WorkerClaim, error)
	WorkerHeartbeat(ctx context.Context, params *api.WorkerHeartbeatRequest) (*api.WorkerHeartbeatResult, error)
	WorkerComplete(ctx context.Context, params *api.WorkerCompleteRequest) (*api.WorkerAck, error)
	WorkerFail(ctx context.Context, params *api.WorkerFailRequest) (*api.WorkerAck, error)
	WorkerRelease(ctx context.Context, params *api.WorkerReleaseRequest) (*api.WorkerAck, error)

	// Addrs names the nodes the backend reaches, for the advice of a
	// tool that could not reach them.
	Addrs() []string
}

// The Go client is the backend of `spine mcp`.
var _ Backend = (*client.Client)(nil)
