package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spine-queue/spine/api"
)

type (
	// StreamInfo is one stream: its jobs per status, the age of its oldest
	// queued job, and an operator's pause.
	StreamInfo = api.StreamInfo
	// StreamPause is an operator's pause of a stream.
	StreamPause = api.StreamPause
)

func streamPath(name, verb string) string {
	p := "/streams/" + url.PathEscape(name)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

// Streams lists every stream (with jobs in any state, in the developer
// queue's catalog, or paused), by name.
func (c *Client) Streams(ctx context.Context) ([]StreamInfo, error) {
	var out api.StreamList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/streams"}, &out); err != nil {
		return nil, err
	}
	return out.Streams, nil
}

// Stream returns one stream (a name with no jobs has zero counts).
func (c *Client) Stream(ctx context.Context, name string) (*StreamInfo, error) {
	var s StreamInfo
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: streamPath(name, "")}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StreamPause pauses a stream (head): claims skip it, a claim by id of its
// jobs is refused (stream_paused), producers can still create jobs in it.
// Pausing a paused stream keeps the first pause.
func (c *Client) StreamPause(ctx context.Context, name, reason string) (*StreamInfo, error) {
	req, err := jsonRequest(http.MethodPost, streamPath(name, "pause"), &api.StreamPauseRequest{Reason: reason})
	if err != nil {
		return nil, err
	}
	req.write = true
	var s StreamInfo
	if _, _, err := c.call(ctx, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StreamResume resumes a paused stream (head); resuming one that is not
// paused changes nothing.
func (c *Client) StreamResume(ctx context.Context, name string) (*StreamInfo, error) {
	var s StreamInfo
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: streamPath(name, "resume"), write: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
