package fsm

import (
	"bufio"
	"encoding/binary"
	"io"

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
	snapEnd      byte = 255
)

// snapshotVersion changes when the record layout changes incompatibly.
// Restore also reads versions 1 and 2. Version 3 adds the developer
// queue: the task fields of a job record, and session, stream and registry
// records. A state without any of it is written as version 2, which a node
// of the version before the developer queue can read (a rolling upgrade:
// such state exists only once every node applies its commands). Version 4
// adds gateway and worker records; a state without them is written as
// version 3 (or 2), for the same reason. Version 5 adds the event feed
// and when each attempt started; it is written once the feed is on, which
// the leader turns on only once every server applies it (feed.go). Version
// 6 adds paused streams and a job's cancel (its state, and when and why a
// cancel was asked), progress, checkpoint, priority, schedule, backoff,
// concurrency key and dependencies;
// it is written once a pause, a cancel, a progress or a create with those
// options has been applied, which the leader proposes only once every
// server applies them. Version 7 adds a job's requirements, the
// capabilities of the claim that took it and the workers it is not for, and
// the capability sets seen; it is written once a create with requirements,
// a claim with capabilities or a release not for its worker has been
// applied. Version 8 adds the streams' job defaults and a job's
// dependency policy; it is written once defaults have been set or a job
// created with the policy. Version 9 adds the cluster's level and the
// worker ids' bindings; it is written from LevelIdentity on, which the
// leader raises to only once every server applies it.
const snapshotVersion = 9

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

type snapEndRecord struct {
	Jobs, Blobs, Chunks int
	// Version 3.
	Sessions int `codec:",omitempty"`
	Streams  int `codec:",omitempty"`
	Registry int `codec:",omitempty"`
	// Version 4.
	Gateways int `codec:",omitempty"`
	Workers  int `codec:",omitempty"`
	// Version 5.
	FeedHead int `codec:",omitempty"`
	Feed     int `codec:",omitempty"`
	// Version 6.
	Paused int `codec:",omitempty"`
	// Version 7.
	Caps int `codec:",omitempty"`
	// Version 8.
	Defaults int `codec:",omitempty"`
	// Version 9.
	Level     int `codec:",omitempty"`
	WorkerIDs int `codec:",omitempty"`
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
	version := 2
	if s.t.devq() {
		version = 3
	}
	if s.t.controlPlane() {
		version = 4
	}
	if s.t.feed.on {
		version = 5
	}
	if s.t.jobControl {
		version = 6
	}
	if s.t.capabilities {
		version = 7
	}
	if s.t.version8 {
		version = 8
	}
	if s.t.level >= LevelIdentity {
		version = 9
	}
	head := snapHeaderRecord{Version: version, Index: s.index}
	if s.hashKnown {
		head.Hash, head.HashIndex = s.hash[:], s.hashIndex
	}
	if err := mp.Encode(head); err != nil {
		return err
	}
	var (
		e   enc
		hdr [1 + binary.MaxVarintLen64]byte
	)
	put := func(t byte) error {
		hdr[0] = t
		n := binary.PutUvarint(hdr[1:], uint64(len(e.b)))
		if _, err := bw.Write(hdr[:1+n]); err != nil {
			return err
		}
		_, err := bw.Write(e.b)
		return err
	}
	var (
		end snapEndRecord
		err error
	)
	// Jobs, then blobs, then chunks, each in key order; stop at the first
	// write error.
	s.t.byID.Ascend(func(it idItem) bool {
		e.b = e.b[:0]
		e.job(it.j, version)
		err = put(snapJob)
		end.Jobs++
		return err == nil
	})
	if err == nil {
		s.t.blobs.Ascend(func(it blobItem) bool {
			e.b = e.b[:0]
			e.blob(it.b)
			err = put(snapBlob)
			end.Blobs++
			return err == nil
		})
	}
	if err == nil {
		s.t.chunks.Ascend(func(it chunkItem) bool {
			e.b = e.b[:0]
			e.chunk(it.c)
			err = put(snapChunk)
			end.Chunks++
			return err == nil
		})
	}
	if err == nil && version >= 3 {
		s.t.sessions.Ascend(func(it sessionItem) bool {
			e.b = e.b[:0]
			e.session(it.s)
			err = put(snapSession)
			end.Sessions++
			return err == nil
		})
	}
	if err == nil && version >= 3 {
		s.t.streams.Ascend(func(it streamItem) bool {
			e.b = e.b[:0]
			e.stream(it.s)
			err = put(snapStream)
			end.Streams++
			return err == nil
		})
	}
	if err == nil && version >= 3 && s.t.registry != nil {
		e.b = e.b[:0]
		e.registry(s.t.registry)
		err = put(snapRegistry)
		end.Registry++
	}
	if err == nil && version >= 4 {
		s.t.gateways.Ascend(func(it gatewayItem) bool {
			e.b = e.b[:0]
			e.gateway(it.g)
			err = put(snapGateway)
			end.Gateways++
			return err == nil
		})
	}
	if err == nil && version >= 4 {
		s.t.workers.Ascend(func(it workerItem) bool {
			e.b = e.b[:0]
			e.worker(it.w)
			err = put(snapWorker)
			end.Workers++
			return err == nil
		})
	}
	if err == nil && version >= 5 {
		e.b = e.b[:0]
		e.uvarint(s.t.feed.latest)
		err = put(snapFeedHead)
		end.FeedHead++
	}
	if err == nil && version >= 5 {
		l := &s.t.feed
		for seq := l.oldest(); seq != 0 && seq <= l.latest && err == nil; seq++ {
			e.b = e.b[:0]
			e.feedEvent(l.get(seq))
			err = put(snapFeed)
			end.Feed++
		}
	}
	if err == nil && version >= 6 {
		for _, p := range s.t.pausedList() {
			e.b = e.b[:0]
			e.pause(p)
			if err = put(snapPause); err != nil {
				break
			}
			end.Paused++
		}
	}
	if err == nil && version >= 7 {
		for _, c := range s.t.capsSeenList() {
			e.b = e.b[:0]
			e.str(c.Key)
			e.varint(c.At)
			if err = put(snapCaps); err != nil {
				break
			}
			end.Caps++
		}
	}
	if err == nil && version >= 8 {
		for _, d := range s.t.defaultsList() {
			e.b = e.b[:0]
			e.defaults(d)
			if err = put(snapDefaults); err != nil {
				break
			}
			end.Defaults++
		}
	}
	if err == nil && version >= 9 {
		e.b = e.b[:0]
		e.int(s.t.level)
		err = put(snapLevel)
		end.Level++
	}
	if err == nil && version >= 9 {
		s.t.workerIDs.Ascend(func(it bindingItem) bool {
			e.b = e.b[:0]
			e.binding(it.b)
			err = put(snapWorkerID)
			end.WorkerIDs++
			return err == nil
		})
	}
	if err != nil {
		return err
	}
	if err := bw.WriteByte(snapEnd); err != nil {
		return err
	}
	if err := mp.Encode(end); err != nil {
		return err
	}
	return bw.Flush()
}

// Release is a no-op: the view is garbage collected.
func (s *snapshot) Release() {}
