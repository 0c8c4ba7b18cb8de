package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Upgrade fixtures: logs and snapshots written by earlier builds, kept in
// testdata/upgrade, and what applying or restoring them must give. They are
// recorded once, by the build whose formats they keep (-record-upgrade), and
// never rewritten by a later one: a later build must read them to the same
// state, or a cluster upgraded onto it would diverge from its own past.
//
//	log-<name>.bin     entries, each a uvarint length and the entry's data
//	log-<name>.txt     per entry a digest of its result, then the state
//	snap-v<N>.bin      a snapshot of version N
//	snap-v<N>.txt      the state it restores to
var recordUpgrade = flag.Bool("record-upgrade", false, "record the upgrade fixtures in testdata/upgrade (only for a build whose formats they do not hold yet)")

const upgradeDir = "testdata/upgrade"

// TestUpgradeFixtures replays every recorded log and restores every recorded
// snapshot, and compares the results and the state with what the build that
// wrote them got.
func TestUpgradeFixtures(t *testing.T) {
	if *recordUpgrade {
		recordUpgradeFixtures(t)
	}
	logs, _ := filepath.Glob(filepath.Join(upgradeDir, "log-*.bin"))
	snaps, _ := filepath.Glob(filepath.Join(upgradeDir, "snap-v*.bin"))
	if len(logs) == 0 || len(snaps) == 0 {
		t.Fatal("no upgrade fixtures in " + upgradeDir)
	}
	for _, path := range logs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := readGolden(t, strings.TrimSuffix(path, ".bin")+".txt")
		if got := replayDump(t, splitFixture(t, raw)); got != want {
			t.Errorf("%s: replaying the log gives another state than the build that wrote it:\n%s", path, firstDiff(want, got))
		}
	}
	for _, path := range snaps {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := readGolden(t, strings.TrimSuffix(path, ".bin")+".txt")
		if got := restoreDump(t, raw); got != want {
			t.Errorf("%s: restores to another state than the build that wrote it:\n%s", path, firstDiff(want, got))
		}
	}
}

func readGolden(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d\nwant %s\ngot  %s", i+1, a, b)
		}
	}
	return "(equal)"
}

func splitFixture(t *testing.T, raw []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(raw) > 0 {
		n, k := binary.Uvarint(raw)
		if k <= 0 || uint64(len(raw)-k) < n {
			t.Fatal("corrupt fixture log")
		}
		out = append(out, raw[k:k+int(n)])
		raw = raw[k+int(n):]
	}
	return out
}

// replayDump applies a log entry by entry and returns a line per entry (a
// digest of its result) and the state it ends in.
func replayDump(t *testing.T, log [][]byte) string {
	t.Helper()
	f, _ := New(Config{})
	var b strings.Builder
	for i, d := range log {
		r := f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
		sum := sha256.Sum256([]byte(dumpValue(reflect.ValueOf(r))))
		fmt.Fprintf(&b, "%d %s\n", i+1, hex.EncodeToString(sum[:8]))
	}
	checkIndexes(t, f)
	b.WriteString(dumpState(f))
	return b.String()
}

func restoreDump(t *testing.T, raw []byte) string {
	t.Helper()
	f, _ := New(Config{})
	if err := f.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	checkIndexes(t, f)
	return dumpState(f)
}

// dumpState writes every object of the state, in key order, and what the
// state machine keeps beside them: the text two builds must agree on.
func dumpState(f *FSM) string {
	v := f.current()
	var b strings.Builder
	line := func(kind string, x interface{}) {
		fmt.Fprintf(&b, "%s %s\n", kind, dumpValue(reflect.ValueOf(x)))
	}
	fmt.Fprintf(&b, "applied %d level %d\n", f.AppliedIndex(), v.level)
	p, known := f.chain.latest()
	fmt.Fprintf(&b, "hash %x at %d known %v\n", p.hash, p.index, known)
	v.byID.Ascend(func(it idItem) bool { line("job", it.j); return true })
	v.blobs.Ascend(func(it blobItem) bool { line("blob", it.b); return true })
	v.chunks.Ascend(func(it chunkItem) bool { line("chunk", it.c); return true })
	v.sessions.ascend(func(s *Session) bool { line("session", s); return true })
	v.streams.ascend(func(s *Stream) bool { line("stream", s); return true })
	if v.registry != nil {
		line("registry", v.registry)
	}
	v.gateways.ascend(func(g *Gateway) bool { line("gateway", g); return true })
	v.workers.ascend(func(w *Worker) bool { line("worker", w); return true })
	fmt.Fprintf(&b, "feed on %v latest %d\n", v.feed.on, v.feed.latest)
	for seq := v.feed.oldest(); seq != 0 && seq <= v.feed.latest; seq++ {
		var e FeedEvent // as readers see it: the stored form is the build's own
		v.feed.get(seq).expand(seq, &e)
		line("feed", &e)
	}
	for _, p := range v.pausedList() {
		line("paused", p)
	}
	for _, c := range v.capsSeenList() {
		line("caps", c)
	}
	for _, d := range v.defaultsList() {
		line("defaults", d)
	}
	v.workerIDs.Ascend(func(it bindingItem) bool { line("workerid", it.b); return true })
	v.schedules.ascend(func(s *Schedule) bool { line("schedule", s); return true })
	return b.String()
}

// jobFieldOrder is the order a job's fields print in: its record's.
var jobFieldOrder = strings.Fields(`ID Stream Target Payload State Attempts MaxAttempts Priority NotBefore
	BackoffBase BackoffMax ConcurrencyKey ConcurrencyLimit Requires ClaimCaps NotFor DependsOn DepsPending
	RunOnDepFailure LeaseSeconds TaskClass IdempotencyKey ToolName Timeout ClonedFrom Route Lease
	CancelRequestedAt CancelReason Progress ProgressAt Checkpoint CheckpointAt Result Error Stdout Stderr
	Comments AttemptLog History CreatedAt UpdatedAt StartedAt FinishedAt CreateIndex QueueIndex ModifyIndex
	ResultSchema Schedule Rate`)

// eventFieldOrder is the order an event's fields print in: its record's.
var eventFieldOrder = strings.Fields(`Seq At Type Actor From To AttemptID WorkerID Text`)

// identValue is the string of an Ident read by reflection (an unexported
// field's cannot be had as an interface).
func identValue(v reflect.Value) string {
	p := v.Field(0).Field(0) // the handle's pointer
	if p.IsNil() {
		return ""
	}
	return p.Elem().String()
}

// trailValues are the attempts and the history after a folded created
// event of the job v, whether its trail is open or sealed.
func trailValues(v reflect.Value) (attempts, history reflect.Value) {
	if s := v.FieldByName("sealed"); !s.IsNil() {
		p := unsafe.String((*byte)(s.UnsafePointer()), int(v.FieldByName("sealedLen").Uint()))
		a, h := unpackTrail(p, v.FieldByName("CreatedAt").Int())
		return reflect.ValueOf(a), reflect.ValueOf(h)
	}
	t := v.FieldByName("trail")
	if t.IsNil() {
		return reflect.ValueOf([]Attempt(nil)), reflect.ValueOf([]Event(nil))
	}
	t = t.Elem()
	return t.FieldByName("attempts"), t.FieldByName("history")
}

// dumpValue prints a value whole, unexported fields included, maps in key
// order and pointers followed: two equal states print the same text.
func dumpValue(v reflect.Value) string {
	var b strings.Builder
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Invalid:
			b.WriteString("nil")
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			if v.Kind() == reflect.Interface && v.Elem().Type().Implements(reflect.TypeOf((*error)(nil)).Elem()) && v.CanInterface() {
				fmt.Fprintf(&b, "error(%q)", v.Interface().(error).Error())
				return
			}
			walk(v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(Ident{}) {
				fmt.Fprintf(&b, "%q", identValue(v)) // as the string it was
				return
			}
			if v.Type() == reflect.TypeOf(Job{}) {
				// A job prints as one record, its extra part's fields
				// in their place, whichever part holds them.
				b.WriteString("{")
				sep := ""
				x := v.FieldByName("extra")
				attempts, history := trailValues(v)
				for _, name := range jobFieldOrder {
					if name == "History" {
						// The whole history, its created event first
						// whether the job keeps it as its creator or not.
						h, c := history, identValue(v.FieldByName("creator"))
						if h.Len() == 0 && c == "" {
							continue
						}
						b.WriteString(sep + "History:[")
						sep = " "
						in := ""
						if c != "" {
							walk(reflect.ValueOf(Event{Seq: 1, At: v.FieldByName("CreatedAt").Int(), Type: EventCreated, Actor: c, To: codeQueued}))
							in = " "
						}
						for i := 0; i < h.Len(); i++ {
							b.WriteString(in)
							in = " "
							walk(h.Index(i))
						}
						b.WriteString("]")
						continue
					}
					fv := v.FieldByName(name)
					if name == "AttemptLog" {
						fv = attempts
					}
					if !fv.IsValid() {
						if x.IsNil() {
							continue
						}
						fv = x.Elem().FieldByName(name)
					}
					if fv.IsZero() {
						continue
					}
					b.WriteString(sep + name + ":")
					sep = " "
					walk(fv)
				}
				b.WriteString("}")
				return
			}
			// Zero fields are left out, so a field a later build adds
			// prints nothing until it is used. An event prints its fields
			// in its record's order.
			b.WriteString("{")
			sep := ""
			for i := 0; i < v.NumField(); i++ {
				fv, fname := v.Field(i), v.Type().Field(i).Name
				if v.Type() == reflect.TypeOf(Event{}) {
					fname = eventFieldOrder[i]
					fv = v.FieldByName(fname)
				}
				if fv.IsZero() {
					continue
				}
				b.WriteString(sep + fname + ":")
				sep = " "
				walk(fv)
			}
			b.WriteString("}")
		case reflect.Slice:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			if v.Type().Elem().Kind() == reflect.Uint8 {
				fmt.Fprintf(&b, "%q", v.Bytes())
				return
			}
			fallthrough
		case reflect.Array:
			b.WriteString("[")
			for i := 0; i < v.Len(); i++ {
				if i > 0 {
					b.WriteString(" ")
				}
				walk(v.Index(i))
			}
			b.WriteString("]")
		case reflect.Map:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			keys := v.MapKeys()
			ks := make([]string, len(keys))
			idx := map[string]reflect.Value{}
			for i, k := range keys {
				ks[i] = dumpValue(k)
				idx[ks[i]] = v.MapIndex(k)
			}
			sort.Strings(ks)
			b.WriteString("map[")
			for i, k := range ks {
				if i > 0 {
					b.WriteString(" ")
				}
				b.WriteString(k + ":")
				walk(idx[k])
			}
			b.WriteString("]")
		case reflect.String:
			fmt.Fprintf(&b, "%q", v.String())
		case reflect.Bool:
			fmt.Fprintf(&b, "%v", v.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			fmt.Fprintf(&b, "%d", v.Int())
		case reflect.Uint8:
			// A word held as its code (names.go) prints as the word.
			switch v.Type() {
			case reflect.TypeOf(EventType(0)), reflect.TypeOf(StateCode(0)), reflect.TypeOf(name(0)):
				fmt.Fprintf(&b, "%q", name(v.Uint()).String())
			default:
				fmt.Fprintf(&b, "%d", v.Uint())
			}
		case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			fmt.Fprintf(&b, "%d", v.Uint())
		case reflect.Float32, reflect.Float64:
			fmt.Fprintf(&b, "%v", v.Float())
		default:
			fmt.Fprintf(&b, "<%s>", v.Kind())
		}
	}
	walk(v)
	return b.String()
}

// recordUpgradeFixtures writes the fixtures of this build's formats that
// are not recorded yet (a fixture is never rewritten: it is what the build
// that wrote it got): a long random log of every command type in the
// encoding this build writes at its latest level, a short one in the
// msgpack bodies of the first builds, and one snapshot of each version this
// build writes (the oldest, version 1, from snapshotV1).
func recordUpgradeFixtures(t *testing.T) {
	if err := os.MkdirAll(upgradeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data func() []byte) {
		path := filepath.Join(upgradeDir, name)
		if _, err := os.Stat(path); err == nil {
			return
		}
		if err := os.WriteFile(path, data(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", path)
	}
	joinLog := func(log [][]byte) []byte {
		var out []byte
		for _, d := range log {
			out = binary.AppendUvarint(out, uint64(len(d)))
			out = append(out, d...)
		}
		return out
	}
	pair := func(name string, log [][]byte) {
		write(name+".bin", func() []byte { return joinLog(log) })
		write(name+".txt", func() []byte { return []byte(replayDump(t, log)) })
	}
	// The positional encoding (bodyV1) was the latest until LevelTagged;
	// its log was recorded by the last build that wrote it.
	// Schedules, rate limits, named tokens and result contracts came with
	// LevelPolicies: a log of every command type at it.
	if LatestLevel >= LevelPolicies {
		pair("log-policies", append([][]byte{MustEncode(CmdLevel, &LevelCommand{Now: 1, Level: LevelPolicies})}, randomLog(12, 3000)...))
	}
	if LatestLevel >= LevelTagged {
		pair("log-tagged", randomLog(9, 3000))
	} else {
		pair("log-binary", randomLog(7, 3000))
	}

	// The first builds wrote msgpack bodies for the job commands.
	var mp [][]byte
	for _, d := range randomLog(8, 1500) {
		ct, cmd, err := DecodeCommand(d)
		if err != nil {
			t.Fatal(err)
		}
		if ct > CmdClaimNext || ct == CmdBlobChunk || ct == CmdBlobCommit {
			continue
		}
		mp = append(mp, msgpackEntry(t, ct, cmd))
	}
	pair("log-msgpack", mp)

	// One snapshot per version: a random log cut down to the commands whose
	// state the version holds, checked to write that version.
	upTo := map[int]CommandType{2: CmdClaimNextKeyed, 3: CmdTaskPurge, 4: CmdRoute, 5: CmdFeedOn, 6: CmdClaimBatch, 7: CmdReleaseNotFor, 8: CmdCreateOpts, 9: CmdDispatch, 10: CmdDispatch, 11: CmdCompleteRefused}
	for version := 2; version <= snapshotVersion; version++ {
		name := fmt.Sprintf("snap-v%d", version)
		if _, err := os.Stat(filepath.Join(upgradeDir, name+".bin")); err == nil {
			continue
		}
		var sub [][]byte
		for _, d := range randomLog(uint64(100+version), 2500) {
			ct := CommandType(d[0])
			if ct > upTo[version] || ct == CmdTaskStep && version < 5 || ct == CmdLevel && version < 9 {
				continue
			}
			// Version 2 predates the developer queue's and the
			// control plane's commands.
			if version == 2 && ct > CmdClaimNext && ct != CmdClaimNextKeyed {
				continue
			}
			sub = append(sub, d)
		}
		if version == 11 {
			// The policies' commands apply from their level on: the
			// cluster is at it from the first entry.
			sub = append([][]byte{MustEncode(CmdLevel, &LevelCommand{Now: 1, Level: LevelPolicies})}, sub...)
		}
		f, _ := New(Config{})
		for i, d := range sub {
			f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
		}
		raw := writeSnapshot(t, f)
		_, h, err := readSnapshot(bytes.NewReader(raw))
		if err != nil || h.Version != version {
			t.Fatalf("the version %d fixture wrote version %d (%v)", version, h.Version, err)
		}
		write(name+".bin", func() []byte { return raw })
		write(name+".txt", func() []byte { return []byte(restoreDump(t, raw)) })
	}
	v1 := snapshotV1(t)
	write("snap-v1.bin", func() []byte { return v1 })
	write("snap-v1.txt", func() []byte { return []byte(restoreDump(t, v1)) })
}

// msgpackEntry is the entry a first build wrote for cmd: its type byte
// and a msgpack body.
func msgpackEntry(t *testing.T, ct CommandType, cmd interface{}) []byte {
	var body []byte
	if err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(cmd); err != nil {
		t.Fatal(err)
	}
	return append([]byte{byte(ct)}, body...)
}

// A snapshot keeps every field of every object: the state restored from it
// prints as the state that wrote it, for the version this build writes.
func TestSnapshotKeepsEveryField(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		f, _ := New(Config{})
		for i, d := range randomLog(seed, 3000) {
			f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
		}
		raw := writeSnapshot(t, f)
		if _, h, err := readSnapshot(bytes.NewReader(raw)); err != nil || h.Version != snapshotVersion {
			t.Fatalf("seed %d: version %d (%v)", seed, h.Version, err)
		}
		if want, got := dumpState(f), restoreDump(t, raw); want != got {
			t.Fatalf("seed %d: the restored state differs:\n%s", seed, firstDiff(want, got))
		}
	}
}

// TestJobFieldOrderIsWhole: every field of a job, in either part, prints.
func TestJobFieldOrderIsWhole(t *testing.T) {
	want := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeOf(Job{}), reflect.TypeOf(JobExtra{})} {
		for i := 0; i < typ.NumField(); i++ {
			switch n := typ.Field(i).Name; n {
			case "extra":
			case "trail", "sealed", "sealedLen", "creator": // printed whole as AttemptLog and History
				want["AttemptLog"], want["History"] = true, true
			default:
				want[n] = true
			}
		}
	}
	for _, n := range jobFieldOrder {
		if !want[n] {
			t.Errorf("jobFieldOrder names %s, which a job does not have", n)
		}
		delete(want, n)
	}
	for n := range want {
		t.Errorf("jobFieldOrder leaves out %s", n)
	}
}

// A job as the cluster creates it (with the default retry backoff) and as
// a worker's loop takes it through has no extra part: the part is for
// what most jobs leave zero, and every job that carries one pays for it.
func TestAPlainJobHasNoExtraPart(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{BackoffBase: 1, BackoffMax: 60})
	if j.extra != nil {
		t.Fatalf("a created job has an extra part: %+v", *j.extra)
	}
	c := h.claim(j.ID, Actor{Role: "left_claw", WorkerID: "w1"}).Job
	if c.extra != nil {
		t.Fatalf("a claimed job has an extra part: %+v", *c.extra)
	}
}
