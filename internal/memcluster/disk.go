package memcluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Disk models the flush of a log device: a write handed to Flush returns
// once the device has made it durable, which takes Fsync. Flushes on one
// Disk never overlap. With GroupCommit, every write that arrives while a
// flush runs is made durable by the next flush, all together (a log engine
// shared by several Raft groups, or raft-wal batching one group's appends);
// without it, each write waits for a flush of its own, in arrival order (logs
// that share a device but not a log file, each fsyncing its own).
//
// A Disk used by one log alone behaves the same either way: raft hands a
// log one append at a time. Several clusters given the same Disk (Options.
// Disks) model several groups whose replicas on one machine share its disk.
//
// The flush is a sleep, so it costs no CPU; Go rounds sleeps shorter than
// about a millisecond up to about a millisecond on an idle runtime, so an
// Fsync under 1 ms is not what the flush takes. FlushTime says what they took.
type Disk struct {
	Fsync       time.Duration
	GroupCommit bool

	mu       sync.Mutex
	flushing bool            // a flusher goroutine is running
	waiting  []chan struct{} // writes not yet covered by a flush

	flushes, writes, flushNanos atomic.Uint64

	// flush, when set, is what a flush does instead of sleeping (tests).
	flush func()
}

// NewDisk returns a disk whose flushes take fsync.
func NewDisk(fsync time.Duration, groupCommit bool) *Disk {
	return &Disk{Fsync: fsync, GroupCommit: groupCommit}
}

// Flush blocks until a flush that started after the call has ended.
func (d *Disk) Flush() {
	done := make(chan struct{})
	d.mu.Lock()
	d.waiting = append(d.waiting, done)
	if !d.flushing {
		d.flushing = true
		go d.flushLoop()
	}
	d.mu.Unlock()
	<-done
}

// flushLoop flushes while writes wait, then ends; the next write starts a
// new one.
func (d *Disk) flushLoop() {
	d.mu.Lock()
	for len(d.waiting) > 0 {
		n := 1
		if d.GroupCommit {
			n = len(d.waiting)
		}
		batch := d.waiting[:n:n]
		d.waiting = d.waiting[n:]
		d.mu.Unlock()
		start := time.Now()
		if d.flush != nil {
			d.flush()
		} else {
			time.Sleep(d.Fsync)
		}
		d.flushNanos.Add(uint64(time.Since(start)))
		d.flushes.Add(1)
		d.writes.Add(uint64(len(batch)))
		for _, c := range batch {
			close(c)
		}
		d.mu.Lock()
	}
	d.flushing = false
	d.mu.Unlock()
}

// Flushes returns how many flushes the disk has made.
func (d *Disk) Flushes() uint64 { return d.flushes.Load() }

// Writes returns how many writes its flushes made durable.
func (d *Disk) Writes() uint64 { return d.writes.Load() }

// FlushTime returns the time its flushes took, added up.
func (d *Disk) FlushTime() time.Duration { return time.Duration(d.flushNanos.Load()) }

// diskLog is a node's in-memory log whose appends wait for its disk.
type diskLog struct {
	*raft.InmemStore
	disk *Disk
}

func (l diskLog) StoreLogs(logs []*raft.Log) error {
	if err := l.InmemStore.StoreLogs(logs); err != nil {
		return err
	}
	l.disk.Flush()
	return nil
}

func (l diskLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }
