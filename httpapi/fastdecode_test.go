package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/strictjson"
)

// fastCase is one type fastDecode takes: how it decodes a body, and how
// decode decoded it before (the reference whose value it must give).
type fastCase struct {
	name   string
	fast   func(b []byte) (any, bool)
	strict func(b []byte) (any, bool)
}

// strictDecode is decode's path for a type that does not decode itself: a
// new json.Decoder with DisallowUnknownFields, one value and nothing after.
func strictDecode[T any](b []byte) (any, bool) {
	var v T
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

func fastCaseOf[T any](name string) fastCase {
	return fastCase{name: name,
		fast: func(b []byte) (any, bool) {
			var v T
			ok := fastDecode(b, &v)
			return v, ok
		},
		strict: strictDecode[T],
	}
}

// fastCases are the types of fastDecode's switch: a type added there is
// added here.
var fastCases = []fastCase{
	{name: "create",
		fast: func(b []byte) (any, bool) {
			var v api.JobCreateRequest
			ok := fastDecode(b, &v)
			return v, ok
		},
		// A create decodes itself (decode checks the JSON, then hands it
		// the body).
		strict: func(b []byte) (any, bool) {
			var v api.JobCreateRequest
			if !json.Valid(b) || v.UnmarshalJSON(b) != nil {
				return nil, false
			}
			return v, true
		}},
	fastCaseOf[api.WorkerClaimRequest]("claim"),
	fastCaseOf[api.WorkerHeartbeatRequest]("heartbeat"),
	fastCaseOf[api.WorkerCompleteRequest]("complete"),
	fastCaseOf[api.WorkerFailRequest]("fail"),
	fastCaseOf[api.WorkerReleaseRequest]("release"),
}

// fastBodies are what workers and producers send, each taken by the fast
// path for the case it names (its first word), and some that decode's
// own path must decide.
var fastBodies = []struct {
	typ, body string
	fast      bool // the fast path takes it
}{
	{"create", `{"payload":{"n":1,"text":"héllo \"x\"","list":[1,2.5,-3e2,true,null]},"stream":"s1","priority":5,"maxAttempts":3,"idempotencyKey":"k-1"}`, true},
	{"create", `{"payload":"x","runAt":"2026-01-02T15:04:05Z","leaseSeconds":30,"delaySeconds":2,"target":"w","taskClass":"c","dependsOn":["a","b"],"requires":["gpu"],"onDependencyFailure":"cancel","concurrencyKey":"k","concurrencyLimit":2,"resultSchema":{"type":"object"}}`, true},
	{"create", `{"payload":1,"backoff":{"base":1,"max":9},"rateLimit":{"key":"r","limit":3,"periodSeconds":1.5,"burst":2}}`, true},
	{"create", `{"payload":null,"stream":null,"maxAttempts":null}`, true},
	{"create", `{}`, true},
	{"create", `{"Payload":1}`, false},                            // another case: encoding/json matches it
	{"create", `{"payload":1,"payload":2}`, false},                // a duplicate: the last wins there
	{"create", `{"payload":1,"backoff":{"base":1,"x":2}}`, false}, // unknown nested member
	{"create", `{"payload":1,"runAt":"tomorrow"}`, false},
	{"create", `{"payload":1,"priority":1.5}`, false},
	{"create", `{"payload":1,"nope":1}`, false},
	{"create", `{"payload":"\ud800"}`, false},
	{"claim", `{"worker_id":"w1","streams":["a","b"],"max_wait_ms":1000,"max_jobs":4,"capabilities":["gpu","lang:go"]}`, true},
	{"claim", `{"streams":[],"max_wait_ms":0}`, true},
	{"claim", `{"max_wait_ms":"10"}`, false},
	{"claim", `{"worker_id":"w1"}{}`, false},
	{"heartbeat", `{"job_id":"j","lease_token":"t","attempt_id":"a","progress":{"pct":50},"checkpoint":[1,2]}`, true},
	{"heartbeat", `{"job_id":"j","lease_token":"t","stream":"s","message_id":"m","progress":null}`, true},
	{"heartbeat", `{"job_id":"j","LEASE_TOKEN":"t"}`, false},
	{"complete", `{"job_id":"j","attempt_id":"a","lease_token":"t","result":{"ok":true},"next":{"streams":["default"],"max_wait_ms":1000}}`, true},
	{"complete", `{"job_id":"j","attempt_id":"a","lease_token":"t","result":null,"stdout":"out\n","stderr":"","next":null}`, true},
	{"complete", `{"job_id":"j","result":{"ok":true},"next":{"streams":["a"],"bogus":1}}`, false},
	{"complete", `{"job_id":"j","result":{"ok":tru}}`, false},
	{"complete", ` {"job_id":"j"} `, true}, // white space around: decode trims it anyway
	{"fail", `{"job_id":"j","attempt_id":"a","lease_token":"t","error":{"message":"boom","retryable":true,"code":"E1"},"stderr":"x","requeue":false}`, true},
	{"fail", `{"job_id":"j","lease_token":"t","error":"plain message"}`, true},
	{"fail", `{"job_id":"j","lease_token":"t","error":null}`, true},
	{"fail", `{"job_id":"j","lease_token":"t","error":7}`, false},
	{"release", `{"job_id":"j","lease_token":"t","attempt_id":"a","reason":"busy","cooldown_ms":500,"not_for_me":true}`, true},
	{"release", `{"job_id":"j","lease_token":"t","cooldown_ms":-1.5}`, false},
}

// What the fast path decodes, the strict path decodes to the same value;
// and the bodies a worker's loop and a producer send take the fast path.
func TestFastMatchesStrict(t *testing.T) {
	for _, b := range fastBodies {
		for _, c := range fastCases {
			v, ok := c.fast([]byte(b.body))
			if c.name == b.typ && ok != b.fast {
				t.Errorf("%s %s: fast path took it: %v, want %v", c.name, b.body, ok, b.fast)
			}
			if !ok {
				continue
			}
			want, wok := c.strict([]byte(b.body))
			if !wok || !reflect.DeepEqual(v, want) {
				t.Errorf("%s %s: fast path %+v, strict path %+v (decoded: %v)", c.name, b.body, v, want, wok)
			}
		}
	}
}

func FuzzFastMatchesStrict(f *testing.F) {
	for _, b := range fastBodies {
		f.Add([]byte(b.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range fastCases {
			v, ok := c.fast(body)
			if !ok {
				continue
			}
			if want, wok := c.strict(body); !wok || !reflect.DeepEqual(v, want) {
				t.Fatalf("%s %q: fast path %+v, strict path %+v (decoded: %v)", c.name, body, v, want, wok)
			}
		}
	})
}

// BenchmarkDecodeBody: a producer's create and a worker's complete, decoded
// by the fast path and by decode's own path (a create's UnmarshalJSON, the
// pooled strict decoder).
func BenchmarkDecodeBody(b *testing.B) {
	payload := `{"n":12345,"sent":"2026-11-30T20:00:00.123456789Z","pad":"` + string(bytes.Repeat([]byte("x"), 180)) + `"}`
	create := []byte(`{"payload":` + payload + `,"stream":"default"}`)
	complete := []byte(`{"job_id":"0b0a8d2e-9a4f-4c51-8c7e-5b1a2f3d4e5f","attempt_id":"a-8c1f0d9e-77aa-4b2c-9e1d-2f3a4b5c6d7e","lease_token":"t-5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b","result":{"ok":true},"next":{"streams":["default"],"max_wait_ms":1000}}`)
	run := func(name string, body []byte, decode func([]byte) bool) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if !decode(body) {
					b.Fatal("not decoded")
				}
			}
		})
	}
	run("create/fast", create, func(body []byte) bool { var v api.JobCreateRequest; return fastDecode(body, &v) })
	run("create/strict", create, func(body []byte) bool {
		var v api.JobCreateRequest
		return json.Valid(body) && v.UnmarshalJSON(body) == nil
	})
	run("complete/fast", complete, func(body []byte) bool { var v api.WorkerCompleteRequest; return fastDecode(body, &v) })
	run("complete/strict", complete, func(body []byte) bool { var v api.WorkerCompleteRequest; return strictjson.TryDecode(body, &v) })
}
