package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A leadership check counts only answers to requests sent after it began:
// answers a paused leader finds in its sockets on waking predate it.
func TestAckedSinceCountsOnlyLaterRequests(t *testing.T) {
	l := newReadLease(500 * time.Millisecond)
	voters := []raft.ServerID{"a", "b", "c"}
	ok := &raft.AppendEntriesResponse{Term: 3, Success: true}
	t0 := time.Now()
	l.answered("b", 3, t0, ok) // sent before the check
	l.answered("c", 3, t0, ok)
	start := t0.Add(time.Millisecond)
	if got, _ := l.ackedSince("a", 3, voters, start); got {
		t.Fatal("answers to requests sent before the check confirmed it")
	}
	_, fresh := l.ackedSince("a", 3, voters, start)
	l.answered("b", 3, start.Add(time.Millisecond), ok)
	select {
	case <-fresh:
	default:
		t.Fatal("a new answer did not wake the waiter")
	}
	if got, _ := l.ackedSince("a", 3, voters, start); !got {
		t.Fatal("a quorum (self and b) answered requests sent after the check, and it is not confirmed")
	}
	// Another term's answers do not count.
	if got, _ := l.ackedSince("a", 4, voters, start); got {
		t.Fatal("answers of term 3 confirmed term 4")
	}
	// A single voter is its own quorum.
	if got, _ := l.ackedSince("a", 3, []raft.ServerID{"a"}, start.Add(time.Hour)); !got {
		t.Fatal("a lone voter is not its own quorum")
	}
}
