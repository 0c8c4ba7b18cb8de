package systemtest

import (
	"bytes"
	"context"
	encbin "encoding/binary"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/chaos"
	"github.com/spine-queue/spine/internal/testcluster"
)

// A flipped byte on a follower's disk: the node refuses to start, naming
// the file (its process exits non-zero); the other two go on taking
// writes; removed from the configuration, emptied and started again (a
// dead disk's cure), it rejoins and catches up; no acknowledged job is
// lost and every replica agrees (the state hashes are compared). Each
// scenario prints a VERDICT line.

// A byte of a job's payload in the raft log (cluster/walverify.go).
func TestCorruptLogIsRefusedAndTheClusterGoesOn(t *testing.T) {
	t.Parallel()
	runCorruption(t, corruption{scenario: "corrupt-log", damage: func(t *testing.T, victim *testcluster.Node) string {
		segs, _ := filepath.Glob(filepath.Join(victim.DataDir, "raft", "wal", "*.wal"))
		sort.Strings(segs)
		if len(segs) == 0 {
			t.Fatal("no log segment in the victim's data dir")
		}
		// A byte of the first payload: the filler, far from the last batch.
		seg := segs[0]
		flipFile(t, seg, func(b []byte) {
			at := bytes.Index(b, []byte(corruptFiller))
			if at < 0 {
				t.Fatal("no job payload in the first segment")
			}
			b[at+100] ^= 0x01
		})
		return seg
	}})
}

// A byte of the node's current term in the stable store, raft-wal's bolt
// file (cluster/stableverify.go): bbolt's own check does not look inside
// values.
func TestCorruptStableStoreIsRefusedAndTheClusterGoesOn(t *testing.T) {
	t.Parallel()
	runCorruption(t, corruption{scenario: "corrupt-stable", words: []string{"CurrentTerm"}, damage: func(t *testing.T, victim *testcluster.Node) string {
		file := filepath.Join(victim.DataDir, "raft", "wal", "wal-meta.db")
		flipFile(t, file, func(b []byte) {
			// Bolt keeps a key and its value side by side: flip the low
			// bit of every copy of the term (freed pages may hold older
			// ones), not of its checksum record's.
			n := 0
			key := []byte("CurrentTerm")
			for i := 0; ; {
				j := bytes.Index(b[i:], key)
				if j < 0 {
					break
				}
				at := i + j
				i = at + 1
				v := b[at+len(key):]
				if bytes.HasSuffix(b[:at], []byte("spine-crc/")) || len(v) < 8 {
					continue
				}
				if term := encbin.LittleEndian.Uint64(v); term > 0 && term < 1000 {
					v[0] ^= 0x01
					n++
				}
			}
			if n == 0 {
				t.Fatal("no term in the stable store")
			}
		})
		return file
	}})
}

// A byte of the newest snapshot's state (cluster/snapverify.go): raft would
// have fallen back to the older snapshot without a word.
func TestCorruptSnapshotIsRefusedAndTheClusterGoesOn(t *testing.T) {
	t.Parallel()
	runCorruption(t, corruption{
		scenario: "corrupt-snapshot",
		// The victim takes two snapshots of its own: a leader's snapshot
		// for a backup (GET /v1/snapshot) is cut by that leader, so it
		// leads for a while and then hands leadership back.
		prepare: func(t *testing.T, c *testcluster.Cluster, victim, other *testcluster.Node, w *corruptWrites) {
			transferLeadership(t, c, other, victim)
			apiWant(t, apiDo(t, "GET", victim.URL+"/v1/snapshot", apiHead, nil), http.StatusOK)
			for i := range 10 {
				w.create(t, victim.URL, map[string]int{"between_snapshots": i})
			}
			apiWant(t, apiDo(t, "GET", victim.URL+"/v1/snapshot", apiHead, nil), http.StatusOK)
			transferLeadership(t, c, victim, other)
		},
		damage: func(t *testing.T, victim *testcluster.Node) string {
			snaps := snapshotDirs(t, filepath.Join(victim.DataDir, "raft", "snapshots"))
			if len(snaps) < 2 {
				t.Fatalf("the victim keeps %d snapshots, want 2", len(snaps))
			}
			state := filepath.Join(snaps[len(snaps)-1], "state.bin")
			flipFile(t, state, func(b []byte) { b[len(b)/2] ^= 0x01 })
			return state
		},
	})
}

// corruptFiller fills the first jobs' payloads: easy to find in a log segment.
var corruptFiller = strings.Repeat("z", 200)

// corruption is one scenario of runCorruption.
type corruption struct {
	scenario string
	// prepare, if set, runs once the victim has applied the first writes
	// and before it is stopped; it may write more through w.
	prepare func(t *testing.T, c *testcluster.Cluster, victim, other *testcluster.Node, w *corruptWrites)
	// damage flips a byte in the stopped victim's data dir and returns
	// the file, which the refusal must name.
	damage func(t *testing.T, victim *testcluster.Node) string
	// words the refusal must say besides the file's name.
	words []string
}

// corruptWrites counts the writes made and keeps the ids of the jobs whose
// creation was acknowledged.
type corruptWrites struct {
	ops int
	ids []string
}

func (w *corruptWrites) create(t *testing.T, url string, payload any) {
	t.Helper()
	w.ops++
	var j apiJob
	apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/jobs", apiHead, map[string]any{"payload": payload}), http.StatusCreated), &j)
	w.ids = append(w.ids, j.ID)
}

func runCorruption(t *testing.T, sc corruption) {
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	victim := fs[0]
	if victim.ID == "n1" { // n1 bootstraps: emptied, it would start a cluster of its own
		victim = fs[1]
	}
	other := fs[0]
	if other == victim {
		other = fs[1]
	}
	w := &corruptWrites{}
	v := chaos.Verdict{Scenario: sc.scenario, Nodes: 3, Faults: 1, Linearizable: "n/a", Note: "stopped before the end"}
	defer func() {
		v.Ops, v.Acked = w.ops, len(w.ids)
		v.Pass = !t.Failed() && v.Lost == 0 && !v.Diverged
		t.Log(v.String())
	}()
	for i := range 40 {
		w.create(t, leader.URL, map[string]string{"filler": corruptFiller, "n": fmt.Sprint(i)})
	}
	waitApplied(t, c, victim)
	if sc.prepare != nil {
		sc.prepare(t, c, victim, other, w)
		waitApplied(t, c, victim)
	}
	if err := c.Terminate(victim); err != nil {
		t.Fatal(err)
	}
	file := sc.damage(t, victim)
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	words := append([]string{file, "cannot be trusted"}, sc.words...)
	apiEventually(t, 30*time.Second, "the damaged node to refuse to start, naming the file", func() error {
		if victim.Running() {
			return fmt.Errorf("still running")
		}
		logb, _ := os.ReadFile(victim.LogPath)
		for _, w := range words {
			if !strings.Contains(string(logb), w) {
				return fmt.Errorf("its log does not say %q", w)
			}
		}
		return nil
	})
	refusesToStart(t, c, victim, words)
	// The others go on.
	for i := range 10 {
		w.create(t, other.URL, map[string]int{"after": i})
	}
	// The cure, as for a dead disk: out of the configuration first (the
	// survivors then hold every committed entry), then empty, then back.
	apiWant(t, apiDo(t, "POST", other.URL+"/cluster/remove", apiHead, map[string]string{"node_id": victim.ID}), http.StatusOK)
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the rebuilt node to hold every job", func() error {
		for _, id := range w.ids {
			r, err := apiRequest("GET", victim.URL+"/jobs/"+id+"?stale", apiHead, nil)
			if err != nil {
				return err
			}
			if r.Status != http.StatusOK {
				return fmt.Errorf("job %s: %d", id, r.Status)
			}
		}
		return nil
	})
	// The verdict: every acknowledged job read back through every node,
	// linearizably, and the replicas' state hashes compared.
	for _, id := range w.ids {
		for _, n := range c.Nodes {
			r, err := apiRequest("GET", n.URL+"/jobs/"+id+"?consistent", apiHead, nil)
			if err != nil || r.Status != http.StatusOK {
				t.Errorf("acknowledged job %s read through %s: %v %v", id, n.ID, r, err)
				v.Lost++
				break
			}
		}
	}
	convErr := c.CheckConverged(convergeTimeout)
	v.Diverged, v.Note = convErr != nil, ""
	if convErr != nil {
		t.Error(convErr)
	}
}

// waitApplied waits until n has applied what the leader has committed.
func waitApplied(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) {
	t.Helper()
	apiEventually(t, 20*time.Second, n.ID+" to apply every write", func() error {
		l := c.Leader()
		if l == nil {
			return fmt.Errorf("no leader")
		}
		h, err := c.Health(n)
		if err != nil {
			return err
		}
		lh, err := c.Health(l)
		if err != nil {
			return err
		}
		if h.AppliedIndex < lh.CommitIndex {
			return fmt.Errorf("%s at %d, leader at %d", n.ID, h.AppliedIndex, lh.CommitIndex)
		}
		return nil
	})
}

// transferLeadership asks through via for leadership to move to to.
func transferLeadership(t *testing.T, c *testcluster.Cluster, via, to *testcluster.Node) {
	t.Helper()
	apiEventually(t, 30*time.Second, "leadership to move to "+to.ID, func() error {
		if c.Leader() == to {
			return nil
		}
		r, err := apiRequest("POST", via.URL+"/cluster/transfer-leader", apiHead, map[string]string{"to": to.ID})
		if err != nil {
			return err
		}
		if l := c.Leader(); l != to {
			return fmt.Errorf("leader %v after %s", l, r)
		}
		return nil
	})
}

// refusesToStart starts the damaged node's binary once more, by hand, to
// see how its process ends: with a non-zero status, saying words.
func refusesToStart(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, words []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--node-id", n.ID, "--data-dir", n.DataDir, "--http-addr", n.HTTPAddr,
		"--raft-addr", n.RaftAddr, "--gossip-addr", n.GossipAddr, "--join", c.Nodes[0].URL)
	cmd.Env = append(os.Environ(), "HEAD_TOKEN="+testcluster.HeadToken, "LEFT_CLAW_TOKEN="+testcluster.LeftToken,
		"RIGHT_CLAW_TOKEN="+testcluster.RightToken)
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if ctx.Err() != nil || code == 0 {
		t.Fatalf("the damaged node, started by hand: exit status %d (%v), want a refusal:\n%s", code, err, out)
	}
	for _, w := range words {
		if !strings.Contains(string(out), w) {
			t.Fatalf("the damaged node exits %d without saying %q:\n%s", code, w, out)
		}
	}
	line := string(out)
	if i := strings.Index(line, words[0]); i >= 0 {
		line = line[strings.LastIndex(line[:i], "\n")+1:]
		if j := strings.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
	}
	t.Logf("the damaged node exits %d: %s", code, line)
}

// flipFile applies flip to the bytes of file.
func flipFile(t *testing.T, file string, flip func([]byte)) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flip(b)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// snapshotDirs lists raft's snapshot directories in dir, oldest first
// (their names are term-index-milliseconds).
func snapshotDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type snap struct {
		path string
		key  [3]uint64
	}
	var snaps []snap
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		var s snap
		s.path = filepath.Join(dir, e.Name())
		for i, p := range parts {
			s.key[i], _ = strconv.ParseUint(p, 10, 64)
		}
		snaps = append(snaps, s)
	}
	sort.Slice(snaps, func(i, j int) bool {
		a, b := snaps[i].key, snaps[j].key
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		if a[1] != b[1] {
			return a[1] < b[1]
		}
		return a[2] < b[2]
	})
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = s.path
	}
	return out
}
