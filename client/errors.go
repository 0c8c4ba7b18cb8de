package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/spine-queue/spine/api"
)

// Sentinel errors matched by [*APIError] with errors.Is.
var (
	// ErrBadRequest: 400, malformed JSON or an invalid field or parameter.
	ErrBadRequest = errors.New("bad request")
	// ErrUnauthorized: 401, no token or a token no role has.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: any 403 (forbidden, not_owner, target_mismatch).
	ErrForbidden = errors.New("forbidden")
	// ErrNotOwner: 403 not_owner, a claw acting on a job another role holds.
	ErrNotOwner = errors.New("not the job's owner")
	// ErrTargetMismatch: 403 target_mismatch, claiming a job targeted elsewhere.
	ErrTargetMismatch = errors.New("job targeted at another claimant")
	// ErrNotFound: 404, unknown job, blob or route.
	ErrNotFound = errors.New("not found")
	// ErrConflict: any 409 (illegal_transition, stale_lease, max_attempts).
	ErrConflict = errors.New("conflict")
	// ErrIllegalTransition: 409 illegal_transition, the job's state does not allow the call.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrStaleLease: 409 stale_lease, the lease token or attempt id is not the current one.
	ErrStaleLease = errors.New("stale lease")
	// ErrMaxAttempts: 409 max_attempts, a claim found the job out of attempts (now dead).
	ErrMaxAttempts = errors.New("max attempts reached")
	// ErrTooLarge: 413, body or blob over the server's limit.
	ErrTooLarge = errors.New("too large")
	// ErrNoLeader: 503 no_leader, the cluster has no known leader.
	ErrNoLeader = errors.New("no leader")
	// ErrOutcomeUnknown: 503 outcome_unknown, the write was proposed but its fate is unknown.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrResultMismatch: 400 result_mismatch, a complete whose result does
	// not match the job's resultSchema; the job still runs under the same
	// lease. [ResultMismatches] lists every mismatch.
	ErrResultMismatch = errors.New("result does not match the job's resultSchema")
)

// Error codes of the API (the "code" of an error answer; see package api).
const (
	CodeInvalidJSON       = api.CodeInvalidJSON
	CodeInvalidRequest    = api.CodeInvalidRequest
	CodeUnauthorized      = api.CodeUnauthorized
	CodeForbidden         = api.CodeForbidden
	CodeNotOwner          = api.CodeNotOwner
	CodeTargetMismatch    = api.CodeTargetMismatch
	CodeWorkerIDTaken     = api.CodeWorkerIDTaken
	CodeNotFound          = api.CodeNotFound
	CodeMethodNotAllowed  = api.CodeMethodNotAllowed
	CodeIllegalTransition = api.CodeIllegalTransition
	CodeStaleLease        = api.CodeStaleLease
	CodeMaxAttempts       = api.CodeMaxAttempts
	CodeNotYetClaimable   = api.CodeNotYetClaimable
	CodeTooLarge          = api.CodeTooLarge
	CodeNoLeader          = api.CodeNoLeader
	CodeOutcomeUnknown    = api.CodeOutcomeUnknown
	CodeInternal          = api.CodeInternal
	CodeResultMismatch    = api.CodeResultMismatch
	CodeUnsupportedSchema = api.CodeUnsupportedSchema
)

// APIError is a non-2xx answer from a node.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the machine-readable error code (see the Code constants);
	// empty when the answer had no JSON error body.
	Code string
	// Message is the human-readable explanation.
	Message string
	// Leader is the last known leader address a 503 no_leader answer named, if any.
	Leader string
	// Job is the job a 409 max_attempts answer carried, if any.
	Job *Job
	// Streams, on a 400 stream_required (a task claim without a stream),
	// are the streams with queued tasks.
	Streams []api.StreamQueue
	// From and To, on a 409 illegal_transition of the task API
	// (/v1/tasks), name the refused transition (api.StateClaimed…).
	From, To string
	// Mismatches, on a 400 result_mismatch (a complete whose result does
	// not match the job's resultSchema), lists every mismatch.
	Mismatches []api.ResultMismatch

	header http.Header // of the answer, for Retry-After
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (%d %s)", msg, e.Status, e.Code)
	}
	return fmt.Sprintf("%s (%d)", msg, e.Status)
}

// Is maps the status and code to the package's sentinel errors.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Status == http.StatusBadRequest
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotOwner:
		return e.Code == CodeNotOwner
	case ErrTargetMismatch:
		return e.Code == CodeTargetMismatch
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrIllegalTransition:
		return e.Code == CodeIllegalTransition
	case ErrStaleLease:
		return e.Code == CodeStaleLease
	case ErrMaxAttempts:
		return e.Code == CodeMaxAttempts
	case ErrTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case ErrNoLeader:
		return e.Code == CodeNoLeader
	case ErrOutcomeUnknown:
		return e.Code == CodeOutcomeUnknown
	case ErrResultMismatch:
		return e.Code == CodeResultMismatch
	}
	return false
}

// newAPIError builds the error for a non-2xx answer from its status and body.
func newAPIError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var eb api.ErrorBody
	if json.Unmarshal(body, &eb) == nil && (eb.Error.Code != "" || eb.Error.Message != "") {
		e.Code, e.Message, e.Leader, e.Job, e.Streams = eb.Error.Code, eb.Error.Message, eb.Error.Leader, eb.Error.Job, eb.Error.Streams
		e.From, e.To, e.Mismatches = eb.Error.From, eb.Error.To, eb.Error.Mismatches
		return e
	}
	if len(body) > 200 {
		body = body[:200]
	}
	e.Message = string(body)
	return e
}

// JobError is a structured failure of a job attempt. A [Worker] handler
// returns one to choose the code and whether the failure is retryable; it is
// also the shape of a job's "error" field.
type JobError = api.JobError
