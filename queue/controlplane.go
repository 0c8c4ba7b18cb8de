package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// The control plane's registry (seed 003, fsm/controlplane.go): gateways
// and the workers behind them register, update and deregister through
// Raft, so every node answers the same lists and they outlive any node.

// Limits of a registration.
const (
	maxCapacity     = 100_000
	maxLabels       = 64
	maxLabelBytes   = 256
	maxCapabilities = 64
	maxAddressBytes = 1024
)

// GatewayInput registers (or updates) a gateway.
type GatewayInput struct {
	ID       string
	Address  string
	Metadata map[string]string
	Capacity int
	Actor    fsm.Actor
	// How routed tasks reach it (fsm.DeliveryPush or fsm.DeliveryPull; ""
	// keeps a registered gateway's, pull for a new one), the claw role a
	// push gateway's tasks are leased to, and the key its deliveries are
	// signed with ("": a push gateway that has none gets a random one).
	Delivery, Role, Secret string
}

// WorkerInput registers (or updates) a worker of a gateway.
type WorkerInput struct {
	ID           string
	Gateway      string
	Capabilities []string
	Metadata     map[string]string
	Capacity     int
	Actor        fsm.Actor
}

// proposeRegistry proposes a registry command once the cluster's level
// has them.
func (s *Service) proposeRegistry(ctx context.Context, t fsm.CommandType, cmd interface{}) (*fsm.Result, uint64, error) {
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return nil, 0, ErrUpgradeInProgress
	}
	return s.Propose(ctx, t, cmd)
}

func checkLabels(what string, m map[string]string) error {
	if len(m) > maxLabels {
		return invalid("%s: at most %d entries", what, maxLabels)
	}
	for k, v := range m {
		if k == "" || len(k) > maxLabelBytes || len(v) > maxLabelBytes {
			return invalid("%s: keys must be 1-%d bytes and values at most %d bytes", what, maxLabelBytes, maxLabelBytes)
		}
	}
	return nil
}

func checkCapacity(c int) error {
	if c < 1 || c > maxCapacity {
		return invalid("capacity must be from 1 to %d", maxCapacity)
	}
	return nil
}

// RegisterGateway registers in.ID, or updates it if it is registered.
func (s *Service) RegisterGateway(ctx context.Context, in GatewayInput) (*fsm.Gateway, uint64, error) {
	if !ValidName(in.ID) {
		return nil, 0, invalid("gateway id must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	}
	if u, err := url.Parse(in.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(in.Address) > maxAddressBytes {
		return nil, 0, invalid("address must be an http or https URL of at most %d bytes", maxAddressBytes)
	}
	if err := checkCapacity(in.Capacity); err != nil {
		return nil, 0, err
	}
	if err := checkLabels("metadata", in.Metadata); err != nil {
		return nil, 0, err
	}
	if in.Actor.Role != fsm.HeadRole {
		return nil, 0, &ForbiddenError{Message: "only head registers gateways"}
	}
	r := s.state.Peek()
	old := r.Gateway(in.ID)
	if old == nil && len(r.Gateways()) >= maxRegistered {
		return nil, 0, invalid("at most %d gateways may be registered; remove one first", maxRegistered)
	}
	if err := s.checkDelivery(ctx, &in, old); err != nil {
		return nil, 0, err
	}
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdGatewayRegister, &fsm.GatewayRegisterCommand{Now: s.now(), ID: in.ID,
		Address: in.Address, Metadata: in.Metadata, Capacity: in.Capacity, Actor: in.Actor,
		Delivery: in.Delivery, Role: in.Role, Secret: in.Secret})
	if err != nil {
		return nil, idx, err
	}
	return res.Gateway, idx, nil
}

// Limits of a push gateway's signing secret.
const (
	minSecretBytes = 16
	maxSecretBytes = 256
)

// checkDelivery checks how in says routed tasks reach the gateway (old:
// as registered, or nil) and gives a push gateway without a secret one.
func (s *Service) checkDelivery(ctx context.Context, in *GatewayInput, old *fsm.Gateway) error {
	switch in.Delivery {
	case "", fsm.DeliveryPull, fsm.DeliveryPush:
	default:
		return invalid("delivery must be push or pull")
	}
	if in.Delivery == "" && (in.Role != "" || in.Secret != "") {
		return invalid("role and secret are for a push gateway: give delivery push with them")
	}
	if in.Delivery == fsm.DeliveryPull && in.Role != "" {
		return invalid("role is for a push gateway's deliveries; a pull gateway's workers claim in their own role")
	}
	if in.Secret != "" && (len(in.Secret) < minSecretBytes || len(in.Secret) > maxSecretBytes) {
		return invalid("secret must be %d to %d bytes", minSecretBytes, maxSecretBytes)
	}
	if in.Delivery == "" && in.Secret == "" {
		return nil
	}
	if !s.atLevel(ctx, fsm.LevelDelivery) {
		return ErrUpgradeInProgress
	}
	if in.Delivery != fsm.DeliveryPush {
		return nil
	}
	if !fsm.IsClaw(in.Role) {
		return invalid("a push gateway needs role %s or %s: its tasks are leased to that role, whose token it calls back with", fsm.RoleLeftClaw, fsm.RoleRightClaw)
	}
	if in.Secret == "" && (old == nil || old.Secret == "") {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		in.Secret = hex.EncodeToString(b)
	}
	return nil
}

// DeregisterGateway removes a gateway and its workers (returned).
func (s *Service) DeregisterGateway(ctx context.Context, id string, actor fsm.Actor) (*fsm.Gateway, []*fsm.Worker, uint64, error) {
	if actor.Role != fsm.HeadRole {
		return nil, nil, 0, &ForbiddenError{Message: "only head removes gateways"}
	}
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdGatewayDeregister, &fsm.GatewayDeregisterCommand{Now: s.now(), ID: id, Actor: actor})
	if err != nil {
		return nil, nil, idx, err
	}
	return res.Gateway, res.Workers, idx, nil
}

// RegisterWorker registers in.ID under its gateway, or updates it.
func (s *Service) RegisterWorker(ctx context.Context, in WorkerInput) (*fsm.Worker, uint64, error) {
	if err := CheckWorkerID("id", in.ID, true); err != nil {
		return nil, 0, err
	}
	if in.Gateway == "" {
		return nil, 0, invalid("gateway is required")
	}
	if err := checkCapacity(in.Capacity); err != nil {
		return nil, 0, err
	}
	if len(in.Capabilities) > maxCapabilities {
		return nil, 0, invalid("at most %d capabilities", maxCapabilities)
	}
	for _, c := range in.Capabilities {
		if !ValidName(c) {
			return nil, 0, invalid("capability %q must be 1-128 characters of letters, digits, '_', '.', ':' or '-'", c)
		}
	}
	if err := checkLabels("metadata", in.Metadata); err != nil {
		return nil, 0, err
	}
	if err := s.mayChangeWorker(in.Actor, in.ID, true); err != nil {
		return nil, 0, err
	}
	if r := s.state.Peek(); r.Worker(in.ID) == nil && len(r.Workers("")) >= maxRegistered {
		return nil, 0, invalid("at most %d workers may be registered; remove one first", maxRegistered)
	}
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdWorkerRegister, &fsm.WorkerRegisterCommand{Now: s.now(), ID: in.ID,
		Gateway: in.Gateway, Capabilities: in.Capabilities, Metadata: in.Metadata, Capacity: in.Capacity, Actor: in.Actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Worker, idx, nil
}

// DeregisterWorker removes a worker.
func (s *Service) DeregisterWorker(ctx context.Context, id string, actor fsm.Actor) (*fsm.Worker, uint64, error) {
	if s.state.Peek().Worker(id) == nil {
		return nil, 0, fmt.Errorf("worker %s: %w", id, fsm.ErrNotFound)
	}
	if err := s.mayChangeWorker(actor, id, false); err != nil {
		return nil, 0, err
	}
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdWorkerDeregister, &fsm.WorkerDeregisterCommand{Now: s.now(), ID: id, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Worker, idx, nil
}

// Gateways lists the registered gateways, by id.
func (s *Service) Gateways() []*fsm.Gateway { return s.state.Read().Gateways() }

// Gateway reads one gateway.
func (s *Service) Gateway(id string) (*fsm.Gateway, error) {
	if g := s.state.Read().Gateway(id); g != nil {
		return g, nil
	}
	return nil, fmt.Errorf("gateway %s: %w", id, fsm.ErrNotFound)
}

// Workers lists the registered workers, by id (of gateway, when not "").
func (s *Service) Workers(gateway string) []*fsm.Worker { return s.state.Read().Workers(gateway) }

// Worker reads one worker.
func (s *Service) Worker(id string) (*fsm.Worker, error) {
	if w := s.state.Read().Worker(id); w != nil {
		return w, nil
	}
	return nil, fmt.Errorf("worker %s: %w", id, fsm.ErrNotFound)
}

// Registry keys of the liveness map.
func gatewayKey(id string) string { return "g:" + id }
func workerKey(id string) string  { return "w:" + id }

// HeartbeatAnswer is what a gateway's or worker's heartbeat learns.
type HeartbeatAnswer struct {
	Health   string // the committed health (a heartbeat turns suspect or dead back to healthy within a monitor tick)
	LastSeen int64
}

// GatewayHeartbeat records that gateway id is alive, on this node, and
// gossips it; no log entry is written. An id this node's state does not
// know is ErrNotFound (deregistered, or not registered yet: register
// first).
func (s *Service) GatewayHeartbeat(id string) (*HeartbeatAnswer, error) {
	g := s.state.Read().Gateway(id)
	if g == nil {
		return nil, fmt.Errorf("gateway %s: %w", id, fsm.ErrNotFound)
	}
	now := s.now()
	s.cluster.RecordHeartbeat(gatewayKey(id), now)
	return &HeartbeatAnswer{Health: g.Health, LastSeen: now}, nil
}

// WorkerHeartbeat records that worker id is alive (see GatewayHeartbeat):
// sent by head or by the role the worker id is bound to.
func (s *Service) WorkerHeartbeat(actor fsm.Actor, id string) (*HeartbeatAnswer, error) {
	w := s.state.Read().Worker(id)
	if w == nil {
		return nil, fmt.Errorf("worker %s: %w", id, fsm.ErrNotFound)
	}
	if err := s.mayChangeWorker(actor, id, false); err != nil {
		return nil, err
	}
	now := s.now()
	s.cluster.RecordHeartbeat(workerKey(id), now)
	return &HeartbeatAnswer{Health: w.Health, LastSeen: now}, nil
}

// GatewayLastSeen and WorkerLastSeen are this node's gossiped view of the
// last heartbeat (0: none known).
func (s *Service) GatewayLastSeen(id string) int64 {
	at, _ := s.cluster.LastSeen(gatewayKey(id))
	return at
}
func (s *Service) WorkerLastSeen(id string) int64 {
	at, _ := s.cluster.LastSeen(workerKey(id))
	return at
}

// HealthConfig sets the health monitor's thresholds: a gateway or worker
// not heard from for SuspectAfter is suspect, for DeadAfter dead.
type HealthConfig struct {
	SuspectAfter, DeadAfter time.Duration
	// Interval is how often the monitor looks (default a tenth of
	// SuspectAfter, at least 100 ms and at most 1 s).
	Interval time.Duration
}

// maxHealthChanges bounds one health-set entry.
const maxHealthChanges = 256

// HealthMonitor returns the leader's health monitor: every interval it
// derives each gateway's and worker's health from the time it was last
// heard from (the gossiped heartbeats, or its registration, whichever is
// later) and commits only the changes, in one entry. A new leader counts
// no silence from before it took over, so a leadership change never
// declares anyone suspect by itself.
func (s *Service) HealthMonitor(cfg HealthConfig) func(context.Context) {
	interval := cfg.Interval
	if interval <= 0 {
		interval = min(max(cfg.SuspectAfter/10, 100*time.Millisecond), time.Second)
	}
	logger := s.cfg.Logger.Named("health")
	return func(ctx context.Context) {
		since := s.now()
		logger.Info("health monitor started", "suspect_after", cfg.SuspectAfter, "dead_after", cfg.DeadAfter)
		defer logger.Info("health monitor stopped")
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if s.level() < fsm.LevelIdentity {
				continue
			}
			changes := s.healthChanges(cfg, since)
			for len(changes) > 0 {
				batch := changes[:min(len(changes), maxHealthChanges)]
				changes = changes[len(batch):]
				res, _, err := s.Propose(ctx, fsm.CmdHealthSet, &fsm.HealthSetCommand{Now: s.now(), Changes: batch})
				if err != nil {
					if ctx.Err() == nil {
						logger.Warn("health change not committed", "error", err)
					}
					break
				}
				for _, g := range res.Gateways {
					logger.Info("gateway health changed", "gateway", g.ID, "health", g.Health)
				}
				for _, w := range res.Workers {
					logger.Info("worker health changed", "worker", w.ID, "health", w.Health)
				}
			}
		}
	}
}

// healthChanges compares every registered gateway's and worker's health
// with the one its silence calls for. Silence runs from the last contact
// (a heartbeat any node heard, or its registration). A health gets worse
// only by silence this leader has watched itself (from since, when it took
// over), and better only by a contact recent enough to call for it.
func (s *Service) healthChanges(cfg HealthConfig, since int64) []fsm.HealthChange {
	now := s.now()
	level := func(silent int64) int {
		switch d := time.Duration(silent); {
		case d >= cfg.DeadAfter:
			return 2
		case d >= cfg.SuspectAfter:
			return 1
		}
		return 0
	}
	healths := []string{fsm.HealthHealthy, fsm.HealthSuspect, fsm.HealthDead}
	want := func(key string, updated int64, cur string) string {
		contact := updated
		if seen, ok := s.cluster.LastSeen(key); ok {
			contact = max(contact, seen)
		}
		c := slices.Index(healths, cur)
		if real := level(now - contact); real < c {
			return healths[real] // a recent contact: better
		}
		if watched := level(now - max(contact, since)); watched > c {
			return healths[watched] // silent long enough under this leader: worse
		}
		return cur
	}
	r := s.state.Peek() // point reads: no view taken per tick (sweep.go)
	var out []fsm.HealthChange
	for _, g := range r.Gateways() {
		if h := want(gatewayKey(g.ID), g.UpdatedAt, g.Health); h != g.Health {
			out = append(out, fsm.HealthChange{Gateway: true, ID: g.ID, Health: h})
		}
	}
	for _, w := range r.Workers("") {
		if h := want(workerKey(w.ID), w.UpdatedAt, w.Health); h != w.Health {
			out = append(out, fsm.HealthChange{ID: w.ID, Health: h})
		}
	}
	return out
}

// RouteInput routes a queued job to a gateway.
type RouteInput struct {
	JobID        string
	Capabilities []string
	Labels       map[string]string
	// Key makes a repeat answer the first route (fsm.RouteSpec.Key).
	Key   string
	Actor fsm.Actor
}

// Route routes a queued job to the least loaded healthy gateway that meets
// its requirements and has free capacity (fsm.RouteCommand). With none,
// nothing changes and the error is fsm.ErrNoHealthyGateway.
func (s *Service) Route(ctx context.Context, in RouteInput) (*fsm.Job, *fsm.Gateway, uint64, error) {
	if in.JobID == "" {
		return nil, nil, 0, invalid("job_id is required")
	}
	if len(in.Capabilities) > maxCapabilities {
		return nil, nil, 0, invalid("at most %d capabilities", maxCapabilities)
	}
	for _, c := range in.Capabilities {
		if !ValidName(c) {
			return nil, nil, 0, invalid("capability %q must be 1-128 characters of letters, digits, '_', '.', ':' or '-'", c)
		}
	}
	if err := checkLabels("labels", in.Labels); err != nil {
		return nil, nil, 0, err
	}
	if len(in.Key) > 256 {
		return nil, nil, 0, invalid("idempotency_key is longer than 256 bytes")
	}
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return nil, nil, 0, ErrUpgradeInProgress
	}
	res, idx, err := s.Propose(ctx, fsm.CmdRoute, &fsm.RouteCommand{Now: s.now(), JobID: in.JobID,
		Spec: fsm.RouteSpec{Capabilities: in.Capabilities, Labels: in.Labels, Key: in.Key}, Actor: in.Actor})
	if err != nil {
		return nil, nil, idx, err
	}
	return res.Job, res.Gateway, idx, nil
}
