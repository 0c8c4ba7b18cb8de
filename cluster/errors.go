package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Sentinel errors returned by this package. Match them with errors.Is; raft's
// own errors are translated into these at the package boundary.
var (
	// ErrNotLeader means this node is not the (ready) leader, and the
	// operation was not started: it definitely had no effect.
	ErrNotLeader = errors.New("cluster: not the leader")

	// ErrOutcomeUnknown means a write was proposed but its fate is unknown:
	// leadership was lost, the apply timed out or the caller gave up. The
	// command may or may not commit; callers must not report a definite
	// failure.
	ErrOutcomeUnknown = errors.New("cluster: outcome of write unknown")

	// ErrNoLeader means the cluster currently has no known leader.
	ErrNoLeader = errors.New("cluster: no leader")

	// ErrShutdown means the node has been shut down.
	ErrShutdown = errors.New("cluster: node is shut down")

	// ErrUnknownServer means a membership operation named a server that is
	// not in the raft configuration.
	ErrUnknownServer = errors.New("cluster: unknown server")

	// ErrCorruptStore means the on-disk raft store failed its consistency
	// check; the node refuses to start rather than serve or vote with it.
	ErrCorruptStore = errors.New("cluster: raft store failed consistency check")

	// ErrInvalidConfig means Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("cluster: invalid config")
)

// translateProposeErr maps the error of a proposal future (Apply) into this
// package's errors. Anything that happened after the command reached raft and
// is not a definite rejection is reported as ErrOutcomeUnknown.
func translateProposeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrShutdown)
	default:
		// raft.ErrLeadershipLost, raft.ErrEnqueueTimeout and anything
		// unexpected: the entry may already be in some logs.
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	}
}

// translateOpErr maps the error of a non-write raft future (membership,
// barrier, verify, transfer) into this package's errors.
func translateOpErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	default:
		return err
	}
}
