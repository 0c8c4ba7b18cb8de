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
// A build that adds a level adds its rules behind `a.t.level >= LevelX`
// and a row to levelGates naming the newest command type it adds: gossip
// tells a node's build by the highest command type it applies, and the
// leader raises the level only once every server applies that type.

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

	// LatestLevel is the highest level this build applies.
	LatestLevel = LevelTagged
)

// levelGates names, per level, the command type every server must apply
// before the leader may raise the cluster to that level.
var levelGates = [LatestLevel + 1]CommandType{LevelIdentity: CmdLevel, LevelDelivery: CmdDispatch, LevelTagged: CmdDispatch}

// LevelGate is the command type every server must apply before the leader
// raises the cluster to level (0: no such level in this build).
func LevelGate(level int) CommandType {
	if level < 1 || level > LatestLevel {
		return 0
	}
	return levelGates[level]
}

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
