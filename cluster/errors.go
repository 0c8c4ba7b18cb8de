package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Sentinel errors returned by this package (the others are in info.go).
// Match them with errors.Is; raft's own errors are translated into these at
// the package boundary.
var (
	// ErrCorruptStore means the on-disk raft store failed its consistency
	// check; the node refuses to start rather than serve or vote with it.
	ErrCorruptStore = errors.New("cluster: raft store failed consistency check")
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
