package cluster

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/internal/durable"
)

// Snapshot checks.
//
// raft's FileSnapshotStore keeps each snapshot in raft/snapshots/<id>/ as
// meta.json (index, term, membership, size and the CRC-64 of the state) and
// state.bin. At start raft restores the newest snapshot it can open and
// silently falls back to an older one when one fails (a meta.json that does
// not parse, a version it does not know, a CRC mismatch): a node can then
// come up from an older state than its log was compacted against. A byte
// flipped in meta.json's index, term or membership is not even noticed.
//
// So every snapshot kept is checked: meta.json parses and names its
// directory, state.bin has the size and the CRC-64 meta.json gives; and,
// when the snapshot has one, meta.json agrees with the check file spine
// wrote beside it (snapCheckName), which records the fields raft put in
// meta.json and carries a CRC-32C of its own. Any mismatch refuses the
// start (ErrCorruptStore, naming the file). Every meta.json is checked
// before raft opens the store, and the state of every snapshot but the
// newest in the background while raft restores the newest; the newest's
// state is checked as raft reads it (checkedState), in one pass with the
// restore rather than one before it. While the node starts raft may open
// the newest snapshot only: its fall back to an older one is refused
// (snapStart).
//
// The check file is written into the snapshot's temporary directory before
// raft moves it into place (checkedSnapshots.Create), so every snapshot
// this version writes has one; a snapshot without one was written by an
// older version and is checked without it.
const snapCheckName = "spine-check.json"

var snapCRC = crc64.MakeTable(crc64.ECMA) // raft's, for state.bin

// snapCheck is the content of a snapshot's check file: what raft puts in
// meta.json, known to spine as the snapshot is written.
type snapCheck struct {
	Format             int    `json:"format"`
	ID                 string `json:"id"`
	Version            int    `json:"version"`
	Index              uint64 `json:"index"`
	Term               uint64 `json:"term"`
	ConfigurationIndex uint64 `json:"configuration_index"`
	Configuration      uint32 `json:"configuration_crc32c"` // of its JSON
	Size               int64  `json:"size"`
	StateCRC           string `json:"state_crc64"` // hex, as raft's meta CRC
	Sum                uint32 `json:"sum"`         // CRC-32C of this record's JSON with Sum 0
}

func (c snapCheck) sum() uint32 {
	c.Sum = 0
	b, _ := json.Marshal(c)
	return crc32.Checksum(b, walCRC)
}

func configurationSum(cfg raft.Configuration) uint32 {
	b, _ := json.Marshal(cfg)
	return crc32.Checksum(b, walCRC)
}

// snapMeta is raft's meta.json (file_snapshot.go fileSnapshotMeta).
type snapMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// verifySnapshots checks every snapshot in dir (raft/snapshots), reading
// each state.bin once. A missing dir is a node without snapshots.
func verifySnapshots(dir string) error {
	c, err := checkSnapshots(dir, "")
	if err != nil {
		return err
	}
	return c.wait()
}

// snapshotChecks is the check of the snapshots' states under way in the
// background.
type snapshotChecks struct {
	done chan struct{}
	err  error // once done is closed
}

func (c *snapshotChecks) wait() error {
	<-c.done
	return c.err
}

// checkSnapshots checks the meta.json (and check file) of every snapshot
// in dir, and starts checking the state of each but skip's.
func checkSnapshots(dir, skip string) (*snapshotChecks, error) {
	c := &snapshotChecks{done: make(chan struct{})}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		close(c.done)
		return c, nil
	} else if err != nil {
		return nil, err
	}
	var states []*snapMeta
	var dirs []string
	for _, e := range ents {
		// raft ignores files and unfinished (.tmp) snapshots too.
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		meta, err := checkSnapshotMeta(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if e.Name() != skip {
			states, dirs = append(states, meta), append(dirs, filepath.Join(dir, e.Name()))
		}
	}
	go func() {
		defer close(c.done)
		for i, meta := range states {
			if c.err = verifyState(dirs[i], meta); c.err != nil {
				return
			}
		}
	}()
	return c, nil
}

func snapCorrupt(path, why string) error {
	return corruptFile("raft snapshot file", path, why)
}

// verifySnapshot checks one snapshot directory.
func verifySnapshot(dir string) error {
	meta, err := checkSnapshotMeta(dir)
	if err != nil {
		return err
	}
	return verifyState(dir, meta)
}

// checkSnapshotMeta checks a snapshot's meta.json (and check file) and
// returns it.
func checkSnapshotMeta(dir string) (*snapMeta, error) {
	metaPath := filepath.Join(dir, "meta.json")
	meta, err := readSnapMeta(metaPath)
	if err != nil {
		return nil, snapCorrupt(metaPath, err.Error())
	}
	if meta.ID != filepath.Base(dir) {
		return nil, snapCorrupt(metaPath, fmt.Sprintf("it names snapshot %q, not its directory's", meta.ID))
	}
	if meta.Version < raft.SnapshotVersionMin || meta.Version > raft.SnapshotVersionMax {
		return nil, snapCorrupt(metaPath, fmt.Sprintf("snapshot version %d, which raft does not know", meta.Version))
	}
	if err := checkSnapMeta(dir, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

// verifyState reads a snapshot's state.bin whole and holds it against its
// meta.json.
func verifyState(dir string, meta *snapMeta) error {
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		return snapCorrupt(statePath, err.Error())
	}
	defer f.Close()
	h := crc64.New(snapCRC)
	n, err := io.Copy(h, bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return snapCorrupt(statePath, fmt.Sprintf("read: %v", err))
	}
	return stateMatches(statePath, meta, n, h.Sum(nil))
}

// stateMatches holds n bytes of state.bin whose CRC-64 is sum against its
// meta.json.
func stateMatches(statePath string, meta *snapMeta, n int64, sum []byte) error {
	metaPath := filepath.Join(filepath.Dir(statePath), "meta.json")
	if n != meta.Size {
		return snapCorrupt(statePath, fmt.Sprintf("%d bytes, but %s says %d", n, metaPath, meta.Size))
	}
	if !bytes.Equal(sum, meta.CRC) {
		return snapCorrupt(statePath, fmt.Sprintf("its CRC-64 is %x, but %s says %x", sum, metaPath, meta.CRC))
	}
	return nil
}

// readSnapMeta parses meta.json as raft does (the first JSON value).
func readSnapMeta(path string) (*snapMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	meta := &snapMeta{}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(meta); err != nil {
		return nil, fmt.Errorf("it does not parse (%v)", err)
	}
	return meta, nil
}

// checkSnapMeta holds meta against the snapshot's check file, if it has
// one.
func checkSnapMeta(dir string, meta *snapMeta) error {
	checkPath := filepath.Join(dir, snapCheckName)
	b, err := os.ReadFile(checkPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil // written by an older version
	} else if err != nil {
		return snapCorrupt(checkPath, err.Error())
	}
	var c snapCheck
	if err := json.Unmarshal(b, &c); err != nil || c.Format != 1 || c.Sum != c.sum() {
		return snapCorrupt(checkPath, "it does not match its own checksum")
	}
	metaPath := filepath.Join(dir, "meta.json")
	for _, d := range []struct {
		what      string
		got, want any
	}{
		{"id", meta.ID, c.ID},
		{"version", int(meta.Version), c.Version},
		{"index", meta.Index, c.Index},
		{"term", meta.Term, c.Term},
		{"configuration index", meta.ConfigurationIndex, c.ConfigurationIndex},
		{"configuration (CRC-32C of its JSON)", configurationSum(meta.Configuration), c.Configuration},
		{"size", meta.Size, c.Size},
		{"state CRC-64", hex.EncodeToString(meta.CRC), c.StateCRC},
	} {
		if d.got != d.want {
			return snapCorrupt(metaPath, fmt.Sprintf("its %s is %v, but the snapshot was written with %v (%s)", d.what, d.got, d.want, snapCheckName))
		}
	}
	return nil
}

// checkedSnapshots is raft's file snapshot store writing a check file into
// every snapshot it creates, and opening each checked: meta.json against
// the check file at once, state.bin as it is read (checkedState).
type checkedSnapshots struct {
	*raft.FileSnapshotStore
	dir   string // raft/snapshots
	start atomic.Pointer[snapStart]
}

func (s *checkedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &checkedSink{SnapshotSink: sink, dir: filepath.Join(s.dir, sink.ID()+".tmp"), hash: crc64.New(snapCRC),
		check: snapCheck{Format: 1, ID: sink.ID(), Version: int(version), Index: index, Term: term,
			ConfigurationIndex: configurationIndex, Configuration: configurationSum(configuration)}}, nil
}

// checkedSink computes the state's size and CRC-64 as raft writes it and
// writes the check file before raft finishes the snapshot.
type checkedSink struct {
	raft.SnapshotSink
	dir    string // the snapshot's temporary directory
	hash   hash.Hash64
	check  snapCheck
	closed bool
}

func (s *checkedSink) Write(b []byte) (int, error) {
	n, err := s.SnapshotSink.Write(b)
	s.hash.Write(b[:n])
	s.check.Size += int64(n)
	return n, err
}

func (s *checkedSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.check.StateCRC = hex.EncodeToString(s.hash.Sum(nil))
	s.check.Sum = s.check.sum()
	if err := writeSynced(filepath.Join(s.dir, snapCheckName), s.check); err != nil {
		s.SnapshotSink.Cancel()
		return fmt.Errorf("write the snapshot's check file: %w", err)
	}
	return s.SnapshotSink.Close()
}

func (s *checkedSink) Cancel() error {
	s.closed = true
	return s.SnapshotSink.Cancel()
}

// writeSynced writes v as JSON to path, durably (a crash leaves the file
// whole or absent).
func writeSynced(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return durable.WriteFile(path, append(b, '\n'), 0o600)
}
