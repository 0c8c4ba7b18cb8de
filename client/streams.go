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
	// StreamDefaults are a stream's defaults for the jobs created in it.
	StreamDefaults = api.StreamDefaults
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
	return c.streamWrite(ctx, http.MethodPost, name, "pause", &api.StreamPauseRequest{Reason: reason})
}

// StreamResume resumes a paused stream (head); resuming one that is not
// paused changes nothing.
func (c *Client) StreamResume(ctx context.Context, name string) (*StreamInfo, error) {
	return c.streamWrite(ctx, http.MethodPost, name, "resume", nil)
}

// streamWrite sends an operator's write of a stream (with body, if not
// nil) and decodes the stream it answers.
func (c *Client) streamWrite(ctx context.Context, method, name, verb string, body any) (*StreamInfo, error) {
	req, err := jsonRequest(method, streamPath(name, verb), body)
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

// StreamDefaultsSet sets a stream's defaults for the jobs created in it
// from now on (head): a job created without a concurrency key gets
// d.ConcurrencyKey, one with a key but no limit gets d.ConcurrencyLimit.
// They replace the stream's defaults whole; give at least one field.
func (c *Client) StreamDefaultsSet(ctx context.Context, name string, d StreamDefaults) (*StreamInfo, error) {
	return c.streamWrite(ctx, http.MethodPut, name, "defaults", &d)
}

// StreamDefaultsClear clears a stream's job defaults (head); jobs already
// created keep the key and limit they were given.
func (c *Client) StreamDefaultsClear(ctx context.Context, name string) (*StreamInfo, error) {
	return c.streamWrite(ctx, http.MethodDelete, name, "defaults", nil)
}
