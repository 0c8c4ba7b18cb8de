package cluster

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Connections pooled per peer and the I/O timeout of the raft transport
// (NetworkTransport's values before the binary transport).
const (
	raftMaxPool = 3
	raftTimeout = 10 * time.Second
)

// newTransport makes the node's raft transport on RaftAddr: a binTransport
// over plain TCP, or over mutual TLS when the node has a TLS config.
func (n *Node) newTransport() (*binTransport, error) {
	cfg := &n.cfg
	logger := cfg.Logger.Named("raft-net")
	var stream raft.StreamLayer
	if cfg.TLS != nil {
		sl, err := newTLSStreamLayerFor(cfg.RaftAddr, cfg.TLS, logger)
		if err != nil {
			return nil, fmt.Errorf("raft TLS transport on %s: %w", cfg.RaftAddr, err)
		}
		stream = sl
	} else {
		advertise, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
		if err != nil {
			return nil, fmt.Errorf("resolve RaftAddr: %w", err)
		}
		sl, err := newTCPStreamLayer(cfg.RaftAddr, advertise)
		if err != nil {
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
		}
		stream = sl
	}
	t := newBinTransport(stream, raftMaxPool, raftTimeout, cfg.RaftMsgpack, logger)
	t.setPeerBinary(n.peerServesBinary)
	return t, nil
}

// peerServesBinary reports whether the node id, at addr, has gossiped that
// it serves the binary raft protocol of this build. A peer known only
// from a join, peers.json or AddVoter, or gossiping another address, is
// dialled with msgpack.
func (n *Node) peerServesBinary(id raft.ServerID, addr raft.ServerAddress) bool {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	p, ok := n.peers[string(id)]
	return ok && p.binary == binVersion && p.RaftAddr == string(addr)
}
