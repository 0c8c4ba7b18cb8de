package api

import (
	"math"
	"strconv"
)

// A worker's claim, complete and heartbeat are the answers a worker's loop
// reads for every job, so they are encoded by hand, as a job is
// (job_json.go): the same bytes encoding/json writes for them
// (TestWorkerJSONMatchesEncodingJSON), without its reflection and its
// compacting of the payload through a second buffer.

// AppendJSON appends c's JSON encoding, encoding/json's, to b.
func (c *WorkerClaim) AppendJSON(b []byte) []byte {
	b = append(b, `{"claimed":`...)
	b = strconv.AppendBool(b, c.Claimed)
	b = optString(b, `,"job_id":`, c.JobID)
	b = optString(b, `,"attempt_id":`, c.AttemptID)
	b = optString(b, `,"lease_token":`, c.LeaseToken)
	b = optString(b, `,"stream":`, c.Stream)
	b = optString(b, `,"message_id":`, c.MessageID)
	b = optRaw(b, `,"payload":`, c.Payload)
	b = optFloat(b, `,"lease_ttl_seconds":`, c.LeaseTTLSeconds)
	b = optFloat(b, `,"heartbeat_interval_seconds":`, c.HeartbeatIntervalSeconds)
	b = optInt(b, `,"attempt":`, int64(c.Attempt))
	b = optInt(b, `,"max_attempts":`, int64(c.MaxAttempts))
	b = optRaw(b, `,"checkpoint":`, c.Checkpoint)
	b = optRaw(b, `,"result_schema":`, c.ResultSchema)
	if len(c.Elsewhere) > 0 {
		b = append(b, `,"elsewhere":[`...)
		for i, q := range c.Elsewhere {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendJSONString(b, q.Name)
			b = append(b, `,"queued":`...)
			b = strconv.AppendInt(b, int64(q.Queued), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(c.Jobs) > 0 {
		b = append(b, `,"jobs":[`...)
		for i := range c.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.Jobs[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// AppendJSON appends a's JSON encoding, encoding/json's, to b.
func (a WorkerCompleteAck) AppendJSON(b []byte) []byte {
	b = append(b, `{"ack":`...)
	b = strconv.AppendBool(b, a.Ack)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, a.Duplicate)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, a.OK)
	if a.Next != nil {
		b = a.Next.AppendJSON(append(b, `,"next":`...))
	}
	return append(b, '}')
}

// AppendJSON appends r's JSON encoding, encoding/json's, to b.
func (r *WorkerHeartbeatResult) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	if !r.LeaseExpiresAt.IsZero() {
		b = append(appendTime(append(b, `"lease_expires_at":`...), r.LeaseExpiresAt), ',')
	}
	b = append(b, `"ok":`...)
	b = strconv.AppendBool(b, r.OK)
	if r.Cancel {
		b = append(b, `,"cancel":true`...)
	}
	return append(b, '}')
}

// optFloat appends key and f as encoding/json writes a float64 field with
// omitempty. Beyond the plain decimal range encoding/json writes an
// exponent in a form of its own, so such a value (no lease has one) is left
// to it.
func optFloat(b []byte, key string, f float64) []byte {
	if f == 0 {
		return b
	}
	if a := math.Abs(f); a < 1e-6 || a >= 1e21 || math.IsNaN(f) {
		return appendMarshal(b, key, f)
	}
	return strconv.AppendFloat(append(b, key...), f, 'f', -1, 64)
}
