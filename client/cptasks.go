package client

import (
	"context"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
)

// The control plane's task API (/v1/tasks/..., seed 003's state machine):
// claimed → running by an explicit start, complete only once running.

// ControlTask is a job as the task API shows it: State in the seed's
// vocabulary (api.StateClaimed…), Status the canonical one.
type ControlTask = api.ControlTask

// ControlTaskClaimParams is a claim for an agent (worker id).
type ControlTaskClaimParams = api.ControlTaskClaimRequest

// TaskStepParams are the lease and the fields of one step.
type TaskStepParams = api.TaskStepRequest

// Task steps, for ControlTaskStep.
const (
	StepStart     = "start"
	StepHeartbeat = "heartbeat"
	StepComplete  = "complete"
	StepFail      = "fail"
	StepRelease   = "release"
)

// ControlTaskClaim claims the task GET /v1/tasks/next?agent_id= would name
// (queued|released → claimed), waiting up to p.MaxWaitMS; nil when none
// became ready. The answer carries the lease token. With a ClaimID a
// repeat answers the task the first claim took, so it is retried.
func (c *Client) ControlTaskClaim(ctx context.Context, p *ControlTaskClaimParams) (*ControlTask, error) {
	req, err := jsonRequest(http.MethodPost, "/v1/tasks/claim", p)
	if err != nil {
		return nil, err
	}
	req.write = true
	if p.ClaimID == "" {
		req.mode = retryUnsent
	}
	req.minTimeout = time.Duration(p.MaxWaitMS) * time.Millisecond
	var a api.ControlTaskClaim
	if _, _, err := c.call(ctx, req, &a); err != nil {
		return nil, err
	}
	return a.Task, nil
}

// ControlTaskGet reads a task.
func (c *Client) ControlTaskGet(ctx context.Context, id string) (*ControlTask, error) {
	var t ControlTask
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: registryPath("tasks", id)}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ControlTaskStep takes one step (StepStart, StepHeartbeat, StepComplete,
// StepFail, StepRelease) on a task under p's lease. A step the seed's
// state machine does not allow is an *APIError with code
// illegal_transition, From and To naming it; nothing changed. Start,
// heartbeat, and complete or fail under the lease token, answer a repeat
// as the first, so they are retried; a release only when it was certainly
// not applied.
func (c *Client) ControlTaskStep(ctx context.Context, id, step string, p *TaskStepParams) (*api.TaskStepAnswer, error) {
	req, err := jsonRequest(http.MethodPost, registryPath("tasks", id)+"/"+step, p)
	if err != nil {
		return nil, err
	}
	req.write = true
	switch step {
	case StepStart, StepHeartbeat:
	case StepComplete, StepFail:
		if p.LeaseToken == "" {
			req.mode = retryUnsent
		}
	default:
		req.mode = retryUnsent
	}
	var a api.TaskStepAnswer
	if _, _, err := c.call(ctx, req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}
