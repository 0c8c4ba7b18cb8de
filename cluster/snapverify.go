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

	"github.com/hashicorp/raft"
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
// So before raft opens, verifySnapshots checks every snapshot kept: meta.json
// parses and names its directory, state.bin has the size and the CRC-64
// meta.json gives; and, when the snapshot has one, that meta.json agrees
// with the check file spine wrote beside it (snapCheckName), which records
// the fields raft put in meta.json and carries a CRC-32C of its own. Any
// mismatch refuses the start (ErrCorruptStore, naming the file).
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
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range ents {
		// raft ignores files and unfinished (.tmp) snapshots too.
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if err := verifySnapshot(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func snapCorrupt(path, why string) error {
	return corruptFile("raft snapshot file", path, why)
}

// verifySnapshot checks one snapshot directory.
func verifySnapshot(dir string) error {
	metaPath := filepath.Join(dir, "meta.json")
	meta, err := readSnapMeta(metaPath)
	if err != nil {
		return snapCorrupt(metaPath, err.Error())
	}
	if meta.ID != filepath.Base(dir) {
		return snapCorrupt(metaPath, fmt.Sprintf("it names snapshot %q, not its directory's", meta.ID))
	}
	if meta.Version < raft.SnapshotVersionMin || meta.Version > raft.SnapshotVersionMax {
		return snapCorrupt(metaPath, fmt.Sprintf("snapshot version %d, which raft does not know", meta.Version))
	}
	if err := checkSnapMeta(dir, meta); err != nil {
		return err
	}
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
	if n != meta.Size {
		return snapCorrupt(statePath, fmt.Sprintf("%d bytes, but %s says %d", n, metaPath, meta.Size))
	}
	if got := h.Sum(nil); !bytes.Equal(got, meta.CRC) {
		return snapCorrupt(statePath, fmt.Sprintf("its CRC-64 is %x, but %s says %x", got, metaPath, meta.CRC))
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
// every snapshot it creates and holding meta.json against it on Open.
type checkedSnapshots struct {
	*raft.FileSnapshotStore
	dir string // raft/snapshots
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

func (s *checkedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(s.dir, id)
	m, err := readSnapMeta(filepath.Join(dir, "meta.json"))
	if err == nil {
		err = checkSnapMeta(dir, m)
	} else {
		err = snapCorrupt(filepath.Join(dir, "meta.json"), err.Error())
	}
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return meta, rc, nil
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

// writeSynced writes v as JSON to path and syncs the file and its directory.
func writeSynced(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
