package fsm

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// CommandType is the first byte of every log entry. The list only grows at
// the end; values are never reused.
type CommandType uint8

// Command types.
const (
	CmdCreate      CommandType = 1
	CmdClaim       CommandType = 2
	CmdHeartbeat   CommandType = 3
	CmdComplete    CommandType = 4
	CmdFail        CommandType = 5
	CmdRelease     CommandType = 6
	CmdReap        CommandType = 7
	CmdComment     CommandType = 8
	CmdBlobChunk   CommandType = 9
	CmdBlobCommit  CommandType = 10
	CmdRedrive     CommandType = 11
	CmdPurge       CommandType = 12
	lastKnownCmdID CommandType = CmdPurge
)

// IgnoreUnknownFlag, set on a command type, lets a node that does not know
// the type skip the entry instead of stopping (for optional commands added
// in a rolling upgrade).
const IgnoreUnknownFlag CommandType = 128

func (t CommandType) String() string {
	switch t {
	case CmdCreate:
		return "create"
	case CmdClaim:
		return "claim"
	case CmdHeartbeat:
		return "heartbeat"
	case CmdComplete:
		return "complete"
	case CmdFail:
		return "fail"
	case CmdRelease:
		return "release"
	case CmdReap:
		return "reap"
	case CmdComment:
		return "comment"
	case CmdBlobChunk:
		return "blob_chunk"
	case CmdBlobCommit:
		return "blob_commit"
	case CmdRedrive:
		return "redrive"
	case CmdPurge:
		return "purge"
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// HeadRole is the role that may override ownership on every job.
const HeadRole = "head"

// Actor says who proposed a command: a role and, for the worker contract,
// a worker id.
type Actor struct {
	Role     string
	WorkerID string
}

func (a Actor) isHead() bool { return a.Role == HeadRole }

func (a Actor) String() string {
	if a.WorkerID != "" {
		return a.Role + "/" + a.WorkerID
	}
	return a.Role
}

// CreateCommand adds a queued job. A create whose idempotency key is already
// taken returns the existing job and changes nothing.
type CreateCommand struct {
	Now            int64
	ID             string
	Stream         string
	Target         string
	Payload        []byte
	MaxAttempts    int
	LeaseSeconds   int64
	TaskClass      string
	IdempotencyKey string
	Actor          Actor
}

// ClaimCommand takes a queued job under a new lease. With JobID set it claims
// that job; otherwise the oldest queued job of the first stream in Streams
// that has one, among jobs untargeted or targeted at one of Targets.
type ClaimCommand struct {
	Now        int64
	JobID      string
	Streams    []string
	Targets    []string
	Actor      Actor
	AttemptID  string
	LeaseToken string
	// LeaseNanos is the cluster's default lease; a job's own LeaseSeconds wins.
	LeaseNanos int64
}

// LeaseRef names the lease a worker acts under. The v0 API identifies the
// owner by role (Token empty); the worker contract by lease token and
// attempt id, which fence every call.
type LeaseRef struct {
	JobID     string
	AttemptID string
	Token     string
}

// HeartbeatCommand extends a running job's lease.
type HeartbeatCommand struct {
	Now        int64
	Ref        LeaseRef
	Actor      Actor
	LeaseNanos int64
}

// CompleteCommand finishes a running job with a result.
type CompleteCommand struct {
	Now    int64
	Ref    LeaseRef
	Actor  Actor
	Result []byte
	Stdout string
	Stderr string
}

// FailCommand ends a running attempt with an error. With Requeue the job goes
// back to the queue while it has attempts left, else to dead; without, it
// goes to failed.
type FailCommand struct {
	Now     int64
	Ref     LeaseRef
	Actor   Actor
	Error   JobError
	Requeue bool
	Stdout  string
	Stderr  string
}

// ReleaseCommand gives a running job back to the queue without counting it
// as a failure.
type ReleaseCommand struct {
	Now    int64
	Ref    LeaseRef
	Actor  Actor
	Reason string
}

// ReapCommand returns to the queue (or kills, at the attempt limit) up to Max
// running jobs whose lease expired at or before Now. Expiry is judged when
// the entry applies, so a heartbeat committed first wins.
type ReapCommand struct {
	Now int64
	Max int
}

// CommentCommand appends a comment to a job.
type CommentCommand struct {
	Now   int64
	JobID string
	Actor Actor
	Text  string
}

// PurgeCommand deletes up to Max done jobs that finished before Before (the
// retention cut-off the leader computed from its clock). Failed and dead
// jobs are kept: they wait in the dead-letter view for a human.
type PurgeCommand struct {
	Now    int64
	Before int64
	Max    int
}

// RedriveCommand puts a failed or dead job back in the queue with its
// attempts reset.
type RedriveCommand struct {
	Now   int64
	JobID string
	Actor Actor
}

// BlobChunkCommand stores one chunk of a blob being uploaded.
type BlobChunkCommand struct {
	BlobID string
	Seq    int
	Data   []byte
}

// BlobCommitCommand makes an uploaded blob readable once all its chunks are
// stored.
type BlobCommitCommand struct {
	Now         int64
	BlobID      string
	Size        int64
	ContentType string
	Chunks      int
}

var msgpackHandle = &codec.MsgpackHandle{}

// Encode returns the log entry for a command: its type byte then its body.
// cmd is the command struct of type t, or a pointer to it.
func Encode(t CommandType, cmd interface{}) ([]byte, error) {
	out, ok, err := encodeCommand([]byte{byte(t)}, t, cmd)
	if err != nil {
		return nil, err
	}
	if ok {
		return out, nil
	}
	// Not a command this package knows (an optional command of a newer
	// build, say): msgpack, as bodies were before the binary encoding.
	var body []byte
	if err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(cmd); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out = make([]byte, 1+len(body))
	out[0] = byte(t)
	copy(out[1:], body)
	return out, nil
}

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
