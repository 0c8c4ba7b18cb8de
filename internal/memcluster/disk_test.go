package memcluster

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Writes that arrive while a flush runs wait for the next one: with group
// commit one flush covers them all, without it each gets its own.
func TestDiskFlushesWaitingWrites(t *testing.T) {
	for _, group := range []bool{true, false} {
		t.Run(fmt.Sprintf("group-commit=%v", group), func(t *testing.T) {
			d := NewDisk(0, group)
			release := make(chan struct{})
			first := true
			d.flush = func() { // only the flusher goroutine calls it
				if first {
					first = false
					<-release
				}
			}
			var wg sync.WaitGroup
			flush := func() {
				wg.Add(1)
				go func() { defer wg.Done(); d.Flush() }()
			}
			flush()
			waitUntil(t, 5*time.Second, "the first flush to start", func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				return d.flushing && len(d.waiting) == 0
			})
			for range 5 {
				flush()
			}
			waitUntil(t, 5*time.Second, "five writes to wait", func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				return len(d.waiting) == 5
			})
			close(release)
			wg.Wait()
			want := uint64(6)
			if group {
				want = 2
			}
			if d.Flushes() != want || d.Writes() != 6 {
				t.Fatalf("%d flushes for %d writes, want %d for 6", d.Flushes(), d.Writes(), want)
			}
		})
	}
}

// Two groups whose replicas share the machines' disks each keep their own
// log and state, and every append of both went through the disks.
func TestGroupsShareDisks(t *testing.T) {
	disks := []*Disk{NewDisk(0, true), NewDisk(0, true), NewDisk(0, true)}
	a, b := Start(t, Options{Disks: disks}), Start(t, Options{Disks: disks})
	create(t, a, 1)
	create(t, b, 2)
	for _, c := range []*Cluster{a, b} {
		if err := c.CheckConverged(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if jobOn(a.Nodes[0], "job-2") != nil || jobOn(b.Nodes[0], "job-1") != nil {
		t.Fatal("a job reached the other group's state")
	}
	for i, d := range disks {
		if d.Writes() == 0 {
			t.Fatalf("disk %d made no write durable", i)
		}
	}
}
