package fsm

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// An Ident is its string: "" is the zero value, equal strings make equal
// Idents, and JSON and msgpack carry the string.
func TestIdent(t *testing.T) {
	if IdentOf("") != (Ident{}) || (Ident{}).String() != "" {
		t.Fatal(`"" is not the zero Ident`)
	}
	a, b := IdentOf("left_claw"), IdentOf(string([]byte("left_claw")))
	if a != b || a.String() != "left_claw" || a == IdentOf("right_claw") {
		t.Fatalf("%q and %q: equal strings must make equal Idents, others not", a, b)
	}
	if p, err := json.Marshal(struct{ T, Z Ident }{T: a}); err != nil || string(p) != `{"T":"left_claw","Z":""}` {
		t.Fatalf("JSON %s (%v)", p, err)
	}
	var back Ident
	if err := decodeMsgpack(mustMsgpack(t, a), &back); err != nil || back != a {
		t.Fatalf("msgpack: %q (%v)", back, err)
	}
}

func mustMsgpack(t *testing.T, v any) []byte {
	t.Helper()
	var s string
	var p []byte
	if err := codec.NewEncoderBytes(&p, msgpackHandle).Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := decodeMsgpack(p, &s); err != nil {
		t.Fatalf("an Ident is not written as a string in msgpack: %v", err)
	}
	return p
}

// A command's counts beyond 32 bits (the API refuses them far below) are
// held at the int32's bound, the same on every node, and a job's record
// carries them back as they are held.
func TestJobCountsHeldAt32Bits(t *testing.T) {
	h := newHarness(t)
	h.level(LevelPolicies)
	j := h.create(CreateCommand{Stream: "s", MaxAttempts: 1 << 40, Target: "left_claw"})
	if j.MaxAttempts != math.MaxInt32 || j.Target.String() != "left_claw" {
		t.Fatalf("maxAttempts %d, target %q", j.MaxAttempts, j.Target)
	}
	if sat32(int64(-1)<<40) != math.MinInt32 || sat32(-7) != -7 || sat32(int64(math.MaxInt32)) != math.MaxInt32 {
		t.Fatal("sat32 does not hold a value at the int32's bounds")
	}
	var got Job
	if err := readFields(writeFields(nil, j), &got, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got.MaxAttempts != j.MaxAttempts || got.Target != j.Target || got.History()[0].Actor != "head" {
		t.Fatalf("read back %d %q %+v, want %d %q, created by head", got.MaxAttempts, got.Target, got.History(), j.MaxAttempts, j.Target)
	}
}
