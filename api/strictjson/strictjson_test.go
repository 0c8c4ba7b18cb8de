package strictjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type body struct {
	WorkerID string          `json:"worker_id"`
	Streams  []string        `json:"streams"`
	Wait     int64           `json:"max_wait_ms"`
	Result   json.RawMessage `json:"result"`
	Nested   *struct {
		A int `json:"a"`
	} `json:"nested"`
}

// fresh is what a new strict decoder makes of b: the value, and whether
// it decoded b as one value with nothing after it.
func fresh(b []byte) (body, bool) {
	var v body
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return v, false
	}
	if d.More() {
		return v, false
	}
	_, err := d.Token()
	return v, err != nil
}

var bodies = []string{
	`{"worker_id":"w1","streams":["a","b"],"max_wait_ms":10}`,
	`{"result":{"ok":true,"list":[1,2,3]},"nested":{"a":7}}`,
	`{}`,
	`{"worker_id":"w1"`,                    // cut short
	`{"worker_id":"w1"}{"worker_id":"w2"}`, // two values
	`{"worker_id":"w1"} x`,                 // something after
	`{"worker_id":"w1"} `,                  // white space after
	`{"worker":"w1"}`,                      // unknown field
	`{"max_wait_ms":"10"}`,                 // wrong type
	`{"nested":{"a":1,"b":2}}`,             // unknown nested field
	`[1,2]`,
	`12`,
	`"s"`,
	`{"worker_id":"\u00e9\n"}`,
	`{"result":` + strings.Repeat(`[`, 50) + strings.Repeat(`]`, 50) + `}`,
	`{"worker_id":"` + strings.Repeat("x", 3000) + `"}`,
	`{"worker_id":"` + strings.Repeat("y", 9000) + `"}`, // too big to pool
	`{"worker_id":"w1",}`,
}

// TestTryDecodeAgreesWithANewDecoder: whatever a pooled decoder has read
// before, a body it accepts decodes to what a new strict decoder makes of
// it, and it accepts no body a new decoder refuses (or reads as more than
// one value).
func TestTryDecodeAgreesWithANewDecoder(t *testing.T) {
	for round := 0; round < 3; round++ {
		for i, s := range bodies {
			// Each body after every other one, so that pooled decoders
			// have read every kind of body before.
			for _, prev := range bodies {
				var junk body
				TryDecode([]byte(prev), &junk)
				want, ok := fresh([]byte(s))
				var got body
				if TryDecode([]byte(s), &got) {
					if !ok {
						t.Fatalf("body %d %q accepted after %q; a new decoder refuses it", i, s, prev)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("body %d %q after %q: got %+v, want %+v", i, s, prev, got, want)
					}
				} else if ok && len(s) <= maxPooled && strings.TrimSpace(s) == s {
					t.Fatalf("body %d %q refused after %q; a new decoder reads it", i, s, prev)
				}
			}
		}
	}
}

func FuzzTryDecode(f *testing.F) {
	for _, s := range bodies {
		f.Add([]byte(s), []byte(bodies[0]))
	}
	f.Fuzz(func(t *testing.T, b, prev []byte) {
		var junk body
		TryDecode(prev, &junk)
		want, ok := fresh(b)
		var got body
		if TryDecode(b, &got) {
			if !ok {
				t.Fatalf("%q accepted; a new decoder refuses it", b)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: got %+v, want %+v", b, got, want)
			}
		}
	})
}

// BenchmarkTryDecode: with -benchmem, the allocations of a worker's
// complete body decoded by a pooled decoder (pooled) and a new one (new).
func BenchmarkTryDecode(b *testing.B) {
	in := []byte(`{"worker_id":"w1","streams":["bench"],"max_wait_ms":0,"result":{"ok":true}}`)
	b.Run("pooled", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var v body
			if !TryDecode(in, &v) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var v body
			d := json.NewDecoder(bytes.NewReader(in))
			d.DisallowUnknownFields()
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
