package api

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// A job is the answer of every v0 write and of most reads, so it is encoded
// by hand: encoding/json's reflection (and its boxing of each optional time
// to ask whether it is zero) was most of a create's answer. The bytes are
// encoding/json's exactly: the fields in declaration order, omitempty and
// omitzero as tagged, strings escaped as it escapes them (HTML characters
// included), raw JSON compacted and escaped (TestJobJSONMatchesEncodingJSON).

// MarshalJSON encodes j as encoding/json would encode its fields.
func (j *Job) MarshalJSON() ([]byte, error) {
	return j.AppendJSON(nil), nil
}

// sizeHint is about the length of j's encoding.
func (j *Job) sizeHint() int {
	return 640 + len(j.Payload) + len(j.Result) + len(j.Progress) + len(j.Checkpoint) + len(j.ResultSchema) + len(j.Stdout) + len(j.Stderr)
}

// MarshalJSON encodes l as encoding/json would encode its fields.
func (l JobList) MarshalJSON() ([]byte, error) {
	return l.AppendJSON(nil), nil
}

// AppendJSON appends l's JSON encoding (MarshalJSON's) to b: a page of jobs
// is encoded by hand too, each job once, into one buffer grown once.
func (l JobList) AppendJSON(b []byte) []byte {
	n := 64
	for _, j := range l.Jobs {
		if j != nil {
			n += j.sizeHint()
		}
	}
	b = slices.Grow(b, n)
	b = append(b, `{"jobs":`...)
	if l.Jobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, j := range l.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			if j == nil {
				b = append(b, "null"...)
			} else {
				b = j.appendJSON(b)
			}
		}
		b = append(b, ']')
	}
	return AppendJobListEnd(b, l.NextCursor)
}

// AppendJobListEnd appends what follows a page's jobs array in JobList's
// encoding: the cursor ("" for JSON null) and the closing brace. A server
// writing a long page streams it as `{"jobs":[`, the jobs' AppendJSON
// separated by commas, `]` and this, and sends JobList's bytes exactly.
func AppendJobListEnd(b []byte, next NullableString) []byte {
	b = append(b, `,"nextCursor":`...)
	if next == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, string(next))
	}
	return append(b, '}')
}

// AppendJSON appends j's JSON encoding (MarshalJSON's) to b.
func (j *Job) AppendJSON(b []byte) []byte {
	b = slices.Grow(b, j.sizeHint())
	return j.appendJSON(b)
}

func (j *Job) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, j.ID)
	b = append(b, `,"stream":`...)
	b = appendJSONString(b, j.Stream)
	b = append(b, `,"target":`...)
	if j.Target == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, string(j.Target))
	}
	b = optString(b, `,"targetKind":`, j.TargetKind)
	b = append(b, `,"payload":`...)
	b = appendRaw(b, j.Payload)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(j.Status))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(j.Attempts), 10)
	b = append(b, `,"maxAttempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = optInt(b, `,"priority":`, int64(j.Priority))
	b = optInt(b, `,"leaseSeconds":`, int64(j.LeaseSeconds))
	b = optTime(b, `,"runAt":`, j.RunAt)
	if j.Backoff != nil {
		b = append(b, `,"backoff":{"base":`...)
		b = strconv.AppendInt(b, j.Backoff.Base, 10)
		b = optInt(b, `,"max":`, j.Backoff.Max)
		b = append(b, '}')
	}
	b = optString(b, `,"concurrencyKey":`, j.ConcurrencyKey)
	b = optInt(b, `,"concurrencyLimit":`, int64(j.ConcurrencyLimit))
	if j.RateLimit != nil {
		b = appendMarshal(b, `,"rateLimit":`, j.RateLimit)
	}
	b = optStrings(b, `,"dependsOn":`, j.DependsOn)
	b = optInt(b, `,"waitingOn":`, int64(j.WaitingOn))
	b = optString(b, `,"onDependencyFailure":`, j.OnDependencyFailure)
	b = optStrings(b, `,"requires":`, j.Requires)
	b = optStrings(b, `,"notFor":`, j.NotFor)
	b = optString(b, `,"taskClass":`, j.TaskClass)
	b = optRaw(b, `,"resultSchema":`, j.ResultSchema)
	b = optString(b, `,"claimedBy":`, j.ClaimedBy)
	b = optString(b, `,"workerId":`, j.WorkerID)
	b = optString(b, `,"attemptId":`, j.AttemptID)
	b = optString(b, `,"leaseToken":`, j.LeaseToken)
	b = optTime(b, `,"leaseExpiresAt":`, j.LeaseExpiresAt)
	if j.Cancel {
		b = append(b, `,"cancel":true`...)
	}
	b = optTime(b, `,"cancelRequestedAt":`, j.CancelRequestedAt)
	b = optString(b, `,"cancelReason":`, j.CancelReason)
	b = optRaw(b, `,"progress":`, j.Progress)
	b = optTime(b, `,"progressAt":`, j.ProgressAt)
	b = optRaw(b, `,"checkpoint":`, j.Checkpoint)
	b = optTime(b, `,"checkpointAt":`, j.CheckpointAt)
	b = optRaw(b, `,"result":`, j.Result)
	if j.Error != nil {
		b = appendMarshal(b, `,"error":`, j.Error)
	}
	b = optString(b, `,"stdout":`, j.Stdout)
	b = optString(b, `,"stderr":`, j.Stderr)
	b = append(b, `,"comments":`...)
	switch {
	case j.Comments == nil:
		b = append(b, "null"...)
	case len(j.Comments) == 0:
		b = append(b, "[]"...)
	default:
		b = appendMarshal(b, "", j.Comments)
	}
	b = optString(b, `,"idempotencyKey":`, j.IdempotencyKey)
	b = optString(b, `,"schedule":`, j.Schedule)
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, j.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = appendTime(b, j.UpdatedAt)
	b = optTime(b, `,"startedAt":`, j.StartedAt)
	b = optTime(b, `,"finishedAt":`, j.FinishedAt)
	b = append(b, `,"createIndex":`...)
	b = strconv.AppendUint(b, j.CreateIndex, 10)
	b = append(b, `,"modifyIndex":`...)
	b = strconv.AppendUint(b, j.ModifyIndex, 10)
	return append(b, '}')
}

func optString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

func optInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}

func optTime(b []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	return appendTime(append(b, key...), t)
}

func optRaw(b []byte, key string, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return b
	}
	return appendRaw(append(b, key...), raw)
}

func optStrings(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, key...)
	for i, s := range ss {
		if i == 0 {
			b = append(b, '[')
		} else {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendTime appends t as time.Time's MarshalJSON does. A time it refuses
// (a year outside 0–9999, which no job holds) is written as null.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendMarshal appends key and v as encoding/json encodes v (for the
// values few jobs carry).
func appendMarshal(b []byte, key string, v any) []byte {
	m, err := json.Marshal(v)
	if err != nil {
		m = []byte("null")
	}
	return append(append(b, key...), m...)
}

// appendRaw appends raw JSON as encoding/json encodes a RawMessage:
// compacted, with <, >, & and U+2028/U+2029 escaped. Bytes that are not
// JSON are written as null (encoding/json would fail the whole answer).
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if plainRaw(raw) {
		return append(b, raw...)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return append(b, "null"...)
	}
	var e bytes.Buffer
	json.HTMLEscape(&e, c.Bytes())
	return append(b, e.Bytes()...)
}

// plainRaw reports whether raw is valid JSON that compacting and
// HTML-escaping leave as it is: no whitespace, no <, >, & and no byte
// that could start U+2028 or U+2029.
func plainRaw(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return validJSON(raw)
}

// appendJSONString appends s quoted and escaped as encoding/json escapes a
// string with HTML escaping on (its default).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
