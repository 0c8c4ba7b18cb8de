package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// Every registered command is produced by the random log that drives the
// determinism oracle and the snapshot round trip: a command added to the
// table without a generator there fails here.
func TestRandomLogCoversEveryCommand(t *testing.T) {
	seen := map[CommandType]bool{}
	for seed := uint64(1); seed <= 5; seed++ {
		for _, d := range randomLog(seed, 3000) {
			seen[CommandType(d[0])] = true
		}
	}
	for _, ct := range registered() {
		if ct.current() && !seen[ct] {
			t.Errorf("randomLog never produces %s: give it a generator", ct)
		}
	}
	samples := commandSamples()
	for _, ct := range registered() {
		if ct.current() && len(samples[ct]) == 0 {
			t.Errorf("commandSamples has no sample of %s", ct)
		}
	}
}

// noopCommand is a command defined entirely in this file, as a new command
// is: its struct, its field list, its apply and one registration.
type noopCommand struct {
	Now  int64
	Note string
}

const cmdNoopForTest CommandType = 99

func (c *noopCommand) fields(f *fields) { f.i64(1, &c.Now); f.str(2, &c.Note) }
func (c *noopCommand) apply(a *applier) *Result {
	return &Result{Claimed: c.Note == "claimed"}
}

func TestANewCommandIsOneRegistration(t *testing.T) {
	register(cmdNoopForTest, "noop_for_test", func() command { return new(noopCommand) })
	defer func() { commandTable[cmdNoopForTest] = nil }()

	if got := cmdNoopForTest.String(); got != "noop_for_test" {
		t.Fatalf("name %q", got)
	}
	data := MustEncode(cmdNoopForTest, noopCommand{Now: 5, Note: "claimed"})
	ct, v, err := DecodeCommand(data)
	if err != nil || ct != cmdNoopForTest || *v.(*noopCommand) != (noopCommand{Now: 5, Note: "claimed"}) {
		t.Fatalf("round trip: %v %v %+v", err, ct, v)
	}
	if _, err := Encode(CmdReap, &noopCommand{}); err == nil {
		t.Fatal("a command encoded under another type")
	}
	f, _ := New(Config{})
	res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data}).(*Result)
	if !res.Claimed {
		t.Fatalf("apply: %+v", res)
	}
	// It is in the state hash and survives a snapshot like any command.
	idx, _, _ := f.StateHash()
	if idx != 1 {
		t.Fatalf("hash index %d", idx)
	}
	snap, _ := f.Snapshot()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g, _ := New(Config{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() != 1 {
		t.Fatal("restore lost the index")
	}
}

// noopNext is noopCommand as a later build has it: one field more, and one
// line more in its field list. Nothing else changes: not the command type,
// not the format, not the table.
type noopNext struct {
	Now   int64
	Note  string
	Extra []string
}

func (c *noopNext) fields(f *fields) { f.i64(1, &c.Now); f.str(2, &c.Note); f.strs(3, &c.Extra) }
func (c *noopNext) apply(a *applier) *Result {
	return &Result{Claimed: len(c.Extra) > 0}
}

// A field added to a command is one line: an entry of the later build
// reads on the earlier one (which skips the field it does not know) and an
// entry of the earlier build reads on the later one (the field is zero).
func TestANewFieldIsOneLine(t *testing.T) {
	register(cmdNoopForTest, "noop_for_test", func() command { return new(noopNext) })
	newer := MustEncode(cmdNoopForTest, &noopNext{Now: 5, Note: "n", Extra: []string{"x", "y"}})
	_, got, err := DecodeCommand(newer)
	if err != nil || !reflect.DeepEqual(got, &noopNext{Now: 5, Note: "n", Extra: []string{"x", "y"}}) {
		t.Fatalf("the later build reads its own entry: %v %+v", err, got)
	}
	commandTable[cmdNoopForTest] = nil
	register(cmdNoopForTest, "noop_for_test", func() command { return new(noopCommand) })
	defer func() { commandTable[cmdNoopForTest] = nil }()
	_, got, err = DecodeCommand(newer)
	if err != nil || *got.(*noopCommand) != (noopCommand{Now: 5, Note: "n"}) {
		t.Fatalf("the earlier build reads the later entry: %v %+v", err, got)
	}
	older := MustEncode(cmdNoopForTest, &noopCommand{Now: 6, Note: "o"})
	var next noopNext
	if err := readFields(older[2:], &next, nil, nil); err != nil || !reflect.DeepEqual(next, noopNext{Now: 6, Note: "o"}) {
		t.Fatalf("the later build reads the earlier entry: %v %+v", err, next)
	}
}
