package api

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// JobCreateRequest is the body of POST /jobs. Payload is required (any JSON
// value but null); zero optional fields take the server's defaults.
//
// A decoded request remembers which of MaxAttempts, Stream and LeaseSeconds
// its body named, so that the server can refuse an explicit 0 or "" instead
// of reading it as "not given"; see [JobCreateRequest.HasMaxAttempts].
type JobCreateRequest struct {
	Payload      json.RawMessage `json:"payload"`
	MaxAttempts  int             `json:"maxAttempts,omitempty"`
	Target       string          `json:"target,omitempty"`
	Stream       string          `json:"stream,omitempty"`
	LeaseSeconds int             `json:"leaseSeconds,omitempty"`
	TaskClass    string          `json:"taskClass,omitempty"`
	// IdempotencyKey makes a repeated create answer the first job (the
	// same as the Idempotency-Key header). The Go client's JobCreate
	// generates a UUID when it is empty, so its own retries are safe.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Priority, from -100 to 100 (default 0): higher first within the
	// stream, FIFO within a priority, aged so that none starves.
	Priority int `json:"priority,omitempty"`
	// RunAt, or DelaySeconds from now (not both), schedules the job: no
	// claim takes it before that time. A past RunAt is now.
	RunAt        time.Time `json:"runAt,omitzero"`
	DelaySeconds int64     `json:"delaySeconds,omitempty"`
	// Backoff makes a fail with requeue wait before the job can be
	// claimed again (without it, at once).
	Backoff *Backoff `json:"backoff,omitempty"`
	// ConcurrencyKey limits how many jobs of the key run at once,
	// cluster-wide, to ConcurrencyLimit (default: the stream's default
	// limit, or 1); the others wait without blocking other keys. Without
	// a key, the stream's default key (if it has one) applies.
	ConcurrencyKey   string `json:"concurrencyKey,omitempty"`
	ConcurrencyLimit int    `json:"concurrencyLimit,omitempty"`
	// DependsOn names existing jobs (at most 100) that must all be done
	// before this one can be claimed; if one ends otherwise, this one
	// fails (code dependency_failed), unless OnDependencyFailure is
	// "run": then it runs once every one has ended, however.
	DependsOn []string `json:"dependsOn,omitempty"`
	// OnDependencyFailure is "fail" (the default) or "run".
	OnDependencyFailure string `json:"onDependencyFailure,omitempty"`
	// Requires lists capabilities (labels such as gpu, gpu:a100,
	// lang:python; at most 16) a claimant must all have: only a claim
	// naming them among its capabilities is handed the job.
	Requires []string `json:"requires,omitempty"`
	// ResultSchema is the job's result contract: a JSON Schema (a subset,
	// docs/api.md "Result contracts") its result must match; a complete
	// whose result does not is refused (400 result_mismatch) and the job
	// keeps running. Without it, the stream's default (if any) applies.
	ResultSchema json.RawMessage `json:"resultSchema,omitempty"`
	// RateLimit limits how often jobs of its key are claimed, cluster-wide
	// (without one, the stream's default rate, if it has one, applies):
	// a job over the rate stays queued, without holding back other jobs,
	// until the rate allows its claim.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	named createField // the optional fields the decoded body named
}

// createField is a set of JobCreateRequest's optional fields.
type createField uint8

const (
	namedMaxAttempts createField = 1 << iota
	namedStream
	namedLeaseSeconds
)

// HasMaxAttempts reports whether the request gives maxAttempts: its body
// named it (with any value but null), or, built in Go, MaxAttempts is not 0.
func (r JobCreateRequest) HasMaxAttempts() bool {
	return r.MaxAttempts != 0 || r.named&namedMaxAttempts != 0
}

// HasStream reports whether the request gives stream: its body named it
// (with any value but null), or, built in Go, Stream is not "".
func (r JobCreateRequest) HasStream() bool {
	return r.Stream != "" || r.named&namedStream != 0
}

// HasLeaseSeconds reports whether the request gives leaseSeconds: its body
// named it (with any value but null), or, built in Go, LeaseSeconds is not 0.
func (r JobCreateRequest) HasLeaseSeconds() bool {
	return r.LeaseSeconds != 0 || r.named&namedLeaseSeconds != 0
}

// jobCreateJSON is JobCreateRequest as it is encoded and decoded: a nil
// pointer is a field the body does not name.
type jobCreateJSON struct {
	Payload             json.RawMessage `json:"payload"`
	MaxAttempts         *int            `json:"maxAttempts,omitempty"`
	Target              string          `json:"target,omitempty"`
	Stream              *string         `json:"stream,omitempty"`
	LeaseSeconds        *int64          `json:"leaseSeconds,omitempty"`
	TaskClass           string          `json:"taskClass,omitempty"`
	IdempotencyKey      string          `json:"idempotencyKey,omitempty"`
	Priority            int             `json:"priority,omitempty"`
	RunAt               runAtTime       `json:"runAt,omitzero"`
	DelaySeconds        int64           `json:"delaySeconds,omitempty"`
	Backoff             *Backoff        `json:"backoff,omitempty"`
	ConcurrencyKey      string          `json:"concurrencyKey,omitempty"`
	ConcurrencyLimit    int             `json:"concurrencyLimit,omitempty"`
	DependsOn           []string        `json:"dependsOn,omitempty"`
	OnDependencyFailure string          `json:"onDependencyFailure,omitempty"`
	Requires            []string        `json:"requires,omitempty"`
	ResultSchema        json.RawMessage `json:"resultSchema,omitempty"`
	RateLimit           *RateLimit      `json:"rateLimit,omitempty"`
}

// MarshalJSON writes the optional fields the request gives (the Has
// methods), so that a decoded request encodes as its body did.
func (r JobCreateRequest) MarshalJSON() ([]byte, error) {
	out := jobCreateJSON{Payload: r.Payload, Target: r.Target, TaskClass: r.TaskClass, IdempotencyKey: r.IdempotencyKey, Priority: r.Priority,
		RunAt: runAtTime(r.RunAt), DelaySeconds: r.DelaySeconds, Backoff: r.Backoff, ConcurrencyKey: r.ConcurrencyKey, ConcurrencyLimit: r.ConcurrencyLimit, DependsOn: r.DependsOn, Requires: r.Requires,
		OnDependencyFailure: r.OnDependencyFailure, ResultSchema: r.ResultSchema, RateLimit: r.RateLimit}
	if r.HasMaxAttempts() {
		out.MaxAttempts = &r.MaxAttempts
	}
	if r.HasStream() {
		out.Stream = &r.Stream
	}
	if r.HasLeaseSeconds() {
		ls := int64(r.LeaseSeconds)
		out.LeaseSeconds = &ls
	}
	return json.Marshal(&out)
}

// UnmarshalJSON decodes the body and records which optional fields it named.
func (r *JobCreateRequest) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var in jobCreateJSON
	// Strict: a misspelt field would otherwise be ignored and its default
	// used (the decoder of the body does not see inside this method). A
	// body that names only fields json.Unmarshal decodes as the strict
	// decoder does (nearly every one) is decoded by it, without a decoder
	// and its copy of the body.
	if onlyCreateFields(b) {
		if err := json.Unmarshal(b, &in); err != nil {
			return err
		}
	} else {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&in); err != nil {
			return err
		}
	}
	r.fromJSON(&in)
	return nil
}

// DecodeWith decodes a create's body with decode, a strict decoder that
// fills the value it is handed (a pointer to a zero value of the body's
// fields) and reports whether it did; r is set only then, and the answer
// is decode's. A server hands it a faster decoder than UnmarshalJSON's,
// and decodes a body it refuses with UnmarshalJSON (httpapi).
func (r *JobCreateRequest) DecodeWith(decode func(fields any) bool) bool {
	in := createFieldsPool.Get().(*jobCreateJSON)
	defer func() {
		*in = jobCreateJSON{}
		createFieldsPool.Put(in)
	}()
	if !decode(in) {
		return false
	}
	r.fromJSON(in)
	return true
}

// createFieldsPool holds the bodies' fields DecodeWith decodes into: handed
// to the decoder as an interface, a new one would go to the heap with every
// create, in the size class of the job the create makes.
var createFieldsPool = sync.Pool{New: func() any { return new(jobCreateJSON) }}

// fromJSON makes r the request in names.
func (r *JobCreateRequest) fromJSON(in *jobCreateJSON) {
	*r = JobCreateRequest{Payload: in.Payload, Target: in.Target, TaskClass: in.TaskClass, IdempotencyKey: in.IdempotencyKey, Priority: in.Priority,
		RunAt: time.Time(in.RunAt), DelaySeconds: in.DelaySeconds, Backoff: in.Backoff, ConcurrencyKey: in.ConcurrencyKey, ConcurrencyLimit: in.ConcurrencyLimit, DependsOn: in.DependsOn, Requires: in.Requires,
		OnDependencyFailure: in.OnDependencyFailure, ResultSchema: in.ResultSchema, RateLimit: in.RateLimit}
	if in.MaxAttempts != nil {
		r.MaxAttempts, r.named = *in.MaxAttempts, r.named|namedMaxAttempts
	}
	if in.Stream != nil {
		r.Stream, r.named = *in.Stream, r.named|namedStream
	}
	if in.LeaseSeconds != nil {
		r.LeaseSeconds, r.named = int(*in.LeaseSeconds), r.named|namedLeaseSeconds
	}
}

// runAtTime is a create's runAt as its body carries it: an RFC 3339 time
// as time.Time encodes it, refused with a FieldError naming the field and
// its form (time.Time's own error names Go's layout, not the field).
type runAtTime time.Time

func (t runAtTime) IsZero() bool { return time.Time(t).IsZero() }

func (t runAtTime) MarshalJSON() ([]byte, error) { return time.Time(t).MarshalJSON() }

func (t *runAtTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v time.Time
	if err := v.UnmarshalJSON(b); err != nil {
		got := string(b)
		if r := []rune(got); len(r) > 64 {
			got = string(r[:61]) + "..."
		}
		return &FieldError{Field: "runAt", Want: "an RFC 3339 time such as 2026-01-02T15:04:05Z", Got: got}
	}
	*t = runAtTime(v)
	return nil
}

// createFields are the members a create's body may name that json.Unmarshal
// decodes as the strict decoder does: all but backoff and rateLimit, objects
// whose own unknown members the strict decoder refuses and json.Unmarshal
// would skip.
var createFields = [...]string{"payload", "maxAttempts", "target", "stream", "leaseSeconds", "taskClass", "idempotencyKey",
	"priority", "runAt", "delaySeconds", "concurrencyKey", "concurrencyLimit", "dependsOn", "onDependencyFailure",
	"requires", "resultSchema"}

// onlyCreateFields reports whether b, a JSON object, names no member but
// createFields, matched as encoding/json matches them (without regard to
// case). It answers false when unsure (a name with an escape, or anything
// but a well-formed object), and the strict decoder then decides.
func onlyCreateFields(b []byte) bool {
	i := skipJSONSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) && b[i] == '"' {
		end := bytes.IndexByte(b[i+1:], '"')
		if end < 0 {
			return false
		}
		name := b[i+1 : i+1+end]
		if bytes.IndexByte(name, '\\') >= 0 || !isCreateField(name) {
			return false
		}
		i = skipJSONSpace(b, i+end+2)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		if i = skipJSONValue(b, skipJSONSpace(b, i+1)); i < 0 {
			return false
		}
		i = skipJSONSpace(b, i)
		switch {
		case i >= len(b):
			return false
		case b[i] == '}':
			return skipJSONSpace(b, i+1) == len(b)
		case b[i] != ',':
			return false
		}
		i = skipJSONSpace(b, i+1)
	}
	return false
}

func isCreateField(name []byte) bool {
	for _, f := range createFields {
		if len(f) == len(name) && bytes.EqualFold(name, []byte(f)) {
			return true
		}
	}
	return false
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipJSONValue returns the index just past the value that starts at
// b[i] (b is valid JSON: its decoder checked it), or -1.
func skipJSONValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return -1
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object: a number or literal ended here
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(b) && (b[i-1] == '"' || b[i-1] == '}' || b[i-1] == ']') {
			return i
		}
	}
	if depth != 0 {
		return -1
	}
	return i
}
