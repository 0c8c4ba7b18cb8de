package fsm

import "fmt"

// The cluster's level: rules that change how existing commands apply come
// into force at one entry of the log, the same on every replica, once every
// server runs a build that knows them. Before that entry a node applies
// every command as the oldest build of the cluster does, so a rolling
// upgrade never has two replicas disagree about the same entry; from it on,
// every node applies the new rules. The level only rises, and it is part of
// the state (snapshot version 9).
//
// The level is also the one thing the service layer asks before it uses
// newer behaviour (a command type, a field, a rule): every command type up
// to the level command is applied by every build that reaches
// LevelIdentity, and the dispatch command by every build that reaches
// LevelDelivery.
//
// Each node gossips the highest level its build supports (LatestLevel; a
// build from before that gossip is known by its highest command type), and
// the leader raises the cluster to the highest level every server of the
// configuration supports. A build that adds a level adds its constant,
// bumps LatestLevel, puts its new rules behind `a.t.level >= LevelX` in the
// state machine, and has the service propose its new command types or
// fields only behind the service's level check (queue's atLevel).

// Levels.
const (
	// LevelIdentity: who a caller is comes from its credential, never from
	// a name it chooses (identity.go): a routed job's target says it is a
	// gateway, a worker id belongs to the role that first used it, and a
	// lease's steps check the caller's role and worker id as well as its
	// token.
	LevelIdentity = 1

	// LevelDelivery: routed tasks are delivered to push gateways (a
	// dispatch leases the task for its gateway, docs/controlplane.md), and
	// a lease a gateway's death ended names the gateway.
	LevelDelivery = 2

	// LevelTagged: entries are written in the tagged encoding (fields.go),
	// one command type per operation, its options as optional fields; the
	// forms of builds before it are still read.
	LevelTagged = 3

	// LevelPolicies: recurring schedules, rate limits, named tokens and
	// result contracts (schedule.go, ratelimit.go, tokens.go, contract.go):
	// their command types and the fields they add to jobs and streams.
	LevelPolicies = 4

	// LevelTaskDefaults: a developer-queue task takes its stream's
	// defaults (concurrency key and limit, rate limit, result contract)
	// as a job created there does (cmd_task.go).
	LevelTaskDefaults = 5

	// LevelCompleteNext: a complete may carry the claimant's next claim
	// (CompleteCommand.Next), applied in the same entry once the complete
	// is accepted.
	LevelCompleteNext = 6
	// LatestLevel is the highest level this build applies.
	LatestLevel = LevelCompleteNext
)

// LevelCommand raises the cluster's level to Level (a lower or equal level
// changes nothing).
type LevelCommand struct {
	Now   int64
	Level int
}

func init() {
	register(CmdLevel, "level", func() command { return new(LevelCommand) })
}

func (c *LevelCommand) encode(e *enc) { e.varint(c.Now); e.int(c.Level) }
func (c *LevelCommand) decode(d *dec) { c.Now = d.varint(); c.Level = d.int() }

func (c *LevelCommand) apply(a *applier) *Result {
	if c.Level > LatestLevel {
		// The leader raised the cluster past what this build knows: going on
		// would apply the next entries by other rules than the replicas that
		// know it. Stop, as for a command type this build does not know.
		panic(fmt.Sprintf("fsm: entry %d raises the cluster to level %d; this build applies up to level %d: upgrade this node", a.index, c.Level, LatestLevel))
	}
	if c.Level <= a.t.level {
		return &Result{}
	}
	from := a.t.level
	a.t.level = c.Level
	if from < LevelIdentity && c.Level >= LevelIdentity {
		a.tagRoutedTargets()
	}
	return &Result{}
}

// Level returns the cluster's level in this state (for a Reader from Peek,
// the state applied so far, read without waiting for the writer).
func (r *Reader) Level() int {
	if r.t != nil {
		return r.t.level
	}
	return int(r.f.level.Load())
}
