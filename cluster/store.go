package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

const (
	raftDirName   = "raft"
	raftDBName    = "raft.db"
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
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	bolt   *raftboltdb.BoltStore // nil if both log and stable stores were overridden
}

func openStores(cfg *Config) (*stores, error) {
	s := &stores{logs: cfg.LogStore, stable: cfg.StableStore, snaps: cfg.SnapshotStore}
	raftDir := filepath.Join(cfg.DataDir, raftDirName)
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return nil, err
	}
	if s.logs == nil || s.stable == nil {
		path := filepath.Join(raftDir, raftDBName)
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
		s.bolt = bs
		if s.logs == nil {
			s.logs = bs
		}
		if s.stable == nil {
			s.stable = bs
		}
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
		fss, err := raft.NewFileSnapshotStoreWithLogger(raftDir, DefaultSnapshotRetain, cfg.Logger.Named("snapshot"))
		if err != nil {
			s.close()
			return nil, err
		}
		s.snaps = fss
	}
	return s, nil
}

func (s *stores) close() error {
	if s.bolt != nil {
		return s.bolt.Close()
	}
	return nil
}
