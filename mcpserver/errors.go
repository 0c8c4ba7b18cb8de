package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/client"
)

// The calls a refusal can concern, as advise names them.
const (
	opClaim     = "claim"
	opHeartbeat = "heartbeat"
	opComplete  = "complete"
	opFail      = "fail"
	opRelease   = "release"
	opComment   = "comment"
	opEnqueue   = "enqueue"
	opRedrive   = "redrive"
	opRequeue   = "requeue"
	opCancel    = "cancel"
	opHeld      = "held_jobs"
)

// advise turns an error of the cluster into the text of a tool error: what
// happened, then what the agent should do next. op names the call, jobID
// the job it concerns ("" for none).
func (s *server) advise(err error, op, jobID string) error {
	subj := op
	if jobID != "" {
		subj = fmt.Sprintf("%s of job %s", op, jobID)
	}
	var ae *client.APIError
	if !errors.As(err, &ae) {
		switch {
		case errors.Is(err, context.Canceled):
			return fmt.Errorf("%s: cancelled before the cluster answered. %s", subj, again(op))
		case isNetError(err) && notSent(err):
			return fmt.Errorf("%s: could not reach the cluster (tried %s): %v. Nothing was changed. The node may be down or restarting, "+
				"or a majority of nodes may be down: wait a few seconds and call again; if it keeps failing, point this MCP "+
				"server at other nodes (spine mcp --addr, or connect to another node's /mcp)",
				subj, strings.Join(s.c.Addrs(), ", "), err)
		case isNetError(err):
			return fmt.Errorf("%s: the connection to the cluster (%s) broke before the answer came: %v. %s If the node stays "+
				"unreachable, point this MCP server at other nodes (spine mcp --addr, or connect to another node's /mcp)",
				subj, strings.Join(s.c.Addrs(), ", "), err, again(op))
		}
		return fmt.Errorf("%s: %v", subj, err)
	}
	msg := ae.Message
	if msg == "" {
		msg = ae.Error()
	}
	switch {
	case ae.Code == client.CodeResultMismatch:
		return fmt.Errorf("%s refused: the result does not match job %s's result_schema; nothing was completed and the job is "+
			"still yours under the same lease. Fix every mismatch below (get_job shows the schema), then call complete again "+
			"(heartbeat meanwhile if it takes long):\n%s", op, jobID, mismatchLines(ae.Mismatches))
	case ae.Code == client.CodeStaleLease:
		return fmt.Errorf("%s refused: your lease on job %s ended (it ran out, or the job was released, reaped, redriven or "+
			"finished, and another worker may hold it now). Stop working on it and do not report it again; call claim for new work. (%s)",
			op, jobID, msg)
	case ae.Code == client.CodeNotOwner:
		return fmt.Errorf("%s refused: job %s is held by another worker (of another role, or under another worker id); only that "+
			"worker (or head) may report it, whatever lease token it shows. Leave it and claim your own work. (%s)", op, jobID, msg)
	case ae.Code == client.CodeWorkerIDTaken:
		return fmt.Errorf("%s refused: that worker_id belongs to a worker of another role. Call again with a worker_id of your "+
			"own, or without one to use this session's. (%s)", subj, msg)
	case ae.Code == client.CodeTargetMismatch:
		return fmt.Errorf("%s refused: job %s is routed to another gateway's workers. Leave it and claim other work. (%s)", op, jobID, msg)
	case ae.Code == client.CodeMaxAttempts:
		return fmt.Errorf("%s refused: job %s is out of attempts and is now dead; head may redrive it. Claim other work. (%s)", op, jobID, msg)
	case ae.Code == client.CodeIllegalTransition:
		return fmt.Errorf("%s refused: %s. %s", subj, msg, afterIllegal(op, ae.Job))
	case ae.Code == api.CodeStreamPaused:
		return fmt.Errorf("%s refused: %s. An operator paused the stream: claims skip it until it is resumed; work on other streams meanwhile", subj, msg)
	case ae.Code == api.CodeStreamEnded:
		return fmt.Errorf("%s refused: %s. The stream is ended: it takes and hands out no jobs; use another stream", subj, msg)
	case ae.Code == api.CodeCommentLimit:
		return fmt.Errorf("%s refused: %s. A job's comments are capped in number and size: put a long note in a blob "+
			"(POST /blobs) and comment its id, or report what you found in the job's result", subj, msg)
	case ae.Code == api.CodeUpgradeInProgress:
		return fmt.Errorf("%s refused: %s. Nothing was changed; call again once every node runs the new version", subj, msg)
	case errors.Is(err, client.ErrNotFound):
		if jobID != "" {
			return fmt.Errorf("%s: no job %s is visible to this token (an unknown id, or a job targeted at another role or worker). "+
				"Check the id: peek, list_jobs or get_job show the jobs you may see. (%s)", op, jobID, msg)
		}
		return fmt.Errorf("%s: not found: %s", subj, msg)
	case errors.Is(err, client.ErrUnauthorized):
		return fmt.Errorf("%s: the cluster refused this session's token (%s): it is wrong, or was rotated away. "+
			"Reconnect with a valid token (the Authorization header of /mcp, or SPINE_TOKEN for spine mcp)", subj, msg)
	case errors.Is(err, client.ErrForbidden):
		return fmt.Errorf("%s: this token's role may not do that (%s)", subj, msg)
	case errors.Is(err, client.ErrTooLarge):
		return fmt.Errorf("%s refused: %s. Keep payloads and results small: upload large outputs as blobs (POST /blobs) "+
			"and put the blob's id in the result", subj, msg)
	case errors.Is(err, client.ErrBadRequest):
		return fmt.Errorf("%s refused: %s. Fix the arguments and call again", subj, msg)
	case errors.Is(err, client.ErrNoLeader):
		return fmt.Errorf("%s: the cluster has no leader right now (an election is under way, or a majority of nodes is down); "+
			"nothing was changed. Call again in a few seconds", subj)
	case errors.Is(err, client.ErrOutcomeUnknown):
		return fmt.Errorf("%s: the leader changed while the call was being committed, so whether it took effect is unknown. %s", subj, again(op))
	}
	return fmt.Errorf("%s: %s", subj, ae.Error())
}

// afterIllegal says what to do after a call the job's state refused.
func afterIllegal(op string, j *client.Job) string {
	if j == nil {
		return "get_job shows the job's state"
	}
	switch op {
	case opHeartbeat, opComplete, opFail, opRelease:
		return fmt.Sprintf("The job is %s: your lease on it ended. Stop working on it and claim again", j.Status)
	case opRedrive, opRequeue:
		switch j.Status {
		case client.JobStatusQueued, client.JobStatusRunning:
			return fmt.Sprintf("Nothing to do: the job is %s already", j.Status)
		case client.JobStatusDone:
			return "The job is done: to run its work again, enqueue a new job"
		}
		return "get_job shows the job's state"
	case opCancel:
		return fmt.Sprintf("The job is %s already: there is nothing to cancel", j.Status)
	}
	return fmt.Sprintf("The job is %s", j.Status)
}

// again says whether, and how, a call whose outcome is unknown may be
// repeated.
func again(op string) string {
	switch op {
	case opHeartbeat, opComplete, opFail, opRelease, opCancel:
		return "Call " + op + " again with the same arguments: a repeat is answered like the first and changes nothing."
	case opClaim:
		return "A job may have been claimed for you without the answer arriving; it goes back to the queue when its lease runs out. Call claim again."
	case opComment:
		return "The comment may have been added: check with get_job before adding it again."
	case opRedrive:
		return "Check the job with get_job: it is queued if the redrive took effect."
	case opRequeue:
		return "Check with list_jobs whether a copy was made before requeueing again."
	case opEnqueue:
		return "Call enqueue again with the same idempotency_key: a job already created under it is answered instead of a second one."
	}
	return "Call it again."
}

// isNetError reports whether err is a transport error: no node answered.
func isNetError(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue)
}

// notSent reports whether a transport error certainly happened before the
// request reached a node, which then changed nothing.
func notSent(err error) bool {
	if errors.Is(err, wire.ErrNotSent) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// mismatchLines lists a refused result's mismatches, one a line.
func mismatchLines(ms []client.ResultMismatch) string {
	var b strings.Builder
	for _, m := range ms {
		path := m.Path
		if path == "" {
			path = "(the whole result)"
		}
		fmt.Fprintf(&b, "- %s: expected %s, got %s\n", path, m.Expected, m.Got)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
