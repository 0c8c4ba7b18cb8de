package fsm

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// CommandType is the first byte of every log entry. The list only grows at
// the end; values are never reused. From LevelTagged on a leader writes
// one type per operation, its options as optional fields; the types marked
// "old form" are what builds before it wrote for some sets of options, and
// are read into the command named.
type CommandType uint8

// Command types.
const (
	CmdCreate     CommandType = 1
	CmdClaim      CommandType = 2
	CmdHeartbeat  CommandType = 3
	CmdComplete   CommandType = 4
	CmdFail       CommandType = 5
	CmdRelease    CommandType = 6
	CmdReap       CommandType = 7
	CmdComment    CommandType = 8
	CmdBlobChunk  CommandType = 9
	CmdBlobCommit CommandType = 10
	CmdRedrive    CommandType = 11
	CmdPurge      CommandType = 12
	CmdClaimNext  CommandType = 13 // old form of CmdClaim: the next job

	// The developer queue (devq.go).
	CmdSessionCreate CommandType = 14
	CmdSessionEnd    CommandType = 15
	CmdStreamCreate  CommandType = 16
	CmdStreamEnd     CommandType = 17
	CmdRegistrySet   CommandType = 18
	CmdTaskCreate    CommandType = 19
	CmdTaskPurge     CommandType = 20

	CmdClaimNextKeyed CommandType = 21 // old form of CmdClaim: Keyed

	// The control plane's registry (controlplane.go).
	CmdGatewayRegister   CommandType = 22
	CmdGatewayDeregister CommandType = 23
	CmdWorkerRegister    CommandType = 24
	CmdWorkerDeregister  CommandType = 25
	CmdHealthSet         CommandType = 26
	CmdRoute             CommandType = 27

	// The control plane's task state machine (cmd_task_step.go) and the
	// event feed (feed.go).
	CmdTaskStep CommandType = 28
	CmdFeedOn   CommandType = 29

	// An operator's pause or resume of a stream (cmd_pause.go), and head's
	// cancel of a job (cmd_cancel.go).
	CmdStreamPause CommandType = 30
	CmdCancel      CommandType = 31

	CmdProgress   CommandType = 32 // old form of CmdHeartbeat: Progress, Checkpoint
	CmdClaimBatch CommandType = 33 // old form of CmdClaim: AttemptIDs
	CmdCreateEx   CommandType = 34 // old form of CmdCreate: Priority, RunAt, backoff, concurrency, DependsOn

	// The leader's promotion of scheduled jobs whose time has come
	// (cmd_promote.go).
	CmdPromote CommandType = 35

	CmdReleaseEx      CommandType = 36 // old form of CmdRelease: NotBefore
	CmdCapable        CommandType = 37 // old form of CmdClaim: Capabilities, Probe
	CmdCreateRequires CommandType = 38 // old form of CmdCreate: Requires
	CmdReleaseNotFor  CommandType = 39 // old form of CmdRelease: NotFor

	// An operator's defaults for the jobs created in a stream
	// (cmd_defaults.go).
	CmdStreamDefaults CommandType = 40

	CmdCreateOpts CommandType = 41 // old form of CmdCreate: RunOnDepFailure

	// The leader's raise of the cluster's level, once every server runs a
	// build that knows it (level.go).
	CmdLevel CommandType = 42
	// A step of a routed task's delivery to a push gateway (dispatch.go).
	CmdDispatch CommandType = 43

	// From LevelPolicies: recurring schedules (44-47), rate limits
	// (48-49), named tokens (50-52) and result contracts (53). Each
	// feature's file declares the types it uses out of its range.
)

// IgnoreUnknownFlag, set on a command type, lets a node that does not know
// the type skip the entry instead of stopping (for optional commands added
// in a rolling upgrade).
const IgnoreUnknownFlag CommandType = 128

// HeadRole is the role that may override ownership on every job.
const HeadRole = "head"

// Actor says who proposed a command: a role and, for the worker contract,
// a worker id.
type Actor struct {
	Role     string
	WorkerID string
	// Token names the named token the caller authenticated with ("" for
	// an environment token), from LevelPolicies on (tokens.go).
	Token string
}

func (a Actor) isHead() bool { return a.Role == HeadRole }

func (a Actor) String() string {
	if a.WorkerID != "" {
		return a.Role + "/" + a.WorkerID
	}
	return a.Role
}

// LeaseRef names the lease a worker acts under. The v0 API identifies the
// owner by role (Token empty); the worker contract by lease token and
// attempt id, which fence every call.
type LeaseRef struct {
	JobID     string
	AttemptID string
	Token     string
}

var msgpackHandle = &codec.MsgpackHandle{}

// Encode returns the log entry for a command, as a cluster at this build's
// latest level writes it: its type byte then its body. cmd is the command
// struct of type t, or a pointer to it.
func Encode(t CommandType, cmd interface{}) ([]byte, error) { return EncodeAt(LatestLevel, t, cmd) }

// EncodeAt returns the log entry for a command as a cluster at level writes
// it: below LevelTagged, in the positional form the builds before it read.
//
// The entry is encoded into a pooled scratch buffer and copied out at its
// size: one allocation per entry, where growing the entry from nothing
// took one per doubling (six for a create with a 256-byte payload).
func EncodeAt(level int, t CommandType, cmd interface{}) ([]byte, error) {
	bp := encodeBufs.Get().(*[]byte)
	scratch, wt, ok, err := encodeCommand(append((*bp)[:0], byte(t)), level, t, cmd)
	if ok && err == nil {
		out := make([]byte, len(scratch))
		copy(out, scratch)
		out[0] = byte(wt)
		if cap(scratch) <= maxPooledEncode {
			*bp = scratch[:0]
			encodeBufs.Put(bp)
		}
		return out, nil
	}
	encodeBufs.Put(bp)
	if err != nil {
		return nil, err
	}
	// Not a command this package knows (an optional command of a newer
	// build, say): msgpack, as bodies were before the binary encoding.
	var body []byte
	if err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(cmd); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 1+len(body))
	out[0] = byte(t)
	copy(out[1:], body)
	return out, nil
}

// encodeBufs are EncodeAt's scratch buffers; one that grew past
// maxPooledEncode (a large payload's entry) is left to the collector
// rather than kept.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledEncode = 64 << 10

// MustEncode is Encode for commands built by the program itself, which
// always encode.
func MustEncode(t CommandType, cmd interface{}) []byte {
	b, err := Encode(t, cmd)
	if err != nil {
		panic(err)
	}
	return b
}

// decodeMsgpack decodes a legacy msgpack body.
func decodeMsgpack(body []byte, v interface{}) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("msgpack: %v", r)
		}
	}()
	return codec.NewDecoderBytes(body, msgpackHandle).Decode(v)
}
