package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spine-queue/spine/api"
)

// The control plane's registry (docs/controlplane.md).
type (
	Gateway               = api.Gateway
	RegisteredWorker      = api.Worker
	GatewayRegisterParams = api.GatewayRegisterRequest
	WorkerRegisterParams  = api.WorkerRegisterRequest
	GatewayDeregistered   = api.GatewayDeregistered
)

func registryPath(kind, id string) string {
	if id == "" {
		return "/v1/" + kind
	}
	return "/v1/" + kind + "/" + url.PathEscape(id)
}

// GatewayRegister registers a gateway, or updates it when its id is
// registered. A registration is idempotent, so it is retried.
func (c *Client) GatewayRegister(ctx context.Context, p *GatewayRegisterParams) (*Gateway, error) {
	req, err := jsonRequest(http.MethodPost, registryPath("gateways", ""), p)
	if err != nil {
		return nil, err
	}
	req.write = true
	var g Gateway
	if _, _, err := c.call(ctx, req, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// GatewayList lists the registered gateways.
func (c *Client) GatewayList(ctx context.Context) ([]*Gateway, error) {
	var out api.GatewayList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: registryPath("gateways", "")}, &out); err != nil {
		return nil, err
	}
	return out.Gateways, nil
}

// GatewayGet reads one gateway.
func (c *Client) GatewayGet(ctx context.Context, id string) (*Gateway, error) {
	var g Gateway
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: registryPath("gateways", id)}, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// GatewayDeregister removes a gateway and its workers. It is repeated only
// when it certainly was not applied (a repeat of an applied one is 404).
func (c *Client) GatewayDeregister(ctx context.Context, id string) (*GatewayDeregistered, error) {
	var out GatewayDeregistered
	req := &request{method: http.MethodDelete, path: registryPath("gateways", id), write: true, mode: retryUnsent}
	if _, _, err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkerRegister registers a worker under its gateway, or updates it. It
// is retried, as a registration is idempotent.
func (c *Client) WorkerRegister(ctx context.Context, p *WorkerRegisterParams) (*RegisteredWorker, error) {
	req, err := jsonRequest(http.MethodPost, registryPath("workers", ""), p)
	if err != nil {
		return nil, err
	}
	req.write = true
	var w RegisteredWorker
	if _, _, err := c.call(ctx, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// WorkerList lists the registered workers (of gateway, when not "").
func (c *Client) WorkerList(ctx context.Context, gateway string) ([]*RegisteredWorker, error) {
	var out api.WorkerList
	req := &request{method: http.MethodGet, path: registryPath("workers", "")}
	if gateway != "" {
		req.query = url.Values{"gateway": {gateway}}
	}
	if _, _, err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return out.Workers, nil
}

// WorkerGet reads one worker.
func (c *Client) WorkerGet(ctx context.Context, id string) (*RegisteredWorker, error) {
	var w RegisteredWorker
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: registryPath("workers", id)}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// WorkerDeregister removes a worker; repeated only when certainly not
// applied.
func (c *Client) WorkerDeregister(ctx context.Context, id string) (*RegisteredWorker, error) {
	var w RegisteredWorker
	req := &request{method: http.MethodDelete, path: registryPath("workers", id), write: true, mode: retryUnsent}
	if _, _, err := c.call(ctx, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// HeartbeatAnswer is what a gateway's or worker's heartbeat answers.
type HeartbeatAnswer = api.HeartbeatAnswer

// GatewayHeartbeat tells the cluster gateway id is alive. The node it
// reaches records and gossips it; no log entry is written, so it may be
// sent often (every few seconds). An unknown id is a 404 (register again).
func (c *Client) GatewayHeartbeat(ctx context.Context, id string) (*HeartbeatAnswer, error) {
	return c.registryHeartbeat(ctx, registryPath("gateways", id)+"/heartbeat")
}

// RegisteredWorkerHeartbeat tells the cluster worker id is alive (see
// GatewayHeartbeat).
func (c *Client) RegisteredWorkerHeartbeat(ctx context.Context, id string) (*HeartbeatAnswer, error) {
	return c.registryHeartbeat(ctx, registryPath("workers", id)+"/heartbeat")
}

func (c *Client) registryHeartbeat(ctx context.Context, path string) (*HeartbeatAnswer, error) {
	var a HeartbeatAnswer
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: path, write: true}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Route routes a queued job to the least loaded healthy gateway that meets
// p's requirements and has free capacity (head). With none the error is a
// 503 no_healthy_gateway and nothing changed. Routing again is harmless,
// so it is retried.
func (c *Client) Route(ctx context.Context, p *api.RouteRequest) (*api.RouteAnswer, error) {
	req, err := jsonRequest(http.MethodPost, "/v1/tasks/route", p)
	if err != nil {
		return nil, err
	}
	req.write = true
	var a api.RouteAnswer
	if _, _, err := c.call(ctx, req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}
