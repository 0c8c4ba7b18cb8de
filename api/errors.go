package api

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Error codes: the "code" of an error answer ([ErrorDetail]). Each comes
// with one HTTP status; docs/api.md has the table.
const (
	// CodeInvalidJSON: 400, the body is not well-formed JSON.
	CodeInvalidJSON = "invalid_json"
	// CodeInvalidRequest: 400, a missing or invalid field, header or query
	// parameter.
	CodeInvalidRequest = "invalid_request"
	// CodeUnauthorized: 401, no token, or a token no role has.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: 403, the caller's role may not call this route.
	CodeForbidden = "forbidden"
	// CodeNotOwner: 403, a claw acting on a job another role holds (head
	// overrides).
	CodeNotOwner = "not_owner"
	// CodeTargetMismatch: 403, a claw claiming a job targeted at someone else.
	CodeTargetMismatch = "target_mismatch"
	// CodeWorkerIDTaken: 403, a claw naming a worker id that belongs to
	// another role.
	CodeWorkerIDTaken = "worker_id_taken"
	// CodeNotFound: 404, unknown job, blob, node or route.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: 405, a known route called with the wrong method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeIllegalTransition: 409, the job's state does not allow the call
	// (complete a queued job).
	CodeIllegalTransition = "illegal_transition"
	// CodeStaleLease: 409, the lease token or attempt id is not the job's
	// current one (fencing).
	CodeStaleLease = "stale_lease"
	// CodeMaxAttempts: 409, a claim found the job out of attempts; it is now
	// dead.
	CodeMaxAttempts = "max_attempts"
	// CodeTooLarge: 413, a body, blob or replicated command over its limit.
	CodeTooLarge = "too_large"
	// CodeNoLeader: 503, no leader is known, or the node lost leadership
	// before proposing: the request was not applied and retrying is safe.
	// The answer has Retry-After and names the last known leader if any.
	CodeNoLeader = "no_leader"
	// CodeOutcomeUnknown: 503, the write was proposed but its fate is
	// unknown; retry at once with the same idempotency key or lease token.
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeUnsupportedMediaType: 415, a body sent as something other than
	// JSON (Content-Type must be application/json, or absent).
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeHeadersTooLarge: 431, the request's headers are over the limit.
	CodeHeadersTooLarge = "headers_too_large"
	// CodeRequestTimeout: 408, the request's body did not arrive within
	// the server's read timeout; nothing was done.
	CodeRequestTimeout = "request_timeout"
	// CodeNotImplemented: 501, a request framed in a way the server does
	// not take (a Transfer-Encoding other than chunked).
	CodeNotImplemented = "not_implemented"
	// CodeInternal: 500, a bug.
	CodeInternal = "internal"
)

// ErrorBody is the JSON body of every non-2xx answer:
//
//	{"error":{"code":"illegal_transition","message":"…","job":{…}}}
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the "error" of an [ErrorBody], and of a refused worker call
// ([WorkerRefusal]).
type ErrorDetail struct {
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Message explains the error to a human.
	Message string `json:"message"`
	// Leader is, on a 503, the leader's HTTP address as the node last knew
	// it; omitted when it knows none.
	Leader string `json:"leader,omitempty"`
	// Job is the job's current view on a refusal that concerns one
	// (illegal_transition, stale_lease, not_owner, max_attempts); omitted
	// otherwise.
	Job *Job `json:"job,omitempty"`
	// Streams, on stream_required, lists the streams with queued tasks.
	Streams []StreamQueue `json:"streams,omitzero"`
	// From and To, on an illegal_transition of the task API (/v1/tasks),
	// are the refused transition in the task states (StateRunning…).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Mismatches, on result_mismatch, lists every way the result does not
	// match the job's resultSchema.
	Mismatches []ResultMismatch `json:"mismatches,omitzero"`
}

// FieldError is a field of a request body whose value does not have the
// form the API gives it: Field is its JSON name, Want what it must be.
// The server answers it as 400 invalid_request.
type FieldError struct {
	Field string
	Want  string
	// Got is the value as sent (JSON), when it is worth echoing.
	Got string
}

func (e *FieldError) Error() string {
	if e.Got != "" {
		return e.Field + " must be " + e.Want + ", not " + e.Got
	}
	return e.Field + " must be " + e.Want
}

// JobError is a structured failure of a job attempt: the "error" of a job, of
// an attempt, and of a fail request. A Go worker returns one to choose the
// failure's code and whether it is worth retrying.
type JobError struct {
	// Code is a machine-readable failure code chosen by the worker.
	Code string `json:"code,omitempty"`
	// Message says what went wrong.
	Message string `json:"message"`
	// Stack is a stack trace or log excerpt.
	Stack string `json:"stack,omitempty"`
	// Retryable is whether another attempt may succeed. In the worker
	// contract it decides whether the job is requeued.
	Retryable bool `json:"retryable"`
}

// Error renders the error as "code: message", or the message alone.
func (e *JobError) Error() string {
	if e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return e.Message
}

// UnmarshalJSON accepts the object form and the plain-text form a v0 fail
// may carry ("error": "text", which is {"message": "text"}). Any other JSON
// value is an *json.UnmarshalTypeError.
func (e *JobError) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = JobError{Message: s}
		return nil
	}
	type plain JobError
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		// Name the whole value, not a field inside it: the decoder of the
		// enclosing body adds the field's name.
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[JobError]()}
	}
	*e = JobError(p)
	return nil
}

// jsonKind names the kind of the JSON value b as encoding/json's errors do.
func jsonKind(b []byte) string {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return "object"
		case '[':
			return "array"
		case '"':
			return "string"
		case 't', 'f':
			return "bool"
		case 'n':
			return "null"
		}
		return "number"
	}
	return "value"
}

// Error codes of the developer queue.
const (
	// CodeStreamEnded: 409, the stream is ended: it takes no new tasks and
	// hands out none.
	CodeStreamEnded = "stream_ended"
	// CodeStreamPaused: 409, an operator paused the stream: a claim by id
	// of its jobs is refused until it is resumed (claim-next skips it).
	CodeStreamPaused = "stream_paused"
	// CodeMissingCapability: 409, a claim by id of a job that requires a
	// capability the claim did not name (JobClaimRequest.Capabilities).
	CodeMissingCapability = "missing_capability"
	// CodeNotYetClaimable: 409, a claim by id of a queued job scheduled for
	// later (its runAt: a schedule, a retry backoff or a release's
	// cooldown); the error's job has runAt, from when it can be claimed.
	CodeNotYetClaimable = "not_yet_claimable"
	// CodeAlreadyExists: 409, a session or stream with that name exists.
	CodeAlreadyExists = "already_exists"
	// CodeSessionEnded: 409, the session is ended: it takes no new streams.
	CodeSessionEnded = "session_ended"
	// CodeStreamRequired: 400, a claim named no stream; the answer's
	// "streams" lists the streams with queued tasks.
	CodeStreamRequired = "stream_required"
	// CodeUpgradeInProgress: 503, some node of the cluster runs a version
	// that cannot apply the request yet; retry when the upgrade is done.
	CodeUpgradeInProgress = "upgrade_in_progress"
	// CodeNoHealthyGateway: 503, no healthy gateway with free capacity meets
	// a route's requirements; nothing was routed (retry when one is).
	CodeNoHealthyGateway = "no_healthy_gateway"
	// CodeCommentLimit: 409, the job has as many comments (100), or as much
	// comment text (256 KiB), as a job keeps; nothing was added.
	CodeCommentLimit = "comment_limit"
	// CodeTooManySessions: 429, the token (or the node) has as many MCP
	// sessions open as it may; the answer has Retry-After.
	CodeTooManySessions = "too_many_sessions"
)

// ValueKind names the kind of a JSON value in a caller's terms ("an
// object", "a list", "a string", "true or false", "null", "a number";
// "nothing" for no value), for messages about what a request sent.
func ValueKind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// Error codes of result contracts (a job's resultSchema).
const (
	// CodeResultMismatch: 400, a complete whose result does not match the
	// job's resultSchema; the answer's "mismatches" lists every one. The
	// job stays running under the same lease: fix the result and complete
	// again.
	CodeResultMismatch = "result_mismatch"
	// CodeUnsupportedSchema: 400, a resultSchema (of a job or a stream's
	// defaults) that is not JSON Schema of the supported subset, or is over
	// its size; the message names the keyword.
	CodeUnsupportedSchema = "unsupported_schema"
)

// ResultMismatch is one way a result does not match its job's
// resultSchema: Path is where in the result (a JSON Pointer, "" for the
// result itself), Expected what the schema asks there, Got what the result
// has. A complete refused with [CodeResultMismatch] lists every one.
type ResultMismatch struct {
	Path     string `json:"path"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
}
