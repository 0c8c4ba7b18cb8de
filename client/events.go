package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spine-queue/spine/api"
)

// Event is one event of the cluster's feed (GET /v1/events).
type Event = api.Event

// EventGap says events the feed no longer holds were skipped.
type EventGap = api.EventGap

// EventsParams selects what Events delivers.
type EventsParams struct {
	// After is the seq of the last event already seen: delivery starts
	// with the next one. 0 with FromOldest unset starts at the latest
	// event (only what happens from now).
	After      uint64
	FromOldest bool
	// Kinds ("job", "gateway", "worker"; empty: all), Stream and Job
	// filter job events.
	Kinds  []string
	Stream string
	Job    string
	// OnGap, if set, is called when events were dropped from the feed
	// before they could be delivered (the feed keeps at least the latest 65,536).
	OnGap func(EventGap)
}

// Events follows the cluster's event feed, calling fn for each event in
// order, until ctx ends or fn returns an error (which Events returns).
// When the node it reads from dies or drops the connection it reconnects
// to the next node with the last seq it delivered, so every event is
// delivered once, none skipped, across any number of node failures.
func (c *Client) Events(ctx context.Context, p *EventsParams, fn func(*Event) error) error {
	if p == nil {
		p = &EventsParams{}
	}
	after, resume := p.After, p.After != 0 || p.FromOldest
	stream := &http.Client{Transport: c.http.Transport, CheckRedirect: c.http.CheckRedirect} // no timeout: a stream lasts
	failures := 0
	for {
		base := c.pick(&request{})
		err := c.followEvents(ctx, stream, base, p, &after, &resume, fn)
		var stop *stopError
		if errors.As(err, &stop) {
			return stop.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status != http.StatusServiceUnavailable {
			return err // refused (bad token, bad filter): no other node answers otherwise
		}
		c.failed(base)
		failures++
		c.log.Debug("spine client: event stream broke; reconnecting", "node", base, "after", after, "err", err)
		wait := time.Duration(0)
		if failures >= len(c.addrs) {
			wait = c.backoff(min(failures/len(c.addrs), 6))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// stopError carries fn's error out of the stream.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

func (c *Client) followEvents(ctx context.Context, hc *http.Client, base string, p *EventsParams, after *uint64, resume *bool,
	fn func(*Event) error) error {
	q := url.Values{}
	if len(p.Kinds) > 0 {
		q.Set("kinds", strings.Join(p.Kinds, ","))
	}
	if p.Stream != "" {
		q.Set("stream", p.Stream)
	}
	if p.Job != "" {
		q.Set("job", p.Job)
	}
	if *resume {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	u := base + "/v1/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	c.observe(base, resp.Header)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := newAPIError(resp.StatusCode, b)
		e.header = resp.Header
		return e
	}
	if !*resume {
		// The server starts at its latest event; from here on, any
		// reconnect resumes after the last one delivered.
		*resume = true
		*after = 0
		if v := resp.Header.Get(api.HeaderEventsAfter); v != "" {
			*after, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, name string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name != "" && data.Len() > 0 {
				if err := c.deliverEvent(p, name, data.String(), id, after, fn); err != nil {
					return err
				}
			}
			id, name = "", ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(line[5:], " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("client: event stream from %s ended", base)
}

func (c *Client) deliverEvent(p *EventsParams, name, data, id string, after *uint64, fn func(*Event) error) error {
	seq, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return fmt.Errorf("client: event without a seq id (%q)", id)
	}
	if seq <= *after {
		// A correct server never repeats or reorders: say so rather than
		// hide it.
		return &stopError{fmt.Errorf("client: event %d after event %d: the server repeated or reordered the feed", seq, *after)}
	}
	if name == "gap" {
		var g EventGap
		if err := json.Unmarshal([]byte(data), &g); err != nil {
			return fmt.Errorf("client: gap event: %w", err)
		}
		*after = seq
		if p.OnGap != nil {
			p.OnGap(g)
		}
		return nil
	}
	var e Event
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		return fmt.Errorf("client: event %d: %w", seq, err)
	}
	if err := fn(&e); err != nil {
		return &stopError{err}
	}
	*after = seq
	return nil
}
