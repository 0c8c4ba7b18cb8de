package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// snapEndRecord is the trailer as the builds up to version 9 declared it: a
// struct, one field per kind. The table's trailer must read and write the
// same bytes.
type snapEndRecord struct {
	Jobs, Blobs, Chunks int
	Sessions            int `codec:",omitempty"`
	Streams             int `codec:",omitempty"`
	Registry            int `codec:",omitempty"`
	Gateways            int `codec:",omitempty"`
	Workers             int `codec:",omitempty"`
	FeedHead            int `codec:",omitempty"`
	Feed                int `codec:",omitempty"`
	Paused              int `codec:",omitempty"`
	Caps                int `codec:",omitempty"`
	Defaults            int `codec:",omitempty"`
	Level               int `codec:",omitempty"`
	WorkerIDs           int `codec:",omitempty"`
	Tokens              int `codec:",omitempty"`
}

// The trailer built from the table is byte for byte the struct's, for
// counts small and large, and the struct's reads back to the same counts.
func TestTrailerIsTheStructEarlierBuildsWrote(t *testing.T) {
	rng := uint64(1)
	for round := range 200 {
		var old snapEndRecord
		var trailer snapTrailer
		fields := reflect.ValueOf(&old).Elem()
		for _, k := range snapKinds {
			if k == nil || k.since > 9 {
				continue // the struct is the trailer of the builds up to version 9
			}
			rng = rng*6364136223846793005 + 1442695040888963407
			n := 0
			switch shift := (rng >> 33) % 5; {
			case round == 0, shift == 0:
			default:
				n = int(rng>>40) >> (shift * 6) // 0 to 2^24: every int encoding
			}
			fields.FieldByName(k.name).SetInt(int64(n))
			trailer = trailer.add(k, n)
		}
		var a, b []byte
		codec.NewEncoderBytes(&a, msgpackHandle).MustEncode(old)
		codec.NewEncoderBytes(&b, msgpackHandle).MustEncode(trailer)
		if !bytes.Equal(a, b) {
			t.Fatalf("counts %+v: the struct writes %x, the table %x", old, a, b)
		}
		var back map[string]int
		if err := decodeMsgpack(a, &back); err != nil {
			t.Fatal(err)
		}
		for _, k := range snapKinds {
			if k != nil && k.since <= 9 && back[k.name] != int(fields.FieldByName(k.name).Int()) {
				t.Fatalf("%s: read %d from %+v", k.name, back[k.name], old)
			}
		}
	}
	if n := reflect.TypeFor[snapEndRecord]().NumField(); n != 16 {
		t.Fatalf("the frozen trailer has %d fields", n)
	}
}

// Every snapshot fixture of version 2 on, restored and written again, is
// the fixture byte for byte: the table writes what the hand-written
// sections did.
func TestSnapshotRewriteIsByteIdentical(t *testing.T) {
	for v := 2; v <= snapshotVersion; v++ {
		path := filepath.Join(upgradeDir, fmt.Sprintf("snap-v%d.bin", v))
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := New(Config{})
		if err := f.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
			t.Fatal(err)
		}
		if again := writeSnapshot(t, f); !bytes.Equal(raw, again) {
			t.Errorf("%s: written again as %d bytes that differ from its %d", path, len(again), len(raw))
		}
	}
}

// The versions and the rows agree with snapshotVersion.
func TestSnapshotVersionsDeclared(t *testing.T) {
	last := 2
	for _, v := range snapVersions {
		if v.n != last+1 {
			t.Fatalf("version %d follows %d", v.n, last)
		}
		last = v.n
	}
	if last != snapshotVersion {
		t.Fatalf("snapVersions ends at %d, snapshotVersion is %d", last, snapshotVersion)
	}
	names := map[string]bool{}
	for kind, k := range snapKinds {
		if k == nil {
			continue
		}
		if int(k.kind) != kind || names[k.name] || (k.msgpack != nil) != (k.since == 1) {
			t.Fatalf("row %d (%s) inconsistent", kind, k.name)
		}
		names[k.name] = true
	}
}

const snapNoteForTest byte = 200

// A new kind of snapshot record is one registration: written at every
// version from its own, counted in the trailer, read back and restored,
// with no other edit; a snapshot whose trailer disagrees is refused.
func TestANewRecordKindIsOneRegistration(t *testing.T) {
	var restored []string
	registerSnap(snapRow(snapNoteForTest, "NotesForTest", 2,
		func(tb *tables, _ int, r *recordWriter) {
			tb.byID.Ascend(func(it idItem) bool { r.e.str("note of " + it.j.ID); return r.put() })
		},
		func(d *dec, _ int) *string { s := d.str(); return &s },
		func(w *writer, s *string) error { restored = append(restored, *s); return nil }))
	defer func() { snapKinds[snapNoteForTest] = nil }()

	h := newHarness(t)
	h.apply(CmdCreate, &CreateCommand{ID: "a", Payload: []byte(`1`)})
	h.apply(CmdCreate, &CreateCommand{ID: "b", Payload: []byte(`2`)})
	raw := writeSnapshot(t, h.f)
	if !bytes.Contains(raw, []byte("NotesForTest")) || !bytes.Contains(raw, []byte("note of b")) {
		t.Fatal("the new kind was not written or not counted")
	}
	f, _ := New(Config{})
	if err := f.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restored, []string{"note of a", "note of b"}) {
		t.Fatalf("restored %q", restored)
	}
	if j, _ := f.Read().Job("b"); j == nil {
		t.Fatal("the other kinds were not restored")
	}
	// The trailer counts the new kind: a snapshot missing one of its
	// records is refused.
	var rec enc
	rec.str("note of b")
	cut := bytes.Replace(raw, append([]byte{snapNoteForTest, byte(len(rec.b))}, rec.b...), nil, 1)
	if len(cut) == len(raw) {
		t.Fatal("no record to cut")
	}
	if _, _, err := readSnapshot(bytes.NewReader(cut)); err == nil || !strings.Contains(err.Error(), "NotesForTest") {
		t.Fatalf("a snapshot missing a record restored: %v", err)
	}
}

// Every tree field of tables (anything with a Clone, alone or in an
// array) is declared in treeDecls exactly once: newTables makes it, and a
// publish clones it when changed and shares it otherwise, never handing a
// reader the writer's own tree.
func TestEveryTreeIsDeclared(t *testing.T) {
	trees := treeFields(reflect.ValueOf(newTables()).Elem())
	for path, p := range trees {
		if p == 0 {
			t.Errorf("tables.%s is not made by newTables: declare it in treeDecls", path)
		}
	}
	// Each declaration makes exactly one field.
	made := map[string]bool{}
	for i, d := range treeDecls {
		var one tables
		d.make(&one)
		var set []string
		for path, p := range treeFields(reflect.ValueOf(&one).Elem()) {
			if p != 0 {
				set = append(set, path)
			}
		}
		if len(set) != 1 || made[set[0]] {
			t.Fatalf("declaration %d makes %v", i, set)
		}
		made[set[0]] = true
	}
	// Every tree number is some tree's.
	for n := range numTrees {
		if !slices.ContainsFunc(treeDecls, func(d treeDecl) bool { return d.n == n }) {
			t.Errorf("tree number %d has no tree", n)
		}
	}
	// A publish hands out no tree of the writer's: each is a clone, or
	// the previous view's.
	h := newHarness(t)
	h.apply(CmdCreate, &CreateCommand{ID: "a", Payload: []byte(`1`)})
	f := h.f
	f.wmu.Lock()
	defer f.wmu.Unlock()
	prev := f.publishLocked()
	f.w.dirty[tByID] = true
	v := f.w.publish(prev)
	own, was, now := treeFields(reflect.ValueOf(f.w.t).Elem()), treeFields(reflect.ValueOf(prev).Elem()), treeFields(reflect.ValueOf(v).Elem())
	for path := range own {
		if now[path] == own[path] {
			t.Errorf("a published view shares the writer's tables.%s", path)
		}
		if changed := path == "byID"; changed == (now[path] == was[path]) {
			t.Errorf("tables.%s: changed %v, yet the view's is the previous view's: %v", path, changed, now[path] == was[path])
		}
	}
}

// treeFields returns the address of each tree of t by field path.
func treeFields(t reflect.Value) map[string]uintptr {
	out := map[string]uintptr{}
	isTree := func(ty reflect.Type) bool {
		m, ok := ty.MethodByName("Clone")
		return ok && ty.Kind() == reflect.Pointer && m.Type.NumOut() == 1 && m.Type.Out(0) == ty
	}
	for i := range t.NumField() {
		f, sf := t.Field(i), t.Type().Field(i)
		switch {
		case isTree(sf.Type):
			out[sf.Name] = f.Pointer()
		case sf.Type.Kind() == reflect.Array && isTree(sf.Type.Elem()):
			for j := range f.Len() {
				out[fmt.Sprintf("%s[%d]", sf.Name, j)] = f.Index(j).Pointer()
			}
		}
	}
	return out
}

// noteV1 and noteV2 are one stored object as two builds have it: the
// later one has one field more, and one line more in its field list.
type noteV1 struct{ ID, Text string }

func (n *noteV1) fields(f *fields) { f.str(1, &n.ID); f.str(2, &n.Text) }

type noteV2 struct {
	ID, Text string
	Tags     []string
}

func (n *noteV2) fields(f *fields) { f.str(1, &n.ID); f.str(2, &n.Text); f.strs(3, &n.Tags) }

// registerNote registers the note kind with objects of type T (a note per
// job, made by mk) and returns what a restore put back.
func registerNote[T any, P interface {
	*T
	fielder
}](mk func(id string) *T) *[]*T {
	var got []*T
	registerSnap(snapRow(snapNoteForTest, "NotesForTest", 2,
		func(tb *tables, _ int, r *recordWriter) {
			tb.byID.Ascend(func(it idItem) bool {
				return r.add(P(mk(it.j.ID)), func(e *enc) { panic("written below the tagged version") })
			})
		},
		func(d *dec, _ int) *T { panic("read below the tagged version") },
		func(w *writer, v *T) error { got = append(got, v); return nil }))
	return &got
}

// A field added to a stored object is one line of its field list: a
// snapshot of the later build restores on the earlier one (which skips the
// field) and one of the earlier build on the later one (the field is zero).
func TestANewStoredFieldIsOneLine(t *testing.T) {
	defer func() { snapKinds[snapNoteForTest] = nil }()
	h := newHarness(t)
	h.raiseLevel()
	h.apply(CmdCreate, &CreateCommand{ID: "a", Payload: []byte(`1`)})
	registerNote(func(id string) *noteV2 { return &noteV2{ID: id, Text: "t", Tags: []string{"x", "y"}} })
	later := writeSnapshot(t, h.f)
	snapKinds[snapNoteForTest] = nil
	got1 := registerNote(func(id string) *noteV1 { return &noteV1{ID: id, Text: "t"} })
	earlier := writeSnapshot(t, h.f)
	f, _ := New(Config{})
	if err := f.Restore(io.NopCloser(bytes.NewReader(later))); err != nil {
		t.Fatal(err)
	}
	if len(*got1) != 1 || *(*got1)[0] != (noteV1{ID: "a", Text: "t"}) {
		t.Fatalf("the earlier build read the later snapshot as %+v", *got1)
	}
	snapKinds[snapNoteForTest] = nil
	got2 := registerNote(func(id string) *noteV2 { return nil })
	if err := f.Restore(io.NopCloser(bytes.NewReader(earlier))); err != nil {
		t.Fatal(err)
	}
	if len(*got2) != 1 || !reflect.DeepEqual((*got2)[0], &noteV2{ID: "a", Text: "t"}) {
		t.Fatalf("the later build read the earlier snapshot as %+v", *got2)
	}
}
