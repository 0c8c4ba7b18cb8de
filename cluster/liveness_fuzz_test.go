package cluster

import (
	"testing"
)

// FuzzGossipLiveness: the liveness map arrives as gossip user messages and
// push/pull state, on the gossip port, from any sender that reaches it.
// Any bytes merge or are ignored, never a panic; a heartbeat's encoding
// decodes to itself; and a node's whole map, merged into an empty one,
// gives the same times for every key within the prune window of the
// newest (older ones may be pruned, depending on the merge order), and no
// key or time the map did not hold. `make fuzz` runs it for a fixed time;
// `make test` runs its seeds.
func FuzzGossipLiveness(f *testing.F) {
	l := newLiveness()
	l.record("g:gw-1", 1_700_000_000e9)
	l.record("w:w-1", 1_700_000_000e9+5)
	f.Add(l.localState(), "g:gw-1", int64(1_700_000_000e9))
	f.Add(encodeSeen("w:x", 7), "", int64(0))
	f.Add(append(newLivenessWith("a", 5).localState(), 0xff), "k", int64(-1))
	f.Add([]byte{msgSeenState, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "\x00", int64(1<<62))
	f.Add([]byte{msgSeenState, 1, 'a', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, "a", int64(-1<<63))
	f.Fuzz(func(t *testing.T, data []byte, key string, at int64) {
		// A heartbeat's encoding round trips.
		msg := encodeSeen(key, at)
		k, a, rest, ok := decodeSeen(msg[1:])
		if !ok || k != key || a != at || len(rest) != 0 {
			t.Fatalf("seen codec: %q %d -> %q %d %v %v", key, at, k, a, rest, ok)
		}
		one := newLiveness()
		one.notifyMsg(msg)
		if got, ok := one.get(key); at > 0 && (!ok || got != at) {
			t.Fatalf("a gossiped heartbeat of %q at %d reads %d %v", key, at, got, ok)
		}

		// Any bytes, as a message and as push/pull state.
		l := newLiveness()
		l.notifyMsg(data)
		l.mergeState(data)
		l.record(key, at)
		state := l.localState()
		other := newLiveness()
		other.mergeState(state)
		var newest int64
		for _, ts := range l.seen {
			newest = max(newest, ts)
		}
		for k, t0 := range l.seen {
			if got, ok := other.seen[k]; ok && got != t0 || !ok && newest-t0 <= int64(livenessPruneAge) {
				t.Fatalf("key %q at %d merged as %d %v (newest %d)", k, t0, got, ok, newest)
			}
		}
		for k := range other.seen {
			if _, ok := l.seen[k]; !ok {
				t.Fatalf("key %q appeared in the merge", k)
			}
		}
	})
}
