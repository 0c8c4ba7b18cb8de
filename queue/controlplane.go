package queue

import (
	"context"
	"fmt"
	"net/url"

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

// proposeRegistry proposes a registry command once every node applies them.
func (s *Service) proposeRegistry(ctx context.Context, t fsm.CommandType, cmd interface{}) (*fsm.Result, uint64, error) {
	if !s.allApply(fsm.CmdWorkerDeregister) {
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
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdGatewayRegister, &fsm.GatewayRegisterCommand{Now: s.now(), ID: in.ID,
		Address: in.Address, Metadata: in.Metadata, Capacity: in.Capacity, Actor: in.Actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Gateway, idx, nil
}

// DeregisterGateway removes a gateway and its workers (returned).
func (s *Service) DeregisterGateway(ctx context.Context, id string, actor fsm.Actor) (*fsm.Gateway, []*fsm.Worker, uint64, error) {
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdGatewayDeregister, &fsm.GatewayDeregisterCommand{Now: s.now(), ID: id, Actor: actor})
	if err != nil {
		return nil, nil, idx, err
	}
	return res.Gateway, res.Workers, idx, nil
}

// RegisterWorker registers in.ID under its gateway, or updates it.
func (s *Service) RegisterWorker(ctx context.Context, in WorkerInput) (*fsm.Worker, uint64, error) {
	if !ValidName(in.ID) {
		return nil, 0, invalid("worker id must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
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
	res, idx, err := s.proposeRegistry(ctx, fsm.CmdWorkerRegister, &fsm.WorkerRegisterCommand{Now: s.now(), ID: in.ID,
		Gateway: in.Gateway, Capabilities: in.Capabilities, Metadata: in.Metadata, Capacity: in.Capacity, Actor: in.Actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Worker, idx, nil
}

// DeregisterWorker removes a worker.
func (s *Service) DeregisterWorker(ctx context.Context, id string, actor fsm.Actor) (*fsm.Worker, uint64, error) {
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
