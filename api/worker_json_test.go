package api

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestWorkerJSONMatchesEncodingJSON: the hand-written encoders of a claim,
// a complete's answer and a heartbeat's write what encoding/json writes for
// any value, every field set or left zero at random (claims nested in a
// claim's jobs and a complete's next included), strings and raw JSON that
// need escaping or compacting included. A field added to one of them and
// not to its AppendJSON fails it.
func TestWorkerJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(i int, what string, got []byte, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s %d:\n got %s\nwant %s", what, i, got, want)
		}
	}
	for i := range 20000 {
		var c WorkerClaim
		fill(r, reflect.ValueOf(&c).Elem(), 0)
		check(i, "claim", c.AppendJSON(nil), &c)

		var a WorkerCompleteAck
		fill(r, reflect.ValueOf(&a).Elem(), 0)
		check(i, "complete", a.AppendJSON(nil), a)

		var h WorkerHeartbeatResult
		fill(r, reflect.ValueOf(&h).Elem(), 0)
		check(i, "heartbeat", h.AppendJSON(nil), &h)
	}
}

// A lease's length in seconds is written as encoding/json writes a float,
// whatever its size: a plain decimal, or beyond that range its exponent.
func TestWorkerClaimFloats(t *testing.T) {
	for _, f := range []float64{0, 1, 300, 0.001, 1.0 / 3, 12345678.9, 1e-6, 9.99e-7, 1e-9, 1e20, 1e21, 3e300, -2.5, math.SmallestNonzeroFloat64} {
		c := WorkerClaim{Claimed: true, LeaseTTLSeconds: f, HeartbeatIntervalSeconds: f / 3}
		want, _ := json.Marshal(&c)
		if got := c.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("%g: got %s, want %s", f, got, want)
		}
	}
	h := WorkerHeartbeatResult{LeaseExpiresAt: time.Date(2026, 11, 30, 17, 0, 0, 1, time.UTC), OK: true, Cancel: true}
	want, _ := json.Marshal(&h)
	if got := h.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Errorf("heartbeat: got %s, want %s", got, want)
	}
}
