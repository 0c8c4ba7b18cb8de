package snapfile

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func archive(t *testing.T, state string) []byte {
	t.Helper()
	var buf bytes.Buffer
	meta := Meta{Index: 42, Term: 3, Size: int64(len(state)), RaftVersion: 1, TakenAt: time.Unix(1_700_000_000, 0).UTC(), NodeID: "n1"}
	if err := Write(&buf, meta, strings.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	state := strings.Repeat("spine state ", 10_000)
	var got bytes.Buffer
	meta, err := Read(bytes.NewReader(archive(t, state)), &got)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != state || meta.Index != 42 || meta.Term != 3 || meta.NodeID != "n1" || meta.Format != Format {
		t.Fatalf("read back %+v and %d bytes", meta, got.Len())
	}
}

// Every kind of damage is refused with ErrCorrupt: a flipped byte of the
// state or of the meta, an archive cut short, trailing checksums missing.
func TestDamageIsRefused(t *testing.T) {
	state := strings.Repeat("x", 5000)
	good := archive(t, state)
	stateAt := bytes.Index(good, []byte(state))
	metaAt := bytes.Index(good, []byte(`"index": 42`))
	if stateAt < 0 || metaAt < 0 {
		t.Fatal("cannot find the parts in the archive")
	}
	flip := func(at int) []byte {
		b := append([]byte(nil), good...)
		b[at] ^= 0x01
		return b
	}
	cases := map[string][]byte{
		"state byte flipped": flip(stateAt + 1234),
		"meta byte flipped":  flip(metaAt + 10),
		"cut in the state":   good[:stateAt+100],
		"cut before sums":    good[:stateAt+len(state)+512],
		"empty":              nil,
	}
	for name, b := range cases {
		_, err := Read(bytes.NewReader(b), &bytes.Buffer{})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	// A state of the wrong length is refused when written, too.
	err := Write(&bytes.Buffer{}, Meta{Size: 10}, strings.NewReader("short"))
	if err == nil {
		t.Error("Write accepted a state shorter than its meta says")
	}
}
