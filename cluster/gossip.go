package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/spine-queue/spine/internal/durable"
)

// nodeMeta is the memberlist metadata each node gossips (kept well under
// memberlist's 512-byte limit).
type nodeMeta struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// Commands is the highest command type the node applies (version.go).
	Commands uint8 `json:"cmds,omitempty"`
	// Level is the highest cluster level the node supports (version.go);
	// absent from the builds before levels were gossiped, whose level the
	// command type tells.
	Level int `json:"level,omitempty"`
	// HashIndex and Hash are the node's latest state hash (hashcheck.go).
	HashIndex uint64 `json:"hash_index,omitempty"`
	Hash      string `json:"hash,omitempty"`
	// Down is, on the leader, the followers that have not answered its
	// AppendEntries lately (reach.go).
	Down []string `json:"down,omitempty"`
	// Transport is the binary raft protocol version the node serves
	// (bintransport.go); absent from builds that serve only msgpack.
	Transport uint8 `json:"transport,omitempty"`
}

// peerInfo is what this node knows about another node, from gossip, from a
// join answer, from AddVoter or from peers.json.
type peerInfo struct {
	Member
	alive    bool        // alive in memberlist right now
	report   *hashReport // its latest gossiped state hash
	commands uint8       // the highest command type it applies, as gossiped
	level    int         // the highest cluster level it supports, as gossiped (0: none gossiped)
	down     []string    // the followers it cannot reach, as it gossips while leader
	binary   uint8       // the binary raft protocol version it serves, as gossiped (0: none)
}

// peersFile is the JSON layout of DataDir/peers.json.
type peersFile struct {
	Nodes []Member `json:"nodes"`
}

// gossipDelegate implements memberlist.Delegate and memberlist.EventDelegate.
// Callbacks only update the peer map under a mutex and do non-blocking sends:
// they must never block memberlist.
type gossipDelegate struct {
	n *Node
}

func (d *gossipDelegate) NodeMeta(limit int) []byte {
	m := d.n.cfg.meta()
	if r := d.n.hashMeta.Load(); r != nil {
		m.HashIndex, m.Hash = r.index, r.hash
	}
	if down := d.n.lease.gossiped.Load(); down != nil {
		m.Down = *down
	}
	if d.n.bin != nil {
		m.Transport = binVersion
	}
	b, err := json.Marshal(m)
	if err == nil && len(b) > limit && len(m.Down) > 0 {
		m.Down = nil // the rest matters more
		b, err = json.Marshal(m)
	}
	if err != nil || len(b) > limit {
		return nil
	}
	return b
}

// The user messages and push/pull state carry the liveness map
// (liveness.go).
func (d *gossipDelegate) NotifyMsg(b []byte) { d.n.live.notifyMsg(b) }
func (d *gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte {
	if q := d.n.live.queue; q != nil {
		return q.GetBroadcasts(overhead, limit)
	}
	return nil
}
func (d *gossipDelegate) LocalState(join bool) []byte            { return d.n.live.localState() }
func (d *gossipDelegate) MergeRemoteState(buf []byte, join bool) { d.n.live.mergeState(buf) }

func (d *gossipDelegate) NotifyJoin(node *memberlist.Node)   { d.n.gossipEvent(node, true) }
func (d *gossipDelegate) NotifyUpdate(node *memberlist.Node) { d.n.gossipEvent(node, true) }
func (d *gossipDelegate) NotifyLeave(node *memberlist.Node)  { d.n.gossipEvent(node, false) }

// gossipEvent records a membership change and pokes the persister and the
// gossip reconciler.
func (n *Node) gossipEvent(node *memberlist.Node, alive bool) {
	var meta nodeMeta
	if len(node.Meta) > 0 {
		if err := json.Unmarshal(node.Meta, &meta); err != nil {
			n.logger.Warn("bad gossip metadata", "node", node.Name, "error", err)
		}
	}
	if meta.ID == "" {
		meta.ID = node.Name
	}
	if meta.ID == n.cfg.NodeID {
		return
	}
	gaddr := net.JoinHostPort(node.Addr.String(), strconv.Itoa(int(node.Port)))
	n.peersMu.Lock()
	p := n.peers[meta.ID]
	p.ID = meta.ID
	p.GossipAddr = gaddr
	if meta.RaftAddr != "" {
		p.RaftAddr = meta.RaftAddr
	}
	if meta.HTTPAddr != "" {
		p.HTTPAddr = meta.HTTPAddr
	}
	was := p.alive
	p.alive = alive
	if len(node.Meta) > 0 {
		p.commands, p.level = meta.Commands, meta.Level
		p.down = meta.Down
		p.binary = meta.Transport
	}
	n.peers[meta.ID] = p
	n.peersMu.Unlock()
	// One line per change of a member's health (not per metadata update).
	switch {
	case alive && !was:
		n.logger.Info("member joined", "member", meta.ID, "gossip", gaddr)
	case !alive && was && node.State == memberlist.StateLeft:
		n.logger.Info("member left", "member", meta.ID)
	case !alive && was:
		n.logger.Warn("member failed: gossip no longer reaches it", "member", meta.ID, "gossip", gaddr)
	}
	if alive {
		n.peerHashReported(meta.ID, meta.HashIndex, meta.Hash)
	}
	poke(n.peersDirty)
	poke(n.gossipKick)
	n.notifyLeaderChange()
}

// poke does a non-blocking send on a 1-buffered channel.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (n *Node) startMemberlist() error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	d := &gossipDelegate{n: n}
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.cfg.NodeID
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertiseAddr = host
	mc.AdvertisePort = port
	mc.Delegate = d
	mc.Events = d
	mc.LogOutput = nil
	mc.Logger = n.logger.Named("memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	// A restarted node may come back on a new address under the same name;
	// let it reclaim its name soon after the old incarnation is declared dead.
	mc.DeadNodeReclaimTime = 10 * time.Second
	// Gossip messages are a few hundred bytes (probes, acks, soft health):
	// compressing each made a new LZW writer per message, a third of what
	// an idle node allocates, for nothing. A peer still reads compressed
	// messages of an older build (compression is marked per message).
	mc.EnableCompression = false
	if n.keys != nil {
		// Every message sealed with the primary key; any key of the ring
		// opens one; a message no key opens is dropped.
		mc.Keyring = n.keys.ring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	// Liveness broadcasts are sent before memberlist exists to count the
	// members; until then there is nobody to send them to.
	n.live.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: 3, NumNodes: func() int {
		if ml := n.mlPtr.Load(); ml != nil {
			return ml.NumMembers()
		}
		return 1
	}}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start memberlist on %s: %w", n.cfg.GossipAddr, err)
	}
	n.ml = ml
	n.mlPtr.Store(ml)
	n.wg.Add(1)
	go n.downLoop()
	return nil
}

// gossipLoop keeps memberlist connected to every raft member (and, before
// this node is in a configuration, to every peer it has heard of). memberlist
// does not re-probe nodes it declared dead, so this is what heals gossip after
// a partition or a restart. Backoff 200ms..2s while someone is missing.
func (n *Node) gossipLoop(joinURLs []string) {
	defer n.wg.Done()
	backoff := 200 * time.Millisecond
	urlTurn := 0
	for {
		missing := n.missingGossipAddrs()
		if len(missing) > 0 {
			if _, err := n.ml.Join(missing); err != nil {
				n.logger.Debug("gossip join failed", "addrs", missing, "error", err)
			}
		} else if n.ml.NumMembers() <= 1 && len(joinURLs) > 0 {
			// No known peer to gossip with: ask a seed URL for the members.
			u := joinURLs[urlTurn%len(joinURLs)]
			urlTurn++
			if members, err := n.fetchMembers(u); err != nil {
				n.logger.Debug("fetch members from seed failed", "url", u, "error", err)
			} else {
				// No kick: the next round (after backoff) joins them, so a
				// seed that names no usable peer cannot make us spin.
				n.recordPeers(members)
			}
		}
		wait := 2 * time.Second
		if len(missing) > 0 || n.ml.NumMembers() <= 1 {
			wait = backoff
			backoff = min(backoff*2, 2*time.Second)
		} else {
			backoff = 200 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-n.shutdownCh:
			t.Stop()
			return
		case <-n.gossipKick:
			t.Stop()
		case <-t.C:
		}
	}
}

// missingGossipAddrs returns the gossip addresses of peers that should be in
// memberlist but are not alive there.
func (n *Node) missingGossipAddrs() []string {
	want := map[string]bool{}
	if cfg, err := n.configuration(); err == nil && len(cfg.Servers) > 0 {
		for _, s := range cfg.Servers {
			want[string(s.ID)] = true
		}
	}
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	var out []string
	for id, p := range n.peers {
		if id == n.cfg.NodeID || p.alive || p.GossipAddr == "" {
			continue
		}
		if len(want) > 0 && !want[id] {
			continue
		}
		out = append(out, p.GossipAddr)
	}
	sort.Strings(out)
	return out
}

// learnPeers records members learned from a join answer or AddVoter and
// wakes the gossip loop to connect to them.
func (n *Node) learnPeers(ms []Member) {
	n.recordPeers(ms)
	poke(n.gossipKick)
}

// recordPeers records members in the peer map and schedules a peers.json
// rewrite.
func (n *Node) recordPeers(ms []Member) {
	n.peersMu.Lock()
	for _, m := range ms {
		if m.ID == "" || m.ID == n.cfg.NodeID {
			continue
		}
		p := n.peers[m.ID]
		p.ID = m.ID
		if m.RaftAddr != "" {
			p.RaftAddr = m.RaftAddr
		}
		if m.HTTPAddr != "" {
			p.HTTPAddr = m.HTTPAddr
		}
		if m.GossipAddr != "" {
			p.GossipAddr = m.GossipAddr
		}
		n.peers[m.ID] = p
	}
	n.peersMu.Unlock()
	poke(n.peersDirty)
}

// joinedBinary records the binary raft protocol a joining node says it
// serves at its raft address, so the first AppendEntries to it need not be
// msgpack (reopened in binary once gossip tells). Its gossip overrides it.
// A wrong claim costs a failed connection, never a log (design.md §2).
func (n *Node) joinedBinary(m Member) {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	if p, ok := n.peers[m.ID]; ok && p.RaftAddr == m.RaftAddr && p.binary == 0 {
		p.binary = m.Transport
		n.peers[m.ID] = p
	}
}

func (n *Node) peer(id string) (peerInfo, bool) {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	p, ok := n.peers[id]
	return p, ok
}

func (n *Node) peersPath() string { return filepath.Join(n.cfg.DataDir, peersFileName) }

// loadPeers reads DataDir/peers.json, if any, into the peer map (not alive).
func (n *Node) loadPeers() error {
	b, err := os.ReadFile(n.peersPath())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var pf peersFile
	if err := json.Unmarshal(b, &pf); err != nil {
		n.logger.Warn("ignoring unreadable peers file", "path", n.peersPath(), "error", err)
		return nil
	}
	n.peersMu.Lock()
	for _, m := range pf.Nodes {
		if m.ID != "" && m.ID != n.cfg.NodeID {
			n.peers[m.ID] = peerInfo{Member: m}
		}
	}
	n.peersMu.Unlock()
	return nil
}

// peersLoop rewrites peers.json whenever the peer map changes.
func (n *Node) peersLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-n.peersDirty:
			if err := n.writePeers(); err != nil {
				n.logger.Warn("write peers file", "error", err)
			}
		}
	}
}

// writePeers atomically (temp file, fsync, rename) writes every known node,
// this one included. Once this node has a raft configuration, nodes neither
// in it nor alive in gossip (removed servers) are left out.
func (n *Node) writePeers() error {
	inCfg := map[string]bool{}
	if cfg, err := n.configuration(); err == nil {
		for _, s := range cfg.Servers {
			inCfg[string(s.ID)] = true
		}
	}
	n.peersMu.Lock()
	pf := peersFile{Nodes: []Member{n.self()}}
	for id, p := range n.peers {
		if len(inCfg) > 0 && !inCfg[id] && !p.alive {
			continue
		}
		pf.Nodes = append(pf.Nodes, p.Member)
	}
	n.peersMu.Unlock()
	sort.Slice(pf.Nodes, func(i, j int) bool { return pf.Nodes[i].ID < pf.Nodes[j].ID })
	b, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(n.peersPath(), b, 0o600)
}
