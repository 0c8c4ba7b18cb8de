package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// The state hash is a running hash of every command this state machine has
// applied, in log order:
//
//	h(i) = SHA-256(h(prev) || index || term || data)
//
// where prev is the previous command entry. It is a fingerprint of the
// applied log, and so of the state: the state machine is deterministic, so
// two replicas with the same hash at an index hold the same state there.
// Replicas whose logs diverged (two entries at one index) have different
// hashes from that index on, forever, which is what makes a divergence
// impossible to miss: nodes gossip their latest (index, hash) and each one
// compares every peer's report against its own hash at that index.
//
// The hash is carried in snapshots, so a node restored from one continues
// the same chain. A snapshot written by a build that kept no hash leaves it
// unknown until the node restores one that has it.

// Hash is a state hash (an alias, so that interfaces elsewhere can name
// the plain array type).
type Hash = [sha256.Size]byte

// hashRingSize is how many recent (index, hash) pairs a node keeps to
// answer "what was your hash at index i": enough to cover the gossip delay
// between two nodes at any throughput this cluster reaches.
const hashRingSize = 1 << 14

// chain is the running hash. Only the FSM goroutine advances it, under the
// writer's lock (hash, index, known); readers see published points under mu.
type chain struct {
	hash  Hash
	index uint64 // index of the last command folded in; 0 before the first
	known bool   // false after restoring a snapshot that carried no hash

	mu sync.Mutex
	// ring holds the latest points, one per command; next is where the
	// next one goes, n how many are held.
	ring    [hashRingSize]hashPoint
	next, n int
	// start is the chain's value at floor, the index it (re)started from:
	// a lookup below every point held, but at or above floor, is start as
	// long as no point has been dropped from the ring.
	start Hash
	floor uint64
	last  hashPoint // the latest point
	// lastKnown mirrors known for readers.
	lastKnown bool
}

type hashPoint struct {
	index uint64
	hash  Hash
}

// fold adds one command entry to the chain.
func (c *chain) fold(index, term uint64, data []byte) {
	var hdr [16]byte
	binary.BigEndian.PutUint64(hdr[:8], index)
	binary.BigEndian.PutUint64(hdr[8:], term)
	h := sha256.New()
	h.Write(c.hash[:])
	h.Write(hdr[:])
	h.Write(data)
	h.Sum(c.hash[:0])
	c.index = index
}

// publish makes the chain's current point visible to readers. It is called
// once per command, so that every index can be asked about.
func (c *chain) publish() {
	p := hashPoint{index: c.index, hash: c.hash}
	c.mu.Lock()
	c.ring[c.next] = p
	c.next = (c.next + 1) % hashRingSize
	if c.n < hashRingSize {
		c.n++
	}
	c.last = p
	c.mu.Unlock()
}

// reset restarts the chain at a snapshot's point.
func (c *chain) reset(index uint64, h Hash, known bool) {
	c.hash, c.index, c.known = h, index, known
	c.mu.Lock()
	c.next, c.n = 0, 0
	c.start, c.floor = h, index
	c.last = hashPoint{index: index, hash: h}
	c.lastKnown = known
	c.mu.Unlock()
}

// latest returns the newest published point.
func (c *chain) latest() (hashPoint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.lastKnown
}

// at returns the hash after every command at or below index, if the ring
// can tell. applied is the caller's applied index: a node cannot answer for
// an index it has not applied.
func (c *chain) at(index, applied uint64) (Hash, bool) {
	if index > applied {
		return Hash{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lastKnown {
		return Hash{}, false
	}
	// Newest first: the first point at or below index is the answer.
	for k := 1; k <= c.n; k++ {
		p := c.ring[(c.next-k+hashRingSize)%hashRingSize]
		if p.index <= index {
			return p.hash, true
		}
	}
	if c.n < hashRingSize && index >= c.floor {
		return c.start, true
	}
	return Hash{}, false
}

// StateHash returns the running hash of every command applied so far and
// the index of the last of them (0 before any). ok is false when the hash
// is unknown: the node was restored from a snapshot that carried none.
func (f *FSM) StateHash() (index uint64, h Hash, ok bool) {
	p, known := f.chain.latest()
	return p.index, p.hash, known
}

// StateHashAt returns the running hash after every command at or below
// index: the same value on every replica that applied the same log. ok is
// false if this node has not applied index yet, no longer remembers it
// (the last 16,384 commands are kept), or its hash is unknown.
func (f *FSM) StateHashAt(index uint64) (Hash, bool) {
	return f.chain.at(index, f.applied.Load())
}
