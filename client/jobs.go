package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"

	"github.com/spine-queue/spine/api"
)

func jobPath(id string, verb string) string {
	p := "/jobs/" + url.PathEscape(id)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

// JobCreate creates a job (head only). It always sends an Idempotency-Key —
// params.IdempotencyKey, or a fresh UUID — so a retried create never makes a
// second job. When the key had been used before, the answer is the first
// job with Duplicate set.
func (c *Client) JobCreate(ctx context.Context, params *JobCreateParams) (*Job, error) {
	if params == nil || len(params.Payload) == 0 {
		return nil, errors.New("client: JobCreate: payload is required")
	}
	p := *params
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = uuid.NewString()
	}
	req, err := jsonRequest(http.MethodPost, "/jobs", &p)
	if err != nil {
		return nil, err
	}
	req.write = true
	req.header = http.Header{api.HeaderIdempotencyKey: {p.IdempotencyKey}}
	var job Job
	status, _, err := c.call(ctx, req, &job)
	if err != nil {
		return nil, err
	}
	job.Duplicate = status == http.StatusOK
	return &job, nil
}

// JobGet returns a job.
func (c *Client) JobGet(ctx context.Context, id string) (*Job, error) {
	var job Job
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: jobPath(id, "")}, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// JobList returns one page of jobs matching params (nil: all, first page).
func (c *Client) JobList(ctx context.Context, params *JobListParams) (*JobListResult, error) {
	q := url.Values{}
	if p := params; p != nil {
		setNonEmpty(q, "status", string(p.Status))
		setNonEmpty(q, "stream", p.Stream)
		setNonEmpty(q, "target", p.Target)
		setNonEmpty(q, "schedule", p.Schedule)
		setNonEmpty(q, "cursor", p.Cursor)
		if p.Limit > 0 {
			q.Set("limit", strconv.Itoa(p.Limit))
		}
		if p.Stale {
			q.Set("stale", "true")
		}
		if p.Consistent {
			q.Set("consistent", "true")
		}
	}
	var res JobListResult
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/jobs", query: q}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func setNonEmpty(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// JobClaim claims a queued job by id (claws). The answer carries the
// LeaseToken and AttemptID that fence the later calls. A claim is not
// retried once it may have reached the leader: after outcome_unknown or a
// lost answer the error is returned (ErrOutcomeUnknown, or the transport
// error), and the job may or may not be running under this caller.
func (c *Client) JobClaim(ctx context.Context, id string, params *JobClaimParams) (*Job, error) {
	if params == nil {
		params = &JobClaimParams{}
	}
	req, err := jsonRequest(http.MethodPost, jobPath(id, "claim"), params)
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, retryUnsent
	var job Job
	if _, _, err := c.call(ctx, req, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// JobHeartbeat extends the lease of a running job from now. It is
// idempotent and always retried.
func (c *Client) JobHeartbeat(ctx context.Context, id string, params *JobLeaseParams) (*Job, error) {
	if params == nil {
		params = &JobLeaseParams{}
	}
	req, err := jsonRequest(http.MethodPost, jobPath(id, "heartbeat"), params)
	if err != nil {
		return nil, err
	}
	req.write = true
	var job Job
	if _, _, err := c.call(ctx, req, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// JobComplete completes a running job. It is retried only when params
// carry a LeaseToken (see the package documentation).
func (c *Client) JobComplete(ctx context.Context, id string, params *JobCompleteParams) (*Job, error) {
	if params == nil {
		params = &JobCompleteParams{}
	}
	return c.attemptEnd(ctx, id, "complete", params, params.LeaseToken, params.AttemptID, OutcomeCompleted)
}

// JobFail fails a running job. It is retried only when params carry a
// LeaseToken.
func (c *Client) JobFail(ctx context.Context, id string, params *JobFailParams) (*Job, error) {
	if params == nil {
		params = &JobFailParams{}
	}
	return c.attemptEnd(ctx, id, "fail", params, params.LeaseToken, params.AttemptID, OutcomeFailed)
}

// JobRelease gives a running job back to the queue; the attempt does not
// count. It is retried only when params carry both LeaseToken and AttemptID.
func (c *Client) JobRelease(ctx context.Context, id string, params *JobReleaseParams) (*Job, error) {
	if params == nil {
		params = &JobReleaseParams{}
	}
	return c.attemptEnd(ctx, id, "release", params, params.LeaseToken, params.AttemptID, OutcomeReleased)
}

// attemptEnd sends complete/fail/release. A complete or fail with a lease
// token is retried (the server answers a repeat under the same token as
// the first), a release only with the attempt id too. If a retry after an
// unknown outcome is refused with 409 (a server that does not know the
// repeat), the attempt's recorded outcome tells whether the first try
// landed, when the attempt id is known.
func (c *Client) attemptEnd(ctx context.Context, id, verb string, body any, token, attemptID, outcome string) (*Job, error) {
	req, err := jsonRequest(http.MethodPost, jobPath(id, verb), body)
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, retryUnsent
	if token != "" && (attemptID != "" || outcome != OutcomeReleased) {
		req.mode = retrySafe
	}
	var job Job
	_, uncertain, err := c.call(ctx, req, &job)
	if err == nil {
		return &job, nil
	}
	if token != "" && attemptID != "" && uncertain && errors.Is(err, ErrConflict) {
		if ok, verr := c.attemptEndedAs(ctx, id, attemptID, outcome); verr == nil && ok {
			return c.JobGet(ctx, id)
		}
	}
	return nil, err
}

// attemptEndedAs reports whether the job's attempt attemptID ended with outcome.
func (c *Client) attemptEndedAs(ctx context.Context, jobID, attemptID, outcome string) (bool, error) {
	atts, err := c.JobAttempts(ctx, jobID)
	if err != nil {
		return false, err
	}
	for _, a := range atts {
		if a.ID == attemptID {
			return a.Outcome == outcome, nil
		}
	}
	return false, fmt.Errorf("client: job %s has no attempt %s", jobID, attemptID)
}

// JobComment attaches a note to a job.
func (c *Client) JobComment(ctx context.Context, id, text string) (*Job, error) {
	req, err := jsonRequest(http.MethodPost, jobPath(id, "comment"), &api.JobCommentRequest{Text: text})
	if err != nil {
		return nil, err
	}
	// A repeated comment would be added twice: retry only when unsent.
	req.write, req.mode = true, retryUnsent
	var job Job
	if _, _, err := c.call(ctx, req, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// JobCancel cancels a job (head): a queued job is cancelled at once; a
// running one is marked (Job.Cancel), its worker learns it from its next
// heartbeat answer, and the job ends cancelled once the worker fails or
// releases it, or its lease runs out. A repeat changes nothing, so the call
// is retried like any idempotent write.
func (c *Client) JobCancel(ctx context.Context, id, reason string) (*Job, error) {
	req, err := jsonRequest(http.MethodPost, jobPath(id, "cancel"), &api.JobCancelRequest{Reason: reason})
	if err != nil {
		return nil, err
	}
	req.write = true
	var job Job
	if _, _, err := c.call(ctx, req, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// JobEvents returns a job's history, oldest first.
func (c *Client) JobEvents(ctx context.Context, id string) ([]*JobEvent, error) {
	var res api.JobEventList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: jobPath(id, "events")}, &res); err != nil {
		return nil, err
	}
	return res.Events, nil
}

// JobAttempts returns a job's attempts, oldest first.
func (c *Client) JobAttempts(ctx context.Context, id string) ([]*JobAttempt, error) {
	var res api.JobAttemptList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: jobPath(id, "attempts")}, &res); err != nil {
		return nil, err
	}
	return res.Attempts, nil
}

// DLQList returns one page of failed and dead jobs (head).
func (c *Client) DLQList(ctx context.Context, params *DLQListParams) (*JobListResult, error) {
	q := url.Values{}
	if p := params; p != nil {
		setNonEmpty(q, "stream", p.Stream)
		setNonEmpty(q, "cursor", p.Cursor)
		if p.Limit > 0 {
			q.Set("limit", strconv.Itoa(p.Limit))
		}
	}
	var res JobListResult
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/dlq", query: q}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// DLQRedrive puts a failed or dead job back in the queue with its attempts
// reset (head). A retry refused with 409 after an unknown outcome answers
// the job if it is queued (the first try landed).
func (c *Client) DLQRedrive(ctx context.Context, id string) (*Job, error) {
	req := &request{method: http.MethodPost, path: "/dlq/" + url.PathEscape(id) + "/redrive", write: true}
	var job Job
	_, uncertain, err := c.call(ctx, req, &job)
	if err == nil {
		return &job, nil
	}
	if uncertain && errors.Is(err, ErrConflict) {
		if j, gerr := c.JobGet(ctx, id); gerr == nil && j.Status == JobStatusQueued {
			return j, nil
		}
	}
	return nil, err
}
