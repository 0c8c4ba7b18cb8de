package fsm

import (
	"bufio"
	"io"
	"slices"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// A snapshot is a header record, one record per object, and a trailer that
// counts them, so a truncated snapshot is detected on restore. Every record
// starts with its type byte. The header and trailer are msgpack (so any
// version can read the header and refuse a version it does not know); in
// version 2 each object record is a uvarint length and the object in the
// binary encoding of codec.go (version 1 wrote objects as msgpack).
const (
	snapHeader byte = 1
	snapJob    byte = 2
	snapBlob   byte = 3
	snapChunk  byte = 4
	// Version 3: the developer queue's catalogs and registry (devq.go).
	snapSession  byte = 5
	snapStream   byte = 6
	snapRegistry byte = 7
	// Version 4: the control plane's registry (controlplane.go).
	snapGateway byte = 8
	snapWorker  byte = 9
	// Version 5: the event feed (feed.go).
	snapFeedHead byte = 10
	snapFeed     byte = 11
	// Version 6: paused streams (cmd_pause.go).
	snapPause byte = 12
	// Version 7: the capability sets seen (capabilities.go).
	snapCaps byte = 13
	// Version 8: the streams' job defaults (cmd_defaults.go).
	snapDefaults byte = 14
	// Version 9: the cluster's level and the worker ids' bindings
	// (level.go, identity.go).
	snapLevel    byte = 15
	snapWorkerID byte = 16
	// Version 11: recurring schedules (schedule.go), the rate limits'
	// buckets (ratelimit.go), named tokens (tokens.go).
	snapSchedule byte = 17
	snapRate     byte = 18
	snapToken    byte = 19
	snapEnd      byte = 255
)

// snapshotVersion is the newest snapshot version: it changes when the
// record layout does (snapVersions says how). Restore reads every version
// from 1.
const snapshotVersion = 11

// snapTagged is the version from which every record is in the tagged
// encoding (fields.go): a field added to a stored object is one line of its
// field list, and a reader skips the fields it does not know.
const snapTagged = 10

// versionRow is what one snapshot version adds: new record kinds (the
// rows of the table with that since) or fields of a job record.
type versionRow struct {
	n int
	// holds reports whether a state holds anything the version adds.
	holds func(t *tables) bool
	// restored completes a state read from a snapshot of this version or
	// a later one (nil: nothing to do): what the snapshot's version says
	// the state may hold.
	restored func(w *writer) error
}

// snapVersions lists the versions from 3. A state is written at the newest
// version whose holds is true (2 when none is): the oldest that holds all
// of it, so a node of the build before a feature still reads the snapshots
// of a cluster that has not used it (a rolling upgrade; the leader
// proposes a feature's commands only once every server applies them).
// Version 1 wrote objects as msgpack; 2 in the binary encoding of
// codec.go.
var snapVersions = []versionRow{
	// The developer queue: the task fields of a job, the session and
	// stream catalogs, the registry (devq.go).
	{n: 3, holds: (*tables).devq},
	// The control plane: gateways and workers, a job's route
	// (controlplane.go).
	{n: 4, holds: (*tables).controlPlane},
	// The event feed, and when each attempt started running (feed.go);
	// the leader turns the feed on only once every server applies it.
	{n: 5, holds: func(t *tables) bool { return t.feed.on }, restored: func(w *writer) error {
		w.t.feed.on = true
		return w.t.feed.restored(w.feedHead)
	}},
	// Job control: paused streams; a job's cancel (when and why it was
	// asked), progress, checkpoint, priority, schedule, backoff,
	// concurrency key and dependencies.
	{n: 6, holds: func(t *tables) bool { return t.jobControl }, restored: func(w *writer) error {
		w.t.jobControl = true
		return nil
	}},
	// Capability routing: a job's requirements, the capabilities of the
	// claim that took it and the workers it is not for; the capability
	// sets seen (capabilities.go).
	{n: 7, holds: func(t *tables) bool { return t.capabilities }, restored: func(w *writer) error {
		w.t.capabilities = true
		return nil
	}},
	// The streams' job defaults and a job's dependency policy
	// (cmd_defaults.go).
	{n: 8, holds: func(t *tables) bool { return t.version8 }, restored: func(w *writer) error {
		w.t.version8 = true
		return nil
	}},
	// The cluster's level and the worker ids' bindings (level.go,
	// identity.go), from LevelIdentity on, which the leader raises to
	// only once every server applies it.
	{n: 9, holds: func(t *tables) bool { return t.level >= LevelIdentity }},
	// Every record in the tagged encoding, from LevelTagged on, which the
	// leader raises to only once every server supports it. A state at it
	// is written whole at this version, so the flags above (which said
	// when a state might hold what versions 6 to 8 added) no longer
	// decide anything.
	{n: snapTagged, holds: func(t *tables) bool { return t.level >= LevelTagged }},
	// Schedules, rate limits, named tokens and result contracts (record
	// kinds 17 to 19 and the fields they add), from LevelPolicies on.
	{n: 11, holds: func(t *tables) bool { return t.level >= LevelPolicies }},
}

// writeVersion returns the version a snapshot of t is written at.
func (t *tables) writeVersion() int {
	version := 2
	for _, v := range snapVersions {
		if v.holds(t) {
			version = max(version, v.n)
		}
	}
	return version
}

// SnapshotVersion is the newest snapshot version this build writes (and
// so the newest it reads).
const SnapshotVersion = snapshotVersion

// maxSnapRecord bounds one object record, so a corrupt length cannot make
// restore allocate without limit.
const maxSnapRecord = 1 << 30

type snapHeaderRecord struct {
	Version int
	Index   uint64
	// Hash is the state hash after the command at HashIndex, the last one
	// at or below Index (hash.go). Absent from snapshots of builds that
	// kept no hash: readers of those ignore the fields.
	Hash      []byte `codec:",omitempty"`
	HashIndex uint64 `codec:",omitempty"`
}

type snapshot struct {
	t     *tables // a published view: never changes
	index uint64
	// the state hash at index (hash.go)
	hash      Hash
	hashIndex uint64
	hashKnown bool
}

// Persist streams every record to sink, ending with a trailer that counts
// them so a truncated snapshot is detected on restore.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	mp := codec.NewEncoder(bw, msgpackHandle)
	if err := bw.WriteByte(snapHeader); err != nil {
		return err
	}
	version := s.t.writeVersion()
	head := snapHeaderRecord{Version: version, Index: s.index}
	if s.hashKnown {
		head.Hash, head.HashIndex = s.hash[:], s.hashIndex
	}
	if err := mp.Encode(head); err != nil {
		return err
	}
	// Each kind the version holds, in kind order, its records in key
	// order; stop at the first write error.
	r := recordWriter{bw: bw, version: version}
	var end snapTrailer
	for _, k := range snapKinds {
		if k == nil || k.since > version {
			continue
		}
		r.kind, r.n = k.kind, 0
		if k.write(s.t, version, &r); r.err != nil {
			return r.err
		}
		end = end.add(k, r.n)
	}
	if err := bw.WriteByte(snapEnd); err != nil {
		return err
	}
	if err := mp.Encode(end); err != nil {
		return err
	}
	return bw.Flush()
}

// snapTrailer is the trailer: each kind's name and count, a msgpack map
// ordered by name (as msgpack wrote the struct of counts earlier builds
// declared, so the bytes stay the same).
type snapTrailer []any

// MapBySlice makes msgpack write the pairs as a map.
func (snapTrailer) MapBySlice() {}

// add counts n records of kind k: always for the kinds of version 1, else
// only when there are any.
func (t snapTrailer) add(k *snapKind, n int) snapTrailer {
	if n == 0 && k.since > 1 {
		return t
	}
	i := 0
	for i < len(t) && t[i].(string) < k.name {
		i += 2
	}
	return slices.Insert(t, i, any(k.name), any(n))
}

// Release is a no-op: the view is garbage collected.
func (s *snapshot) Release() {}
