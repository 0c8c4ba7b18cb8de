package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// dumpTrees prints every field of t, each tree as its items in order
// (whatever shape its nodes have), with their jobs printed whole; with
// treesOnly, the trees alone.
func dumpTrees(t *tables, treesOnly ...bool) string {
	var b strings.Builder
	v := reflect.ValueOf(t).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		fmt.Fprintf(&b, "%s:", v.Type().Field(i).Name)
		switch {
		case isTree(f):
			dumpTree(&b, f)
		case f.Kind() == reflect.Array && isTree(f.Index(0)):
			for k := range f.Len() {
				fmt.Fprintf(&b, "\n [%d]", k)
				dumpTree(&b, f.Index(k))
			}
		case len(treesOnly) == 0:
			b.WriteString(dumpValue(f))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// isTree reports whether v is a pointer to a google/btree BTreeG (or a
// type made of one, as a catalog is).
func isTree(v reflect.Value) bool {
	if v.Kind() != reflect.Pointer || v.Type().Elem().Kind() != reflect.Struct {
		return false
	}
	_, ok := v.Type().Elem().FieldByName("root")
	_, deg := v.Type().Elem().FieldByName("degree")
	return ok && deg
}

func dumpTree(b *strings.Builder, tree reflect.Value) {
	var walk func(n reflect.Value)
	walk = func(n reflect.Value) {
		if n.IsNil() {
			return
		}
		items, children := n.Elem().FieldByName("items"), n.Elem().FieldByName("children")
		for i := range items.Len() {
			if children.Len() > 0 {
				walk(children.Index(i))
			}
			b.WriteString("\n  " + dumpValue(items.Index(i)))
		}
		if children.Len() > 0 {
			walk(children.Index(items.Len()))
		}
	}
	walk(tree.Elem().FieldByName("root"))
}

// restoreTables restores raw, its jobs one at a time or not, and says
// whether the jobs were built in bulk.
func restoreTables(t *testing.T, raw []byte, one bool) (*tables, bool) {
	t.Helper()
	oneByOne.Store(one)
	defer oneByOne.Store(false)
	before := bulkBuilds.Load()
	tb, _, err := readSnapshot(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return tb, bulkBuilds.Load() > before
}

// mixedLog creates n jobs with random ids (so id order is not creation
// order) and most options, then claims a third of them and completes half
// of those, at the latest level with the feed on: every job index holds
// items.
func mixedLog(n int) [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	now := int64(1_700_000_000e9)
	out := [][]byte{MustEncode(CmdFeedOn, &FeedOnCommand{Now: now}), MustEncode(CmdLevel, &LevelCommand{Now: now, Level: LatestLevel})}
	var ids []string
	for i := range n {
		now += 1e9
		c := CreateCommand{Now: now, ID: fmt.Sprintf("%016x", rng.Uint64()), Payload: []byte(`{}`), Actor: head}
		switch {
		case i%7 == 0:
			c.RunAt = now + 1e15
		case i%5 == 0:
			c.Priority = rng.IntN(7) - 3
		}
		if i%11 == 0 {
			c.IdempotencyKey = fmt.Sprintf("idem-%d", rng.IntN(1e9))
		}
		if i%13 == 0 {
			c.Requires = []string{"gpu"}
		}
		if i%17 == 0 {
			c.Stream, c.Target = "other", "left_claw"
		}
		if i%19 == 0 {
			c.ConcurrencyKey, c.ConcurrencyLimit = fmt.Sprintf("k%d", i%3), 1
		}
		out = append(out, MustEncode(CmdCreate, &c))
		ids = append(ids, c.ID)
	}
	for i, id := range ids {
		if i%3 != 0 {
			continue
		}
		now += 1e9
		ref := LeaseRef{JobID: id, AttemptID: "a-" + id, Token: "t-" + id}
		out = append(out, MustEncode(CmdClaim, &ClaimCommand{Now: now, JobID: id, Actor: left, Capabilities: []string{"gpu"},
			AttemptID: ref.AttemptID, LeaseToken: ref.Token, LeaseNanos: 60e9}))
		if i%2 == 0 {
			out = append(out, MustEncode(CmdComplete, &CompleteCommand{Now: now, Ref: ref, Actor: left, Result: []byte(`1`)}))
		}
	}
	return out
}

// A restore that builds the job indexes in bulk leaves every tree holding
// what storing the jobs one at a time does (and what the state written
// held), item for item, for random logs of every command and a log that
// fills every job index.
func TestBulkRestoreBuildsTheSameTrees(t *testing.T) {
	logs := [][][]byte{mixedLog(3000)}
	for seed := uint64(1); seed <= 6; seed++ {
		logs = append(logs, randomLog(seed, 600), randomLog(seed, 4000))
	}
	for seed, log := range logs {
		f, _ := New(Config{})
		for i, d := range log {
			f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
		}
		if seed == 0 {
			v := f.current()
			for _, n := range []int{v.queue.Len(), v.lease.Len(), v.scheduled.Len(), v.finished.Len(), v.idem.Len(), v.reqs.Len(), v.keyed.Len()} {
				if n < 2 {
					t.Fatalf("the mixed log leaves an index of %d items", n)
				}
			}
		}
		raw := writeSnapshot(t, f)
		bulk, built := restoreTables(t, raw, false)
		if !built {
			t.Fatalf("seed %d: the jobs were not built in bulk", seed)
		}
		one, built := restoreTables(t, raw, true)
		if built {
			t.Fatalf("seed %d: built in bulk, asked one at a time", seed)
		}
		want, got := dumpTrees(one), dumpTrees(bulk)
		if want != got {
			t.Fatalf("seed %d: the trees built in bulk differ:\n%s", seed, firstDiff(want, got))
		}
		// The flags of what the state may hold are set from the version
		// read; the trees are the state written.
		if live, got := dumpTrees(f.current(), true), dumpTrees(bulk, true); live != got {
			t.Fatalf("seed %d: the trees restored differ from the state written:\n%s", seed, firstDiff(live, got))
		}
	}
}

// snapshotRecords splits a snapshot into its header, its records and its
// trailer, and join puts them back together.
func snapshotRecords(t *testing.T, raw []byte) (head []byte, recs [][]byte, tail []byte) {
	t.Helper()
	_, h, err := readSnapshot(bytes.NewReader(raw))
	if err != nil || h.Version < 2 {
		t.Fatalf("version %d: %v", h.Version, err)
	}
	hv, err := msgpackValue(bufio.NewReader(bytes.NewReader(raw[1:])), nil)
	if err != nil {
		t.Fatal(err)
	}
	at := 1 + len(hv)
	head = raw[:at]
	for raw[at] != snapEnd {
		n, k := binary.Uvarint(raw[at+1:])
		end := at + 1 + k + int(n)
		recs = append(recs, raw[at:end])
		at = end
	}
	return head, recs, raw[at:]
}

func join(head []byte, recs [][]byte, tail []byte) []byte {
	out := append([]byte(nil), head...)
	for _, r := range recs {
		out = append(out, r...)
	}
	return append(out, tail...)
}

// Where a bulk build could not give what storing one job at a time gives,
// the restore stores them one at a time: jobs out of id order, a job
// twice, two jobs with the same create index.
func TestBulkRestoreFallsBackToOneAtATime(t *testing.T) {
	f, _ := New(Config{})
	for i, d := range randomLog(7, 2000) {
		f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
	}
	raw := writeSnapshot(t, f)
	head, recs, tail := snapshotRecords(t, raw)
	var jobs []int
	for i, r := range recs {
		if r[0] == snapJob {
			jobs = append(jobs, i)
		}
	}
	if len(jobs) < 10 {
		t.Fatalf("only %d jobs", len(jobs))
	}

	// Two jobs swapped: the same state, stored one at a time.
	swapped := append([][]byte(nil), recs...)
	a, b := jobs[2], jobs[7]
	swapped[a], swapped[b] = swapped[b], swapped[a]
	got, built := restoreTables(t, join(head, swapped, tail), false)
	if built {
		t.Fatal("jobs out of order were built in bulk")
	}
	want, _ := restoreTables(t, raw, true)
	if dumpTrees(got) != dumpTrees(want) {
		t.Fatalf("jobs out of order restore another state:\n%s", firstDiff(dumpTrees(want), dumpTrees(got)))
	}

	// A job twice is refused, as it always was.
	twice := append(append([][]byte(nil), recs[:jobs[3]+1]...), recs[jobs[3]:]...)
	cut := join(head, twice, tail)
	if _, _, err := readSnapshot(bytes.NewReader(cut)); err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Fatalf("a job twice: %v", err)
	}
}

// Two jobs with the same create index (no log writes them, but a snapshot
// may hold them) leave the lanes one of them: the one stored last, as
// storing them one at a time does.
func TestBulkRestoreOfEqualKeysKeepsTheLastStored(t *testing.T) {
	f, _ := New(Config{})
	w := &f.w
	for i, id := range []string{"a", "b", "c", "d"} {
		j := &Job{ID: id, Stream: DefaultStream, State: StateQueued, CreateIndex: uint64(1 + i%2), QueueIndex: uint64(1 + i%2),
			Payload: []byte(`{}`), MaxAttempts: 1}
		w.putJob(nil, j)
	}
	w.index = 4
	f.view.Store(w.publishAll())
	raw := writeSnapshot(t, f)
	bulk, built := restoreTables(t, raw, false)
	if built {
		t.Fatal("equal keys were built in bulk")
	}
	one, _ := restoreTables(t, raw, true)
	if dumpTrees(bulk) != dumpTrees(one) {
		t.Fatalf("equal keys restore another state:\n%s", firstDiff(dumpTrees(one), dumpTrees(bulk)))
	}
	if n := bulk.lanes[laneOf(StateQueued)].Len(); n != 2 {
		t.Fatalf("the queued lane holds %d jobs, storing them one at a time leaves 2", n)
	}
}
