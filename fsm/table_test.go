package fsm

import (
	"bytes"
	"io"
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
		if !seen[ct] {
			t.Errorf("randomLog never produces %s: give it a generator", ct)
		}
	}
	samples := commandSamples()
	for _, ct := range registered() {
		if len(samples[ct]) == 0 {
			t.Errorf("commandSamples has no sample of %s", ct)
		}
	}
}

// noopCommand is a command defined entirely in this file, as a new command
// is: its struct, its codec, its apply and one registration.
type noopCommand struct {
	Now  int64
	Note string
}

const cmdNoopForTest CommandType = 99

func (c *noopCommand) encode(e *enc) { e.varint(c.Now); e.str(c.Note) }
func (c *noopCommand) decode(d *dec) { c.Now = d.varint(); c.Note = d.str() }
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
