package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
)

// Fuzz targets for the request types with their own JSON decoding (every
// node decodes them from a caller's body). `make fuzz` runs each for a
// fixed time; `make test` runs their seeds.

// compact is b without insignificant space and with <, > and & escaped, as
// encoding/json writes a json.RawMessage; or b when it is not JSON.
func compact(b []byte) string {
	var out, esc bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	json.HTMLEscape(&esc, out.Bytes())
	return esc.String()
}

// FuzzJobCreateRequest: any body decodes or is refused, never a panic; a
// decoded request encodes (MarshalJSON) to a body that decodes to the same
// request, including which optional fields it named (maxAttempts: 0 is
// not the default; stream: "" is not the default stream).
func FuzzJobCreateRequest(f *testing.F) {
	f.Add([]byte(`{"payload":{"task":"summarise"},"maxAttempts":3,"target":"left_claw","stream":"s","leaseSeconds":30,"taskClass":"LLM_LITE","idempotencyKey":"k"}`))
	f.Add([]byte(`{"payload":1,"maxAttempts":0,"stream":"","leaseSeconds":0}`))
	f.Add([]byte(`{"payload":null,"maxAttempts":null,"stream":null}`))
	f.Add([]byte(`{"MAXATTEMPTS":1,"maxAttempts":null,"Stream":"x","payload":"<&>"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"leaseSeconds":9223372036854775807,"maxAttempts":-1}`))
	f.Add([]byte(`{"payload":1,"runAt":"2026-01-02T15:04:05.123456789+02:00"}`))
	f.Add([]byte(`{"payload":1,"runAt":"tomorrow"}`))
	f.Add([]byte(`{"payload":1,"runAt":5}`))
	f.Add([]byte(`{"payload":1,"runAt":null}`))
	f.Add([]byte(`{"payload":1,"runAt":"2026-02-30T00:00:00Z"}`))
	f.Add([]byte("{\"payload\":\"\xff\",\"runAt\":\"\xff\"}"))
	f.Add([]byte(`[]`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r api.JobCreateRequest
		if err := json.Unmarshal(data, &r); err != nil {
			// A refusal the server can say in the API's terms: a field of
			// the wrong form (named), a wrong JSON type, malformed JSON or
			// an unknown field, never an error of Go's own (time's layout).
			var fe *api.FieldError
			var ute *json.UnmarshalTypeError
			var se *json.SyntaxError
			if !errors.As(err, &fe) && !errors.As(err, &ute) && !errors.As(err, &se) &&
				!strings.HasPrefix(err.Error(), "json: unknown field ") {
				t.Fatalf("%q refused with %T %v", data, err, err)
			}
			if fe != nil && (strings.Contains(fe.Error(), "2006") || fe.Field != "runAt") {
				t.Fatalf("%q: %v", data, fe)
			}
			return
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a decoded request does not encode: %v", err)
		}
		var back api.JobCreateRequest
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("its encoding %s does not decode: %v", enc, err)
		}
		// An absent payload encodes as null.
		if r.Payload == nil {
			r.Payload = json.RawMessage(`null`)
		}
		if compact(back.Payload) != compact(r.Payload) || back.MaxAttempts != r.MaxAttempts || back.Target != r.Target ||
			back.Stream != r.Stream || back.LeaseSeconds != r.LeaseSeconds || back.TaskClass != r.TaskClass ||
			back.IdempotencyKey != r.IdempotencyKey || back.HasMaxAttempts() != r.HasMaxAttempts() ||
			back.HasStream() != r.HasStream() || back.HasLeaseSeconds() != r.HasLeaseSeconds() || !back.RunAt.Equal(r.RunAt) {
			t.Fatalf("round trip through %s:\n%+v\n%+v", enc, r, back)
		}
	})
}

// FuzzJobError: a fail's error decodes from a string (its message) or an
// object; any other JSON value is a *json.UnmarshalTypeError (which the
// server turns into a 400 naming the field), never a panic; a decoded
// error encodes to JSON that decodes to the same error.
func FuzzJobError(f *testing.F) {
	f.Add([]byte(`"disk full"`))
	f.Add([]byte(`{"code":"E_IO","message":"disk full","stack":"at x","retryable":true}`))
	f.Add([]byte(`{"retryable":"yes"}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`12`))
	f.Add([]byte(`null`))
	f.Add([]byte(`"\ud800"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e api.JobError
		err := json.Unmarshal(data, &e)
		if err != nil {
			var ute *json.UnmarshalTypeError
			if json.Valid(data) && !errors.As(err, &ute) {
				t.Fatalf("valid JSON %q refused with %T %v, not an UnmarshalTypeError", data, err, err)
			}
			return
		}
		enc, err := json.Marshal(&e)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var back api.JobError
		if err := json.Unmarshal(enc, &back); err != nil || back != e {
			t.Fatalf("round trip through %s: %v\n%+v\n%+v", enc, err, e, back)
		}
		// In a fail request, as the server decodes it.
		var req api.JobFailRequest
		body := append(append([]byte(`{"error":`), data...), '}')
		if err := json.Unmarshal(body, &req); err != nil || req.Error == nil && string(bytes.TrimSpace(data)) != "null" ||
			req.Error != nil && *req.Error != e {
			t.Fatalf("in a fail request %s: %v %+v, want %+v", body, err, req.Error, e)
		}
	})
}
