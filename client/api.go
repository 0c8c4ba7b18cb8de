package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/spine-queue/spine/api"
)

// BlobPut stores the bytes of r as a blob named name (the multipart file
// name; its extension, or the content itself, decides the content type).
// The content is read into memory first so that a retry can resend it; the
// same bytes always get the same id, so retries are safe.
func (c *Client) BlobPut(ctx context.Context, name string, r io.Reader) (*Blob, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("client: BlobPut: read: %w", err)
	}
	ctype := mime.TypeByExtension(filepath.Ext(name))
	if ctype == "" {
		ctype = http.DetectContentType(data)
	}
	if name == "" {
		name = "blob"
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filepath.Base(name)))
	h.Set("Content-Type", ctype)
	part, err := mw.CreatePart(h)
	if err != nil {
		return nil, err
	}
	if _, err := part.Write(data); err != nil {
		return nil, err
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	req := &request{method: http.MethodPost, path: "/blobs", body: buf.Bytes(),
		contentType: mw.FormDataContentType(), write: true}
	var b Blob
	status, _, err := c.call(ctx, req, &b)
	if err != nil {
		return nil, err
	}
	b.Duplicate = status == http.StatusOK
	return &b, nil
}

// BlobGet returns a blob's bytes and content type. The caller must close
// the reader.
func (c *Client) BlobGet(ctx context.Context, id string) (io.ReadCloser, string, error) {
	resp, _, err := c.do(ctx, &request{method: http.MethodGet, path: "/blobs/" + url.PathEscape(id)})
	if err != nil {
		return nil, "", err
	}
	return resp.Body, resp.Header.Get("Content-Type"), nil
}

// WorkerClaim long-polls for the next job of the worker contract v1. It
// answers Claimed false when nothing became ready within MaxWait. Like
// [Client.JobClaim] it is not retried once the request may have reached the
// leader.
func (c *Client) WorkerClaim(ctx context.Context, params *WorkerClaimParams) (*WorkerClaim, error) {
	if params == nil {
		params = &WorkerClaimParams{}
	}
	body := api.WorkerClaimRequest{WorkerID: params.WorkerID, Streams: params.Streams, MaxWaitMS: params.MaxWait.Milliseconds(), MaxJobs: params.MaxJobs, Capabilities: params.Capabilities}
	req, err := jsonRequest(http.MethodPost, "/internal/worker/claim", &body)
	if err != nil {
		return nil, err
	}
	req.write, req.mode, req.minTimeout = true, retryUnsent, params.MaxWait
	var wc WorkerClaim
	if _, _, err := c.call(ctx, req, &wc); err != nil {
		return nil, err
	}
	return &wc, nil
}

// WorkerHeld returns the running jobs whose leases this client's role
// holds for workerID, each as its claim answered it (lease token
// included), oldest first: how a worker that lost its claims' answers (a
// restart, a dead node) picks its work up again. A read; retried.
func (c *Client) WorkerHeld(ctx context.Context, workerID string) ([]WorkerClaim, error) {
	var out api.WorkerHeld
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/internal/worker/held?worker_id=" + url.QueryEscape(workerID)}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// WorkerHeartbeat extends a worker-contract lease. Idempotent; retried.
func (c *Client) WorkerHeartbeat(ctx context.Context, params *WorkerHeartbeatParams) (*WorkerHeartbeatResult, error) {
	req, err := jsonRequest(http.MethodPost, "/internal/worker/heartbeat", params)
	if err != nil {
		return nil, err
	}
	req.write = true
	var res WorkerHeartbeatResult
	if _, _, err := c.call(ctx, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// WorkerComplete completes a worker-contract attempt. The server answers a
// repeat of the same attempt with the first answer, so it is retried; a 409
// after an unknown outcome is checked against the attempt's recorded outcome.
//
// With params.Next the complete also claims the worker's next job: the
// answer's Next (nil when the outcome had to be checked after a lost
// answer, or when the cluster does not take "next" yet: claim with
// [Client.WorkerClaim] then). A repeat after a lost answer claims again,
// and the job the lost answer named stays leased until its lease expires.
func (c *Client) WorkerComplete(ctx context.Context, params *WorkerCompleteParams) (*WorkerAck, error) {
	if params.Next != nil && c.noNext.Load() {
		p := *params
		p.Next = nil
		params = &p
	}
	ack, err := c.workerEnd(ctx, "complete", params, params.JobID, params.AttemptID, OutcomeCompleted)
	var ae *APIError
	if params.Next != nil && errors.As(err, &ae) && ae.Status == http.StatusBadRequest && strings.Contains(ae.Message, `unknown field "next"`) {
		// A build without the field refused the request whole, changing
		// nothing: complete without it, from now on.
		c.noNext.Store(true)
		p := *params
		p.Next = nil
		return c.workerEnd(ctx, "complete", &p, p.JobID, p.AttemptID, OutcomeCompleted)
	}
	return ack, err
}

// WorkerFail fails a worker-contract attempt; retried like WorkerComplete.
func (c *Client) WorkerFail(ctx context.Context, params *WorkerFailParams) (*WorkerAck, error) {
	return c.workerEnd(ctx, "fail", params, params.JobID, params.AttemptID, OutcomeFailed)
}

// WorkerRelease gives a worker-contract attempt's job back without using
// an attempt; CooldownMS keeps it from being claimed again for that long.
// A release after an unknown outcome is checked like a complete.
func (c *Client) WorkerRelease(ctx context.Context, params *WorkerReleaseParams) (*WorkerAck, error) {
	return c.workerEnd(ctx, "release", params, params.JobID, params.AttemptID, OutcomeReleased)
}

func (c *Client) workerEnd(ctx context.Context, verb string, body any, jobID, attemptID, outcome string) (*WorkerAck, error) {
	req, err := jsonRequest(http.MethodPost, "/internal/worker/"+verb, body)
	if err != nil {
		return nil, err
	}
	req.write = true
	var ack WorkerAck
	_, uncertain, err := c.call(ctx, req, &ack)
	if err == nil {
		return &ack, nil
	}
	if uncertain && errors.Is(err, ErrConflict) {
		if ok, verr := c.attemptEndedAs(ctx, jobID, attemptID, outcome); verr == nil && ok {
			ack = WorkerAck{OK: true, Ack: true}
			if outcome == OutcomeFailed {
				if j, gerr := c.JobGet(ctx, jobID); gerr == nil {
					ack.Requeued = j.Status == JobStatusQueued || j.Status == JobStatusRunning
					ack.DLQ = j.Status == JobStatusFailed || j.Status == JobStatusDead
					ack.Status = j.Status
				}
			}
			return &ack, nil
		}
	}
	return nil, err
}

// ClusterStatus returns the cluster's membership and Raft state (head).
func (c *Client) ClusterStatus(ctx context.Context) (*ClusterStatus, error) {
	var st ClusterStatus
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/cluster/status"}, &st); err != nil {
		return nil, err
	}
	c.learnFromStatus(&st)
	return &st, nil
}

// ClusterJoin adds a node as a voter (head). Idempotent; retried.
func (c *Client) ClusterJoin(ctx context.Context, m Member) (*ClusterStatus, error) {
	return c.clusterWrite(ctx, "/cluster/join", m, retrySafe)
}

// ClusterRemove removes a node (head). Idempotent; retried.
func (c *Client) ClusterRemove(ctx context.Context, nodeID string) (*ClusterStatus, error) {
	return c.clusterWrite(ctx, "/cluster/remove", &api.ClusterRemoveRequest{NodeID: nodeID}, retrySafe)
}

// ClusterTransferLeader hands leadership to the node to, or to any voter
// when to is empty (head). Retried only when unsent.
func (c *Client) ClusterTransferLeader(ctx context.Context, to string) (*ClusterStatus, error) {
	st, err := c.clusterWrite(ctx, "/cluster/transfer-leader", &api.ClusterTransferRequest{To: to}, retryUnsent)
	c.forgetLeader()
	return st, err
}

func (c *Client) clusterWrite(ctx context.Context, path string, body any, mode retryMode) (*ClusterStatus, error) {
	req, err := jsonRequest(http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, mode
	var st ClusterStatus
	if _, _, err := c.call(ctx, req, &st); err != nil {
		return nil, err
	}
	c.learnFromStatus(&st)
	return &st, nil
}

func (c *Client) learnFromStatus(st *ClusterStatus) {
	if st.Leader.HTTPAddr == "" {
		return
	}
	addr, err := normalizeAddr(st.Leader.HTTPAddr)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.leaderID, c.leaderAddr, c.leaderStale = st.Leader.ID, addr, false
	c.mu.Unlock()
}

// Health asks one node for its health. addr is a base URL; empty means the
// seed address in use. Health is not retried: it describes one node.
func (c *Client) Health(ctx context.Context, addr string) (*Health, error) {
	if addr == "" {
		c.mu.Lock()
		addr = c.addrs[c.cur]
		c.mu.Unlock()
	} else {
		n, err := normalizeAddr(addr)
		if err != nil {
			return nil, err
		}
		addr = n
	}
	h, err := c.health(ctx, addr)
	if err == nil && h.LeaderAddr != "" && h.LeaderID != "" {
		if la, nerr := normalizeAddr(h.LeaderAddr); nerr == nil {
			c.mu.Lock()
			c.leaderID, c.leaderAddr, c.leaderStale = h.LeaderID, la, false
			c.mu.Unlock()
		}
	}
	return h, err
}

func (c *Client) health(ctx context.Context, addr string) (*Health, error) {
	var h Health
	req := &request{method: http.MethodGet, path: "/health", mode: retryNever, addr: strings.TrimRight(addr, "/")}
	if _, _, err := c.call(ctx, req, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// KeyringGet reads the gossip keyring of the node at base (head); keys are
// named by fingerprint.
func (c *Client) KeyringGet(ctx context.Context, base string, out *api.KeyringAnswer) error {
	_, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/v1/keyring", addr: base}, out)
	return err
}

// KeyringChange installs, uses or removes a gossip key (base64) on the node
// at base (head). Each is idempotent.
func (c *Client) KeyringChange(ctx context.Context, base, op, key string, out *api.KeyringAnswer) error {
	req, err := jsonRequest(http.MethodPost, "/v1/keyring/"+op, api.KeyringRequest{Key: key})
	if err != nil {
		return err
	}
	req.addr = base
	_, _, err = c.call(ctx, req, out)
	return err
}
