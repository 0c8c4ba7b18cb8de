package queue

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spine-queue/spine/fsm"
)

// The leader's deliverer (fsm/dispatch.go): it leases each queued task
// routed to a healthy push gateway to the gateway, POSTs it to the
// gateway's address, retrying with backoff until the accept deadline, and
// commits the answer. Every step is an entry, so a new leader picks up a
// delivery the old one left: a leased task not yet accepted is POSTed
// again under the same idempotency key, with the deadline counted from
// the lease.

// DeliveryConfig configures the deliverer. Zero values take the defaults.
type DeliveryConfig struct {
	// AcceptTimeout is how long a gateway has to accept a delivery, from
	// its lease, before it is treated as unhealthy (default 10s).
	AcceptTimeout time.Duration
	// RequestTimeout bounds one POST (default AcceptTimeout/2, at most 5s).
	RequestTimeout time.Duration
	// Interval is how often the deliverer looks for work (default 100ms).
	Interval time.Duration
	// MaxInFlight bounds the deliveries under way at once (default 64).
	MaxInFlight int
	// Body renders the JSON body of the delivery of leased task j to g
	// (api.TaskDelivery).
	Body func(j *fsm.Job, g *fsm.Gateway) ([]byte, error)
	// Client sends the POSTs (default: a client without redirects).
	Client *http.Client
	// UserAgent names the sender.
	UserAgent string
}

// Delivery headers (docs/controlplane.md, "Delivery").
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" keyed by the gateway's secret>".
	SignatureHeader      = "Spine-Signature"
	IdempotencyKeyHeader = "Idempotency-Key"
)

// Sign returns the signature header value of body sent at unix second t.
func Sign(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	ts := strconv.FormatInt(t, 10)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature checks a signature header against body and secret, and
// that it was made within maxAge of now (a gateway's check).
func VerifySignature(secret, header string, body []byte, now time.Time, maxAge time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("signature header must be t=<unix seconds>,v1=<hex>")
	}
	if d := now.Sub(time.Unix(t, 0)); d > maxAge || d < -maxAge {
		return errors.New("signature is too old or from the future")
	}
	want := Sign(secret, t, body)
	if !hmac.Equal([]byte(want[strings.Index(want, "v1=")+3:]), []byte(sig)) {
		return errors.New("signature does not match")
	}
	return nil
}

// Backoffs of the deliverer.
const (
	deliverRetryMin = 100 * time.Millisecond
	deliverRetryMax = 2 * time.Second
	// A task a gateway refused, or one that could not be leased, waits
	// this long (doubling to the max) before the leader tries it again
	// where it is.
	redeliverMin = time.Second
	redeliverMax = time.Minute
)

// deliverer is the leader's delivery state: leader memory only, rebuilt
// from the replicated state by the next leader.
type deliverer struct {
	svc    *Service
	cfg    DeliveryConfig
	ctx    context.Context
	sem    chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	busy   map[string]bool      // task id: a delivery is under way
	waitTo map[string]time.Time // task id: not before
	tries  map[string]int       // task id: refusals and failed leases in a row
}

// Deliverer returns the leader's deliverer, to run while this node leads.
func (s *Service) Deliverer(cfg DeliveryConfig) func(context.Context) {
	if cfg.AcceptTimeout <= 0 {
		cfg.AcceptTimeout = 10 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = min(cfg.AcceptTimeout/2, 5*time.Second)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return func(ctx context.Context) {
		d := &deliverer{svc: s, cfg: cfg, ctx: ctx, sem: make(chan struct{}, cfg.MaxInFlight),
			busy: map[string]bool{}, waitTo: map[string]time.Time{}, tries: map[string]int{}}
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		defer d.wg.Wait()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			d.scan()
		}
	}
}

// scan starts a delivery for each task that needs one.
func (d *deliverer) scan() {
	// Point lookups (Peek): a scan publishes no view, so an idle
	// deliverer costs the writer nothing.
	r := d.svc.state.Peek()
	if r.Level() < fsm.LevelDelivery {
		return
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, at := range d.waitTo {
		if now.After(at.Add(redeliverMax)) {
			delete(d.waitTo, id) // long past: the task moved on or is gone
			delete(d.tries, id)
		}
	}
	for _, g := range r.Gateways() {
		if !g.Pushes() {
			continue
		}
		for _, j := range r.PushJobs(g.ID) {
			lease := j.State == fsm.StateQueued && g.Health == fsm.HealthHealthy && j.NotBefore == 0 && j.Extra().DepsPending == 0
			if d.busy[j.ID] || (!lease && !j.Dispatching()) || now.Before(d.waitTo[j.ID]) {
				continue
			}
			select {
			case d.sem <- struct{}{}:
			default:
				return // at the bound: the next scan goes on
			}
			d.busy[j.ID] = true
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer func() { <-d.sem }()
				d.deliver(j, g)
				d.mu.Lock()
				delete(d.busy, j.ID)
				d.mu.Unlock()
			}()
		}
	}
}

// later keeps task id from the next attempt for a while (growing with
// each try in a row).
func (d *deliverer) later(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.tries[id]
	d.tries[id] = n + 1
	d.waitTo[id] = time.Now().Add(min(redeliverMin<<min(n, 10), redeliverMax))
}

func (d *deliverer) settled(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.tries, id)
	delete(d.waitTo, id)
}

// deliver leases j to g if it is queued, then POSTs it until g answers or
// the accept deadline passes, and commits the answer.
func (d *deliverer) deliver(j *fsm.Job, g *fsm.Gateway) {
	s, ctx := d.svc, d.ctx
	logger := s.cfg.Logger.Named("deliver")
	leased := j.State == fsm.StateQueued
	if leased {
		res, _, err := s.Propose(ctx, fsm.CmdDispatch, &fsm.DispatchCommand{Now: s.now(), Step: fsm.DispatchLease, JobID: j.ID,
			Gateway: g.ID, AttemptID: s.cfg.NewID(), LeaseToken: s.cfg.NewID(), LeaseNanos: s.cfg.Lease.Nanoseconds()})
		if err != nil {
			if ctx.Err() == nil {
				logger.Debug("task not leased for delivery", "task", j.ID, "gateway", g.ID, "error", err)
				d.later(j.ID)
			}
			return
		}
		j = res.Job
	}
	deadline := time.Unix(0, j.Extra().Route.DispatchedAt()).Add(d.cfg.AcceptTimeout)
	if !leased {
		// Leased by an earlier leader: the gateway gets at least one full
		// try from this one, however long the election took.
		deadline = maxTime(deadline, s.cfg.Now().Add(d.cfg.RequestTimeout))
	}
	step := func(st fsm.DispatchStep, reason string) {
		_, _, err := s.Propose(ctx, fsm.CmdDispatch, &fsm.DispatchCommand{Now: s.now(), Step: st, JobID: j.ID, Gateway: g.ID,
			LeaseToken: j.Lease.Token, Reason: reason})
		if err != nil && ctx.Err() == nil {
			logger.Debug("delivery answer not committed", "task", j.ID, "gateway", g.ID, "error", err)
		}
	}
	body, err := d.cfg.Body(j, g)
	if err != nil {
		logger.Error("delivery body", "task", j.ID, "error", err)
		return
	}
	wait := deliverRetryMin
	for {
		accepted, refusal, err := d.post(g, j.Lease.Token, body, min(d.cfg.RequestTimeout, deadline.Sub(s.cfg.Now())))
		switch {
		case ctx.Err() != nil:
			return // no longer the leader: the next one carries on
		case accepted:
			s.cluster.RecordHeartbeat(gatewayKey(g.ID), s.now()) // it answered: it is alive
			step(fsm.DispatchAccepted, "")
			d.settled(j.ID)
			logger.Debug("task delivered", "task", j.ID, "gateway", g.ID)
			return
		case refusal != "":
			step(fsm.DispatchRefused, refusal)
			d.later(j.ID)
			logger.Info("gateway refused a task", "task", j.ID, "gateway", g.ID, "reason", refusal)
			return
		case s.cfg.Now().Add(wait).After(deadline):
			step(fsm.DispatchUnreachable, err.Error())
			logger.Warn("gateway did not accept a task in time", "task", j.ID, "gateway", g.ID, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, deliverRetryMax)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxRefusalBytes bounds the reason kept from a refusal's body.
const maxRefusalBytes = 512

// post sends one delivery: accepted on 2xx; a refusal (its reason) on a
// 4xx but 408 and 429; otherwise err says what to retry.
func (d *deliverer) post(g *fsm.Gateway, key string, body []byte, timeout time.Duration) (accepted bool, refusal string, err error) {
	if timeout <= 0 {
		return false, "", errors.New("no time left to deliver")
	}
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.Address, bytes.NewReader(body))
	if err != nil {
		return false, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, key)
	req.Header.Set(SignatureHeader, Sign(g.Secret, time.Now().Unix(), body))
	if d.cfg.UserAgent != "" {
		req.Header.Set("User-Agent", d.cfg.UserAgent)
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return true, "", nil
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return false, refusalReason(c, msg), nil
	}
	return false, "", fmt.Errorf("gateway answered %d", resp.StatusCode)
}

// refusalReason words a refusal: its body's error (or message), else its
// status.
func refusalReason(code int, body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	reason := ""
	if json.Unmarshal(body, &e) == nil {
		var text string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(e.Error, &text) == nil:
			reason = text
		case json.Unmarshal(e.Error, &obj) == nil:
			reason = obj.Message
		}
		if reason == "" {
			reason = e.Message
		}
	}
	if reason == "" {
		reason = strings.TrimSpace(string(body))
	}
	if reason == "" || !utf8.ValidString(reason) {
		reason = http.StatusText(code)
	}
	if len(reason) > maxRefusalBytes {
		reason = strings.ToValidUTF8(reason[:maxRefusalBytes], "")
	}
	return strconv.Itoa(code) + " " + reason
}
