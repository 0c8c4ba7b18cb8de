package cluster

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Liveness is soft state carried by gossip, never by Raft: the last time
// any node heard from a registered gateway or worker. A heartbeat lands on
// whichever node the sender reached; that node records it and broadcasts
// it (memberlist's transmit-limited queue piggybacks it on gossip), and
// memberlist's periodic push/pull hands a node that missed broadcasts (it
// was down, or joined late) the whole map. Every node thus knows when each
// was last seen within a gossip round or two, and a heartbeat costs no log
// entry; only a change of health the leader derives from it is committed
// (queue.Service.HealthMonitor).

// livenessPruneAge drops entries not refreshed for this long (a
// deregistered gateway's last heartbeat, say).
const livenessPruneAge = time.Hour

// Gossip message types (the first byte of a user message or push/pull
// state).
const (
	msgSeen      byte = 1 // one key and time
	msgSeenState byte = 2 // a whole map (push/pull)
)

type liveness struct {
	mu        sync.Mutex
	seen      map[string]int64 // key → unix nanos of the latest heartbeat
	lastPrune int64
	queue     *memberlist.TransmitLimitedQueue // nil without gossip
}

func newLiveness() *liveness { return &liveness{seen: map[string]int64{}} }

// record keeps at for key if it is newer, and reports whether it was.
func (l *liveness) record(key string, at int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at <= l.seen[key] {
		return false
	}
	l.seen[key] = at
	if at-l.lastPrune > int64(livenessPruneAge) {
		for k, t := range l.seen {
			if at-t > int64(livenessPruneAge) {
				delete(l.seen, k)
			}
		}
		l.lastPrune = at
	}
	return true
}

func (l *liveness) get(key string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[key]
	return t, ok
}

// RecordHeartbeat records that key (a gateway's or worker's registry key)
// was heard from at at (unix nanos) and gossips it to the other nodes.
func (n *Node) RecordHeartbeat(key string, at int64) {
	if !n.live.record(key, at) || n.live.queue == nil {
		return
	}
	n.live.queue.QueueBroadcast(&seenBroadcast{key: key, msg: encodeSeen(key, at)})
}

// LastSeen returns when key was last heard from by any node, as far as
// gossip has told this one.
func (n *Node) LastSeen(key string) (int64, bool) { return n.live.get(key) }

func encodeSeen(key string, at int64) []byte {
	b := make([]byte, 0, 2+len(key)+binary.MaxVarintLen64)
	b = append(b, msgSeen)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return binary.AppendVarint(b, at)
}

// decodeSeen reads one key and time from b, returning the rest.
func decodeSeen(b []byte) (key string, at int64, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return "", 0, nil, false
	}
	key = string(b[n : n+int(l)])
	b = b[n+int(l):]
	at, n = binary.Varint(b)
	if n <= 0 {
		return "", 0, nil, false
	}
	return key, at, b[n:], true
}

// seenBroadcast is one queued heartbeat; a newer one of the same key
// replaces it in the queue.
type seenBroadcast struct {
	key string
	msg []byte
}

func (b *seenBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(*seenBroadcast)
	return ok && o.key == b.key
}
func (b *seenBroadcast) Name() string    { return b.key }
func (b *seenBroadcast) Message() []byte { return b.msg }
func (b *seenBroadcast) Finished()       {}

// notifyMsg merges a gossiped heartbeat.
func (l *liveness) notifyMsg(b []byte) {
	if len(b) == 0 || b[0] != msgSeen {
		return
	}
	if key, at, _, ok := decodeSeen(b[1:]); ok {
		l.record(key, at)
	}
}

// localState is the whole map, for push/pull.
func (l *liveness) localState() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := []byte{msgSeenState}
	for k, t := range l.seen {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendVarint(b, t)
	}
	return b
}

// mergeState merges a peer's whole map.
func (l *liveness) mergeState(b []byte) {
	if len(b) == 0 || b[0] != msgSeenState {
		return
	}
	for b = b[1:]; len(b) > 0; {
		key, at, rest, ok := decodeSeen(b)
		if !ok {
			return
		}
		l.record(key, at)
		b = rest
	}
}
