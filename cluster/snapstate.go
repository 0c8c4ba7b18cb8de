package cluster

import (
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Opening snapshots: raft's store opened for a starting node, each
// snapshot's state checked as it is read, and raft kept from falling back
// to an older snapshot while the node starts (snapverify.go says why).

// openSnapshots opens raft's snapshot store in raftDir for a node that is
// starting (started ends the start), with every snapshot kept checked.
func openSnapshots(raftDir string, logger hclog.Logger) (*checkedSnapshots, error) {
	fss, err := raft.NewFileSnapshotStoreWithLogger(raftDir, DefaultSnapshotRetain, logger)
	if err != nil {
		return nil, err
	}
	// The one raft restores first, in raft's own order.
	list, err := fss.List()
	if err != nil {
		return nil, err
	}
	st := &snapStart{}
	if len(list) > 0 {
		st.newest = list[0].ID
	}
	s := &checkedSnapshots{FileSnapshotStore: fss, dir: filepath.Join(raftDir, snapDirName)}
	if st.checks, err = checkSnapshots(s.dir, st.newest); err != nil {
		return nil, err
	}
	s.start.Store(st)
	return s, nil
}

// Open opens a snapshot for raft to restore or send: its meta.json checked,
// its state read through its check. It replaces raft's own Open, which
// reads state.bin whole for its CRC before handing out a byte of it.
func (s *checkedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	st := s.start.Load()
	if st != nil {
		if err := st.open(id, s.dir); err != nil {
			return nil, nil, err
		}
	}
	dir := filepath.Join(s.dir, id)
	meta, err := checkSnapshotMeta(dir)
	if err != nil {
		return nil, nil, err
	}
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		return nil, nil, snapCorrupt(statePath, err.Error())
	}
	var checked func(error)
	if st != nil {
		checked = st.check
	}
	return &meta.SnapshotMeta, newCheckedState(f, statePath, meta, checked), nil
}

// whenRestored tells a starting node's store how to know that the state
// machine holds a restored snapshot.
func (s *checkedSnapshots) whenRestored(restored func() bool) {
	if st := s.start.Load(); st != nil {
		st.mu.Lock()
		st.restored = restored
		st.mu.Unlock()
	}
}

// started ends the node's start: it waits for the check of the snapshots
// raft did not restore, and returns the first error of any check.
func (s *checkedSnapshots) started() error {
	st := s.start.Swap(nil)
	if st == nil {
		return nil
	}
	err := st.checks.wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.failed != nil {
		return st.failed
	}
	return err
}

// snapStart is what a starting node knows of raft's restore: raft restores
// the newest snapshot, and may open no other before the node has started.
type snapStart struct {
	newest string
	checks *snapshotChecks // of the others
	// restored, if set, reports whether the state machine holds a
	// restored snapshot (or more): raft opening a snapshot then is not a
	// fall back, but raft at work (sending one to a follower) before the
	// node's start has quite ended.
	restored func() bool
	mu       sync.Mutex
	opened   bool
	// checked: the newest's state was read whole, and failed is what it
	// did not match (or why raft may not go on).
	checked bool
	failed  error
}

// open lets raft open snapshot id while the node starts: the newest, once.
// Another open is raft falling back, the newest not restored.
func (st *snapStart) open(id, dir string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case !st.opened && id == st.newest:
		st.opened = true
		return nil
	case st.opened && st.restored != nil && st.restored():
		return nil
	case !st.opened:
		st.opened = true
		st.failed = fmt.Errorf("raft opened snapshot %s before the newest, %s", id, st.newest)
	case st.failed == nil && !st.checked:
		// Damaged, or refused by the state machine?
		st.failed = verifySnapshot(filepath.Join(dir, st.newest))
	}
	if st.failed == nil {
		st.failed = fmt.Errorf("raft snapshot %s, the newest, did not restore (raft logged why): an older one does not hold what this node's log after it needs; restore it with a build that reads it, or empty this node's data directory and add it again (docs/operations.md)", st.newest)
	}
	return st.failed
}

// check records what reading the newest's state whole found.
func (st *snapStart) check(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.checked = true
	if st.failed == nil {
		st.failed = err
	}
}

// checkedState reads a snapshot's state.bin, holding it against its
// meta.json's size and CRC-64 as it goes: a goroutine reads the file ahead
// in chunks and sums them, and hands out the last chunk only once the whole
// file has matched. No reader (the state machine restoring it, raft
// sending it to a follower) ever gets every byte of a damaged state: the
// read that would reach its end returns the mismatch instead. checked, if
// set, learns what reading it whole found; a reader closed before the end
// then has the rest read and checked (a node's start).
type checkedState struct {
	f       *os.File
	path    string
	meta    *snapMeta
	checked func(error)
	chunks  chan stateChunk
	free    chan []byte
	stop    chan struct{}
	done    sync.WaitGroup
	cur     []byte // what is left of the chunk being handed out
	buf     []byte // that chunk's buffer
	err     error  // io.EOF once every byte is handed out, or the mismatch
	closed  bool
}

// stateChunk is a chunk of the state, or (err set) its end.
type stateChunk struct {
	b   []byte
	err error
}

const (
	stateChunkLen  = 1 << 20
	stateChunksOut = 4 // buffers: one being read, one held back, two handed over
)

func newCheckedState(f *os.File, path string, meta *snapMeta, checked func(error)) *checkedState {
	c := &checkedState{f: f, path: path, meta: meta, checked: checked,
		chunks: make(chan stateChunk, stateChunksOut), free: make(chan []byte, stateChunksOut), stop: make(chan struct{})}
	for range stateChunksOut {
		c.free <- make([]byte, stateChunkLen)
	}
	c.done.Add(1)
	go c.readAhead()
	return c
}

// readAhead reads the file in chunks, summing them, and sends each on once
// the next is read; the last, once the file has matched its meta.json.
func (c *checkedState) readAhead() {
	defer c.done.Done()
	send := func(ch stateChunk) bool {
		select {
		case c.chunks <- ch:
			return true
		case <-c.stop:
			return false
		}
	}
	h := crc64.New(snapCRC)
	var n int64
	var held []byte
	for {
		var buf []byte
		select {
		case buf = <-c.free:
		case <-c.stop:
			return
		}
		m, err := io.ReadFull(c.f, buf[:cap(buf)])
		buf = buf[:m]
		h.Write(buf)
		n += int64(m)
		if err == nil {
			if held != nil && !send(stateChunk{b: held}) {
				return
			}
			held = buf
			continue
		}
		end := error(io.EOF)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			end = snapCorrupt(c.path, fmt.Sprintf("read: %v", err))
		} else if mismatch := stateMatches(c.path, c.meta, n, h.Sum(nil)); mismatch != nil {
			end = mismatch
		}
		if end == io.EOF {
			for _, b := range [][]byte{held, buf} {
				if len(b) > 0 && !send(stateChunk{b: b}) {
					return
				}
			}
		}
		send(stateChunk{err: end})
		return
	}
}

func (c *checkedState) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.buf != nil {
			c.free <- c.buf[:0]
			c.buf = nil
		}
		ch := <-c.chunks
		if ch.err != nil {
			c.err = ch.err
			if c.checked != nil {
				var mismatch error
				if ch.err != io.EOF {
					mismatch = ch.err
				}
				c.checked(mismatch)
			}
			continue
		}
		c.cur, c.buf = ch.b, ch.b
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *checkedState) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.checked != nil {
		// A start: the state is checked whole, whatever its reader read.
		for c.err == nil {
			c.cur = nil
			c.Read(nil)
		}
	}
	close(c.stop)
	c.done.Wait()
	return c.f.Close()
}
