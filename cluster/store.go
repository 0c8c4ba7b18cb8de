package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"go.etcd.io/bbolt"
)

const (
	raftDirName   = "raft"
	raftDBName    = "raft.db"
	walDirName    = "wal"
	snapDirName   = "snapshots"
	peersFileName = "peers.json"
	logCacheSize  = 512
	boltOpenWait  = 2 * time.Second
)

// checkBolt runs bbolt's consistency check over an existing database file
// (bbolt checksums only its meta pages, so a torn or rotted page is otherwise
// found only when read). A missing file is fine: it is a new node.
func checkBolt(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: boltOpenWait})
	if errors.Is(err, bbolt.ErrTimeout) {
		// Locked, not damaged: never tell the operator to empty it.
		return fmt.Errorf("open %s: %w: another process holds it (is another spine running on this data directory?)", path, err)
	}
	if err != nil {
		return fmt.Errorf("%w: open %s: %v", ErrCorruptStore, path, err)
	}
	defer db.Close()
	var errs []error
	err = db.View(func(tx *bbolt.Tx) error {
		for cerr := range tx.Check() {
			errs = append(errs, cerr)
			if len(errs) >= 10 {
				// Drain so the checker goroutine can finish.
				for range tx.Check() {
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptStore, path, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s: %v", ErrCorruptStore, path, errors.Join(errs...))
	}
	return nil
}

// stores is what New opens on disk (or takes from the test hooks).
type stores struct {
	backend string // LogBackendWAL or LogBackendBolt; "" if both were overridden
	logs    raft.LogStore
	stable  raft.StableStore
	snaps   raft.SnapshotStore
	closer  io.Closer // the on-disk log/stable store, nil if overridden
	counted *countingLogStore
	overlap *overlapLog // nil with SerialLogWrite
}

// countingLogStore counts the batches raft appends to the log (each one
// write and one fsync of the WAL) and the entries in them: their ratio is
// how well group commit is working. It also adds up the time the appends
// take, which is mostly the disk's flush: every write a client is told about
// waits for one on the leader and one on a follower.
type countingLogStore struct {
	raft.LogStore
	appends, entries atomic.Uint64
	appendNanos      atomic.Uint64
}

func (c *countingLogStore) StoreLog(l *raft.Log) error {
	return c.StoreLogs([]*raft.Log{l})
}

func (c *countingLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	if err := c.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	c.appendNanos.Add(uint64(time.Since(start)))
	c.appends.Add(1)
	c.entries.Add(uint64(len(logs)))
	return nil
}

// GetLog refuses entries below the log's first index. raft-wal truncates
// the head of its log logically and keeps serving the dropped entries while
// their segment is still on disk; a leader would then stream a follower
// entries that a snapshot has replaced, instead of the snapshot raft expects
// to send once it has compacted them away.
func (c *countingLogStore) GetLog(index uint64, l *raft.Log) error {
	first, err := c.LogStore.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return c.LogStore.GetLog(index, l)
}

// IsMonotonic passes on the wrapped store's answer: raft compacts a
// monotonic store (raft-wal) differently after restoring a snapshot.
func (c *countingLogStore) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// pickBackend decides which log backend serves raftDir: the one already on
// disk, else the configured one, else WAL.
func pickBackend(raftDir, want string) (string, error) {
	_, boltErr := os.Stat(filepath.Join(raftDir, raftDBName))
	_, walErr := os.Stat(filepath.Join(raftDir, walDirName))
	hasBolt, hasWAL := boltErr == nil, walErr == nil
	switch {
	case hasBolt && hasWAL:
		return "", fmt.Errorf("%w: %s holds both %s and %s/; remove the one not in use", ErrInvalidConfig, raftDir, raftDBName, walDirName)
	case hasBolt && want == LogBackendWAL, hasWAL && want == LogBackendBolt:
		have := LogBackendBolt
		if hasWAL {
			have = LogBackendWAL
		}
		return "", fmt.Errorf("%w: log backend %q asked for, but %s already holds a %q log (this node's data would be lost: keep %q, or start the node with an empty data dir and let it catch up)",
			ErrInvalidConfig, want, raftDir, have, have)
	case hasBolt:
		return LogBackendBolt, nil
	case hasWAL:
		return LogBackendWAL, nil
	case want != "":
		return want, nil
	}
	return LogBackendWAL, nil
}

func openStores(cfg *Config, fatal func(error)) (*stores, error) {
	s := &stores{logs: cfg.LogStore, stable: cfg.StableStore, snaps: cfg.SnapshotStore}
	raftDir := filepath.Join(cfg.DataDir, raftDirName)
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return nil, err
	}
	if s.logs == nil || s.stable == nil {
		backend, err := pickBackend(raftDir, cfg.LogBackend)
		if err != nil {
			return nil, err
		}
		var logs raft.LogStore
		var stable raft.StableStore
		switch backend {
		case LogBackendWAL:
			walDir := filepath.Join(raftDir, walDirName)
			w, err := openWAL(walDir, cfg.Logger, cfg.walSegmentSize)
			if err != nil {
				return nil, err
			}
			// Term and vote are checked against their checksums (stableverify.go).
			cs, err := openCheckedStable(w, filepath.Join(walDir, metadb.FileName))
			if err != nil {
				w.Close()
				return nil, err
			}
			logs, stable, s.closer = w, cs, w
		case LogBackendBolt:
			path := filepath.Join(raftDir, raftDBName)
			bs, err := openBolt(path)
			if err != nil {
				return nil, err
			}
			cs, err := openCheckedStable(bs, path)
			if err != nil {
				bs.Close()
				return nil, err
			}
			logs, stable, s.closer = bs, cs, bs
		}
		s.backend = backend
		if s.logs == nil {
			s.logs = logs
		}
		if s.stable == nil {
			s.stable = stable
		}
	}
	s.counted = &countingLogStore{LogStore: s.logs}
	s.logs = s.counted
	if !cfg.SerialLogWrite {
		s.overlap = newOverlapLog(s.logs, fatal)
		s.logs = s.overlap
	}
	if cfg.LogStore == nil {
		cached, err := raft.NewLogCache(logCacheSize, s.logs)
		if err != nil {
			s.close()
			return nil, err
		}
		s.logs = cached
	}
	if s.snaps == nil {
		// Every snapshot kept is checked, the newest as raft restores it
		// (snapverify.go).
		snaps, err := openSnapshots(raftDir, cfg.Logger.Named("snapshot"))
		if err != nil {
			s.close()
			return nil, err
		}
		s.snaps = snaps
	}
	return s, nil
}

// openWAL opens (or creates) the raft-wal log in dir. Every StoreLogs is one
// append and one fsync of the tail segment; entries carry checksums, and a
// torn tail left by a crash is cut back to the last whole batch on open.
// Segments are written with zeros ahead of their appends where that helps
// (zeroAheadFS).
func openWAL(dir string, logger hclog.Logger, segmentSize int) (*wal.WAL, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := verifyWAL(dir); err != nil {
		return nil, err
	}
	vfs := newZeroAheadFS(dir)
	logger.Debug("raft log segments", "dir", dir, "zeroed_ahead", vfs.on)
	return openWALWith(dir, logger, segmentSize, vfs)
}

// openWALWith opens the raft-wal log in dir on the given file system.
func openWALWith(dir string, logger hclog.Logger, segmentSize int, vfs *zeroAheadFS) (*wal.WAL, error) {
	if segmentSize <= 0 {
		segmentSize = wal.DefaultSegmentSize
	}
	// raft-wal's segment list is checked against its checksum before the
	// WAL reads it, and written with one (stableverify.go).
	meta, err := verifyWALMeta(dir)
	if err != nil {
		return nil, err
	}
	w, err := wal.Open(dir, wal.WithLogger(logger.Named("wal")), wal.WithSegmentSize(segmentSize),
		wal.WithSegmentFiler(segment.NewFiler(dir, vfs)), wal.WithMetaStore(newCheckedWALMeta(meta)))
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrCorruptStore, dir, err)
	}
	return w, nil
}

// openBolt opens the raft-boltdb/v2 store at path after a consistency check.
func openBolt(path string) (*raftboltdb.BoltStore, error) {
	if err := checkBolt(path); err != nil {
		return nil, err
	}
	bs, err := raftboltdb.New(raftboltdb.Options{
		Path: path,
		// The freelist is rebuilt by scanning at open instead of being
		// rewritten on every commit: fewer pages written per fsync'ed
		// batch (Consul's no_freelist_sync). The map freelist keeps that
		// cheap as the file grows.
		BoltOptions: &bbolt.Options{Timeout: boltOpenWait, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
		NoSync:      false, // an ack means "on disk on a majority"; never turn this off
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return bs, nil
}

func (s *stores) close() error {
	var errs []error
	if s.overlap != nil {
		errs = append(errs, s.overlap.Close())
	}
	if s.closer != nil {
		errs = append(errs, s.closer.Close())
	}
	return errors.Join(errs...)
}
