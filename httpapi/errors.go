package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster/clusterinfo"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// apiError is an error with the status and code (api.Code*; docs/api.md
// lists each with its status) it is answered with.
type apiError struct {
	Status  int
	Code    string
	Message string
	Leader  string   // leader's HTTP address, on 503
	Job     *api.Job // the job the refusal concerns, when useful
	// Streams, on stream_required, are the streams with queued tasks.
	Streams []api.StreamQueue
	// From and To name a refused transition of the task API.
	From, To string
	// Mismatches, on result_mismatch, are every way the result does not
	// match the job's resultSchema.
	Mismatches []api.ResultMismatch
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, code, format string, args ...interface{}) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...interface{}) *apiError {
	return errorf(http.StatusBadRequest, api.CodeInvalidRequest, format, args...)
}

// classify maps any error to the status and code it is answered with. This
// table is the only place that knows both fsm/cluster errors and statuses.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var (
		mbe     *http.MaxBytesError
		refusal *queue.Refusal
		input   *queue.InputError
		denied  *queue.ForbiddenError
		tooBig  *queue.TooLargeError
		needStr *queue.StreamRequiredError
		comment *queue.CommentLimitError
		// result contracts (queue/contract.go)
		mismatch  *queue.ResultMismatchError
		schemaErr *queue.SchemaError
	)
	switch {
	case errors.As(err, &needStr):
		ae := errorf(http.StatusBadRequest, api.CodeStreamRequired, "%s", needStr.Error())
		ae.Streams = []api.StreamQueue{}
		for _, q := range needStr.Queued {
			ae.Streams = append(ae.Streams, api.StreamQueue{Name: q.Name, Queued: q.Queued})
		}
		return ae
	case errors.As(err, &mismatch):
		ae := errorf(http.StatusBadRequest, api.CodeResultMismatch, "%s", mismatch.Error())
		ae.Mismatches = mismatch.Mismatches
		if mismatch.Job != nil {
			ae.Job = viewJob(mismatch.Job)
		}
		return ae
	case errors.As(err, &schemaErr):
		return errorf(http.StatusBadRequest, api.CodeUnsupportedSchema, "%s", schemaErr.Message)
	case errors.As(err, &comment):
		return errorf(http.StatusConflict, api.CodeCommentLimit, "%s", comment.Message)
	case errors.Is(err, queue.ErrTokenRefused):
		return errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%s", strings.TrimPrefix(err.Error(), queue.ErrTokenRefused.Error()+": "))
	case errors.Is(err, queue.ErrUpgradeInProgress):
		return errorf(http.StatusServiceUnavailable, api.CodeUpgradeInProgress, "%v", err)
	case errors.Is(err, fsm.ErrStreamEnded):
		return withJob(errorf(http.StatusConflict, api.CodeStreamEnded, "%v", err), err)
	case errors.Is(err, fsm.ErrStreamPaused):
		return withJob(errorf(http.StatusConflict, api.CodeStreamPaused, "%v", err), err)
	case errors.Is(err, fsm.ErrMissingCapability):
		return withJob(errorf(http.StatusConflict, api.CodeMissingCapability, "%v", err), err)
	case errors.Is(err, fsm.ErrNotYetClaimable):
		return withJob(notYetClaimable(err), err)
	case errors.Is(err, fsm.ErrNoHealthyGateway):
		return errorf(http.StatusServiceUnavailable, api.CodeNoHealthyGateway, "%v", err)
	case errors.Is(err, fsm.ErrExists):
		return errorf(http.StatusConflict, api.CodeAlreadyExists, "%v", err)
	case errors.Is(err, fsm.ErrEnded):
		return errorf(http.StatusConflict, api.CodeSessionEnded, "%v", err)
	case errors.As(err, &refusal):
		// The state machine refused: the error is the refusal's, and the
		// job it concerns goes with it.
		ae := classify(refusal.Err)
		if refusal.Job != nil {
			ae.Job = viewJob(refusal.Job)
		}
		return ae
	case errors.As(err, &denied):
		return errorf(http.StatusForbidden, api.CodeForbidden, "%s", denied.Message)
	case errors.As(err, &input):
		return errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%s", input.Message)
	case errors.As(err, &tooBig):
		return errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "%s", tooBig.Message)
	case errors.Is(err, queue.ErrLeadershipLost), errors.Is(err, queue.ErrNotLeader):
		return errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "%v", err)
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "request body over the limit of %d bytes", mbe.Limit)
	case errors.Is(err, fsm.ErrNotFound):
		return errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	case errors.Is(err, fsm.ErrIllegalTransition):
		ae := errorf(http.StatusConflict, api.CodeIllegalTransition, "%v", err)
		var te *fsm.TransitionError
		if errors.As(err, &te) && te.From != "" {
			ae.From, ae.To = string(te.From), string(te.To)
			ae.Message = fmt.Sprintf("illegal transition %s → %s: %v", te.From, te.To, err)
		}
		return ae
	case errors.Is(err, fsm.ErrStaleLease):
		return errorf(http.StatusConflict, api.CodeStaleLease, "%v", err)
	case errors.Is(err, fsm.ErrMaxAttempts):
		return errorf(http.StatusConflict, api.CodeMaxAttempts, "%v", err)
	case errors.Is(err, fsm.ErrNotOwner):
		return errorf(http.StatusForbidden, api.CodeNotOwner, "%v", err)
	case errors.Is(err, fsm.ErrTargetMismatch):
		return errorf(http.StatusForbidden, api.CodeTargetMismatch, "%v", err)
	case errors.Is(err, fsm.ErrNotAllowed):
		return errorf(http.StatusForbidden, api.CodeForbidden, "%v", err)
	case errors.Is(err, fsm.ErrWorkerIDTaken):
		return errorf(http.StatusForbidden, api.CodeWorkerIDTaken, "%v", err)
	case errors.Is(err, fsm.ErrInvalid):
		return errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err)
	case errors.Is(err, clusterinfo.ErrUnknownServer):
		return errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	// Outcome-unknown first: a proposal cut short by shutdown wraps both
	// ErrOutcomeUnknown and ErrShutdown, and must not read as "not applied".
	case errors.Is(err, clusterinfo.ErrOutcomeUnknown):
		return errorf(http.StatusServiceUnavailable, api.CodeOutcomeUnknown,
			"the write was proposed but its outcome is unknown (%v); retry with the same idempotency key or lease token", err)
	case errors.Is(err, clusterinfo.ErrNotLeader), errors.Is(err, clusterinfo.ErrNoLeader), errors.Is(err, clusterinfo.ErrShutdown):
		return errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "no leader is available to take the write: %v; retry shortly", err)
	}
	// A bug: what went wrong is in the node's log (writeError logs it),
	// never in the answer, which could name Go's types or the node's own
	// addresses.
	return errorf(http.StatusInternalServerError, api.CodeInternal,
		"internal error: the node logged what went wrong; please report it with this answer's %s and time", api.HeaderNode)
}

// notYetClaimable words the refusal of a claim by id of a scheduled job:
// that it is scheduled, and from when it can be claimed (its runAt, also
// in error.job).
func notYetClaimable(err error) *apiError {
	var refusal *queue.Refusal
	if !errors.As(err, &refusal) || refusal.Job == nil || refusal.Job.NotBefore == 0 {
		return errorf(http.StatusConflict, api.CodeNotYetClaimable, "%v", err)
	}
	j := refusal.Job
	return errorf(http.StatusConflict, api.CodeNotYetClaimable,
		"claim: job %s is scheduled: it can be claimed from its runAt, %s (a schedule, a retry backoff or a release's cooldown); claim it then, or claim the next job",
		j.ID, api.Time(j.NotBefore).Format(time.RFC3339Nano))
}

// withJob attaches the job of a refusal, if it has one.
func withJob(ae *apiError, err error) *apiError {
	var refusal *queue.Refusal
	if errors.As(err, &refusal) && refusal.Job != nil {
		ae.Job = viewJob(refusal.Job)
	}
	return ae
}

// jsonContentType is the Content-Type value every JSON answer shares (see
// leaderHeaders on sharing header values).
var jsonContentType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	if a, ok := v.(appender); ok {
		writeAppended(w, a.AppendJSON)
		return
	}
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// appender is an answer that encodes itself, byte for byte as encoding/json
// would, without its reflection: a job, a page of jobs, a worker's claim,
// complete and heartbeat (api's AppendJSON methods).
type appender interface{ AppendJSON([]byte) []byte }

// writeJob writes a job's answer as writeJSON does; j may live on the
// caller's stack.
func writeJob(w http.ResponseWriter, status int, j *api.Job) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	writeJobBody(w, j)
}

// writeJobBody writes j as the JSON encoder would (api.Job's AppendJSON:
// the same bytes without reflection), in a buffer the next answer reuses.
func writeJobBody(w http.ResponseWriter, j *api.Job) { writeAppended(w, j.AppendJSON) }

// writeAppended writes what appendJSON appends, and a newline, through a
// pooled buffer.
func writeAppended(w http.ResponseWriter, appendJSON func([]byte) []byte) {
	bp := answerBufs.Get().(*[]byte)
	b := append(appendJSON((*bp)[:0]), '\n')
	_, _ = w.Write(b)
	if cap(b) <= maxPooledAnswer {
		*bp = b
		answerBufs.Put(bp)
	}
}

// answerBufs are the buffers answers are encoded in; one larger than
// maxPooledAnswer is left to the collector.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledAnswer is the largest answer buffer kept (a page of 50 jobs);
// a larger page is encoded into a buffer of its own, sized once from its
// jobs, so the pool does not hold megabytes for a rare page of 1,000.
const maxPooledAnswer = 64 << 10

func (s *Server) writeError(w http.ResponseWriter, err error) {
	ae := classify(err)
	if ae.Status == http.StatusServiceUnavailable {
		// An election takes about a second. An unknown outcome is worth
		// retrying at once (with the same idempotency key or lease token), so
		// it carries no Retry-After.
		if ae.Code == api.CodeNoLeader {
			w.Header().Set("Retry-After", "1")
		}
		if ae.Leader == "" {
			_, ae.Leader = s.cluster.Leader()
		}
	}
	if ae.Status >= 500 && ae.Status != http.StatusServiceUnavailable {
		s.logger.Error("request failed", "error", err)
	}
	writeJSON(w, ae.Status, api.ErrorBody{Error: api.ErrorDetail{Code: ae.Code, Message: ae.Message, Leader: ae.Leader, Job: ae.Job, Streams: ae.Streams, From: ae.From, To: ae.To, Mismatches: ae.Mismatches}})
}
