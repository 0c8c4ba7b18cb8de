package cluster

import (
	"encoding/hex"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
)

// StateHasher is implemented by a state machine that keeps a running hash
// of the commands it has applied (fsm.FSM does): equal on every replica
// that applied the same log, different from the first divergent entry on.
type StateHasher interface {
	// StateHash is the hash of everything applied so far and the index of
	// the last command in it; ok is false when the hash is unknown.
	StateHash() (index uint64, hash [32]byte, ok bool)
	// StateHashAt is the hash after every command at or below index, if
	// this node has applied index and still remembers it.
	StateHashAt(index uint64) (hash [32]byte, ok bool)
}

// hashGossipInterval is how often a node gossips its latest state hash.
const hashGossipInterval = time.Second

// hashReport is what a peer said its state hash was at an index.
type hashReport struct {
	index   uint64
	hash    string // hex
	checked bool   // compared (or found not comparable) already
}

// StateHash returns this node's latest state hash in hex and the index of
// the last command in it ("" when the FSM keeps none or it is unknown).
func (n *Node) StateHash() (index uint64, hash string) {
	if n.hasher == nil {
		return 0, ""
	}
	idx, h, ok := n.hasher.StateHash()
	if !ok {
		return 0, ""
	}
	return idx, hex.EncodeToString(h[:])
}

// HashChecks returns how many peers' state hashes this node has compared
// with its own at the same index, and how many of them differed. Any
// mismatch means the replicas diverged.
func (n *Node) HashChecks() (checks, mismatches uint64) {
	return n.hashChecks.Load(), n.hashMismatches.Load()
}

// hashLoop publishes this node's latest state hash in its gossip metadata
// and compares the reports peers have made that it could not check yet
// (it had not applied their index when they arrived).
func (n *Node) hashLoop() {
	defer n.wg.Done()
	t := time.NewTicker(hashGossipInterval)
	defer t.Stop()
	var published uint64
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-t.C:
		}
		if idx, h := n.StateHash(); h != "" && idx != published {
			n.hashMeta.Store(&hashReport{index: idx, hash: h})
			if err := n.ml.UpdateNode(time.Second); err != nil {
				n.logger.Debug("gossip state hash", "error", err)
			} else {
				published = idx
			}
		}
		n.peersMu.Lock()
		ids := make([]string, 0, len(n.peers))
		for id, p := range n.peers {
			if p.report != nil && !p.report.checked {
				ids = append(ids, id)
			}
		}
		n.peersMu.Unlock()
		for _, id := range ids {
			n.checkPeerHash(id)
		}
	}
}

// peerHashReported records a peer's gossiped state hash and checks it.
func (n *Node) peerHashReported(id string, index uint64, hash string) {
	if hash == "" || n.hasher == nil {
		return
	}
	n.peersMu.Lock()
	p := n.peers[id]
	if p.report != nil && p.report.index == index && p.report.hash == hash {
		n.peersMu.Unlock()
		return
	}
	p.report = &hashReport{index: index, hash: hash}
	n.peers[id] = p
	n.peersMu.Unlock()
	n.checkPeerHash(id)
}

// checkPeerHash compares a peer's latest report with this node's hash at
// the same index, once this node has applied that index. A mismatch is
// logged at error level on every node that sees it and counted.
func (n *Node) checkPeerHash(id string) {
	n.peersMu.Lock()
	p, ok := n.peers[id]
	if !ok || p.report == nil || p.report.checked {
		n.peersMu.Unlock()
		return
	}
	rep := *p.report
	n.peersMu.Unlock()

	ours, ok := n.hasher.StateHashAt(rep.index)
	if !ok {
		if n.AppliedIndex() < rep.index {
			return // not applied here yet: the loop checks again
		}
		n.markChecked(id, rep)
		return // too old to remember, or this node's hash is unknown
	}
	n.markChecked(id, rep)
	if mine := hex.EncodeToString(ours[:]); mine != rep.hash {
		n.hashMismatches.Add(1)
		metrics.IncrCounter([]string{"cluster", "state_hash", "mismatches"}, 1)
		n.logger.Error("REPLICA DIVERGENCE: a peer's state hash differs from this node's at the same index; the replicas applied different logs",
			"peer", id, "index", rep.index, "peer_hash", rep.hash, "our_hash", mine)
		return
	}
	n.hashChecks.Add(1)
	metrics.IncrCounter([]string{"cluster", "state_hash", "checks"}, 1)
}

func (n *Node) markChecked(id string, rep hashReport) {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	if p, ok := n.peers[id]; ok && p.report != nil && p.report.index == rep.index && p.report.hash == rep.hash {
		p.report.checked = true
	}
}
