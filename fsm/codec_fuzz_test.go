package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Fuzz targets for the command codec (codec.go) and what a decoded command
// does to the state machine. FuzzDecode (codec_test.go) covers
// DecodeCommand on raw entries; these add the create fast path, a
// structured round trip of every command type, and apply.
// `make fuzz` runs each for a fixed time; `make test` runs their seeds.

// FuzzDecodeCreate: decodeCreate, the apply path's decoder for the hottest
// command, agrees with decodeBody on every body (same acceptance, same
// command, with or without an interner), and what it accepts re-encodes to
// a body that decodes to the same command.
func FuzzDecodeCreate(f *testing.F) {
	for _, cmd := range commandSamples()[CmdCreate] {
		if data := MustEncode(CmdCreate, cmd); len(data) < 4096 {
			f.Add(data[1:])
		}
	}
	var legacy []byte
	if err := codec.NewEncoderBytes(&legacy, msgpackHandle).Encode(&CreateCommand{Now: 1, ID: "old", Payload: []byte(`1`), Actor: head}); err != nil {
		f.Fatal(err)
	}
	f.Add(legacy)
	f.Add([]byte{})
	f.Add([]byte{bodyV1})
	f.Add([]byte{bodyV1, 0x02, 0x01, 'j', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}) // nil payload
	f.Add([]byte{bodyV1, 0x02, 0x01, 'j', 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f})                         // payload length past end
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast CreateCommand
		errFast := decodeCreate(&fast, body, newInterner())
		slow, errSlow := decodeBody(CmdCreate, body, nil)
		if (errFast == nil) != (errSlow == nil) {
			t.Fatalf("decodeCreate: %v, decodeBody: %v", errFast, errSlow)
		}
		if errFast != nil {
			if !errors.Is(errFast, errCorrupt) {
				t.Fatalf("error %v is not a decode error", errFast)
			}
			return
		}
		if !reflect.DeepEqual(&fast, slow) {
			t.Fatalf("decodeCreate and decodeBody differ:\n%+v\n%+v", fast, slow)
		}
		again := MustEncode(CmdCreate, &fast)
		var back CreateCommand
		if err := decodeCreate(&back, again[1:], nil); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normNil(&back), normNil(&fast)) {
			t.Fatalf("round trip:\n%+v\n%+v", back, fast)
		}
		if len(again) > len(body)+16 && body[0] == bodyV2 {
			t.Fatalf("a %d-byte body re-encodes to %d bytes", len(body), len(again))
		}
	})
}

// filler builds values from fuzz bytes: every field of a command struct
// from the next bytes, reading zeros once they run out.
type filler struct{ b []byte }

func (f *filler) byte1() byte {
	if len(f.b) == 0 {
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

func (f *filler) take(n int) []byte {
	n = min(n, len(f.b))
	p := f.b[:n:n]
	f.b = f.b[n:]
	return p
}

func (f *filler) u64() uint64 {
	var w [8]byte
	copy(w[:], f.take(int(f.byte1()%9)))
	return binary.LittleEndian.Uint64(w[:])
}

func (f *filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(f.take(int(f.byte1() % 24))))
	case reflect.Bool:
		v.SetBool(f.byte1()&1 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := int64(f.u64())
		bits := v.Type().Bits()
		n = n << (64 - bits) >> (64 - bits) // sign-extend to the field's width
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := f.u64()
		if bits := v.Type().Bits(); bits < 64 {
			n &= 1<<bits - 1
		}
		v.SetUint(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			// nil, empty and non-empty byte slices are all distinct.
			switch m := f.byte1(); m % 3 {
			case 0:
			case 1:
				v.SetBytes([]byte{})
			default:
				v.SetBytes(append([]byte(nil), f.take(int(m/3))...))
			}
			return
		}
		// Other slices: an empty one decodes as nil, so build nil or a
		// non-empty one.
		n := int(f.byte1() % 4)
		if n == 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			f.fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		n := int(f.byte1() % 4)
		if n == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i < n; i++ {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			f.fill(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		if f.byte1()&1 == 1 {
			p := reflect.New(v.Type().Elem())
			f.fill(p.Elem())
			v.Set(p)
		}
	default:
		panic("filler: no rule for " + v.Type().String())
	}
}

// FuzzCommandRoundTrip: every command the program can build, of every
// type, with every field drawn from the fuzz bytes, encodes and decodes
// back to itself: decode(encode(x)) == x, through DecodeCommand and
// through the create fast path. A strict prefix of its encoding is refused
// (but one that is the command without its optional tail).
func FuzzCommandRoundTrip(f *testing.F) {
	var types []CommandType
	for _, ct := range registered() {
		if ct.current() {
			types = append(types, ct)
		}
	}
	for _, ct := range types {
		f.Add(uint8(ct), []byte{})
		f.Add(uint8(ct), bytes.Repeat([]byte{0xff}, 64))
		f.Add(uint8(ct), []byte("\x05\x01j\x03\x08\x01\x02\x03\x04\x05\x06\x07\x08\x02ab\x01\x03"))
	}
	f.Fuzz(func(t *testing.T, pick uint8, data []byte) {
		ct := types[int(pick)%len(types)]
		cmd := newCommand(ct)
		(&filler{b: data}).fill(reflect.ValueOf(cmd).Elem())
		enc, err := Encode(ct, cmd)
		if err != nil {
			t.Fatalf("%s: encode: %v", ct, err)
		}
		gotT, got, err := DecodeCommand(enc)
		if err != nil || gotT != ct {
			t.Fatalf("%s: decode: %v (type %s)\n%+v", ct, err, gotT, cmd)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", ct, got, cmd)
		}
		if ct == CmdCreate {
			var c CreateCommand
			if err := decodeCreate(&c, enc[1:], newInterner()); err != nil || !reflect.DeepEqual(&c, cmd) {
				t.Fatalf("create fast path: %v\n got %+v\nwant %+v", err, c, cmd)
			}
		}
		for _, n := range []int{1, 2, len(enc) / 2, len(enc) - 1} {
			if n >= 1 && n < len(enc) {
				// Only a prefix that ends where an optional tail begins
				// reads, as the command without it.
				if _, short, err := DecodeCommand(enc[:n]); err == nil {
					if again, _ := Encode(ct, short); !bytes.Equal(again, enc[:n]) {
						t.Fatalf("%s: a %d-byte prefix of %d misread", ct, n, len(enc))
					}
				}
			}
		}
	})
}

// splitEntries cuts fuzz bytes into log entries: each a uvarint length and
// that many bytes (the last one takes what is left).
func splitEntries(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 256 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			out = append(out, data)
			break
		}
		out = append(out, data[k:k+int(n)])
		data = data[k+int(n):]
	}
	return out
}

func joinEntries(entries [][]byte) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// FuzzApply: a log of entries that decode (what a leader can replicate)
// never panics the state machine, leaves its indexes consistent, applies
// the same on every replica whether entries come one by one or in one
// batch, and survives a snapshot and restore unchanged. A panic here would
// stop every node that applies the entry.
func FuzzApply(f *testing.F) {
	for seed := uint64(1); seed <= 8; seed++ {
		f.Add(joinEntries(randomLog(seed, 24)))
	}
	// A task's life in the developer queue and the control plane.
	f.Add(joinEntries([][]byte{
		MustEncode(CmdFeedOn, &FeedOnCommand{Now: 1}),
		MustEncode(CmdRegistrySet, &RegistrySetCommand{Now: 2, Actor: head, Registry: Registry{Classes: DefaultTaskClasses,
			Tools: []Tool{{Name: "run", TaskClass: "FAST_SCRIPT"}}}}),
		MustEncode(CmdSessionCreate, &SessionCreateCommand{Now: 3, ID: "s1", Name: "s", Actor: head}),
		MustEncode(CmdStreamCreate, &StreamCreateCommand{Now: 4, ID: "st1", Name: "a", Session: "s", Actor: head}),
		MustEncode(CmdTaskCreate, &TaskCreateCommand{Now: 5, ID: "t1", Stream: "a", ToolName: "run", Timeout: 30, Payload: []byte(`{}`), Actor: head}),
		MustEncode(CmdClaim, &ClaimCommand{Now: 6, Streams: []string{"a"}, Actor: left, AttemptID: "a1", LeaseToken: "k1", LeaseNanos: lease}),
		MustEncode(CmdTaskStep, &TaskStepCommand{Op: TaskStart, Now: 7, Ref: LeaseRef{JobID: "t1", AttemptID: "a1", Token: "k1"}, Actor: left}),
		MustEncode(CmdTaskStep, &TaskStepCommand{Op: TaskComplete, Now: 8, Ref: LeaseRef{JobID: "t1", AttemptID: "a1", Token: "k1"}, Actor: left, Result: []byte(`{}`)}),
		MustEncode(CmdTaskPurge, &TaskPurgeCommand{Now: 9, Before: 10, Max: 10}),
		MustEncode(CmdReap, &ReapCommand{Now: 1 << 62, Max: 10}),
	}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var logs []*raft.Log
		for _, e := range splitEntries(data) {
			if _, _, err := DecodeCommand(e); err != nil {
				continue // a leader never proposes it; Apply panics on it by design
			}
			logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Term: 1, Type: raft.LogCommand, Data: e})
		}
		one, _ := New(Config{})
		for _, l := range logs {
			one.Apply(l)
		}
		batch, _ := New(Config{})
		batch.ApplyBatch(logs)
		checkIndexes(t, one)
		checkIndexes(t, batch)
		h1 := stateHash(t, one)
		if stateHash(t, batch) != h1 {
			t.Fatal("the same log applied one by one and in one batch gives different states")
		}
		i1, sh1, ok1 := one.StateHash()
		i2, sh2, ok2 := batch.StateHash()
		if i1 != i2 || sh1 != sh2 || ok1 != ok2 {
			t.Fatal("the running state hashes differ")
		}
		s, _ := one.Snapshot()
		var sink memSink
		if err := s.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		restored, _ := New(Config{})
		if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			t.Fatalf("restore of a snapshot of an applied log: %v", err)
		}
		checkIndexes(t, restored)
		if stateHash(t, restored) != h1 {
			t.Fatal("the restored state differs from the snapshot's")
		}
	})
}
