package api

import (
	"encoding/json"
	"time"
)

// StreamInfo is one stream as GET /streams and GET /streams/{name} show it,
// and the answer of a pause or resume. A stream is any name jobs were
// created in, plus the developer queue's catalog streams and paused ones.
type StreamInfo struct {
	Name string `json:"name"`
	// Jobs per status (zeros included).
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Dead      int `json:"dead"`
	Cancelled int `json:"cancelled"`
	// OldestQueuedAt is when the job that has waited longest was queued
	// (zero, left out, when nothing is queued); OldestQueuedSeconds its
	// age when the answer was made.
	OldestQueuedAt      time.Time `json:"oldestQueuedAt,omitzero"`
	OldestQueuedSeconds float64   `json:"oldestQueuedSeconds,omitempty"`
	// Paused is set while an operator has paused the stream: claims skip
	// it, a claim by id is refused (409 stream_paused), producers can
	// still create jobs in it. Pause says who paused it, when and why.
	Paused bool         `json:"paused"`
	Pause  *StreamPause `json:"pause,omitempty"`
	// Defaults are an operator's defaults for the jobs created in the
	// stream from now on (PUT /streams/{name}/defaults).
	Defaults *StreamDefaults `json:"defaults,omitempty"`
	// Status and Instructions come from the developer queue's catalog
	// (active or ended), for the streams it has.
	Status       string `json:"status,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	// Unmatched lists queued jobs no live worker can take: their
	// requirements, and how many jobs have them, for each set no worker
	// heard from in the last 10 minutes (a claim, or a heartbeat of a job
	// it claimed) had every capability of.
	Unmatched []UnmatchedJobs `json:"unmatched,omitempty"`
	// RateLimited counts the queued jobs their key's rate holds back now
	// (claimable once it allows; GET /rates).
	RateLimited int `json:"rateLimited,omitempty"`
}

// UnmatchedJobs counts the queued jobs of one requirement set.
type UnmatchedJobs struct {
	Requires []string `json:"requires"`
	Jobs     int      `json:"jobs"`
}

// StreamPause is an operator's pause of a stream.
type StreamPause struct {
	PausedAt time.Time `json:"pausedAt"`
	PausedBy string    `json:"pausedBy"`
	Reason   string    `json:"reason,omitempty"`
}

// StreamDefaults are a stream's defaults for the jobs created in it: the
// body of PUT /streams/{name}/defaults and, with when and by whom they
// were set, part of StreamInfo. A job created in the stream without a
// concurrencyKey gets ConcurrencyKey (so a default key caps how many of
// the stream's jobs run at once); one with a key but no concurrencyLimit
// gets ConcurrencyLimit (1 when not set). They are written into each job
// as it is created: a change applies to jobs created after it.
type StreamDefaults struct {
	ConcurrencyKey   string `json:"concurrencyKey,omitempty"`
	ConcurrencyLimit int    `json:"concurrencyLimit,omitempty"`
	// ResultSchema is the result contract of the jobs created in the
	// stream without their own resultSchema.
	ResultSchema json.RawMessage `json:"resultSchema,omitempty"`
	// RateLimit is the rate of the jobs created in the stream without a
	// rateLimit of their own.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	SetAt     time.Time  `json:"setAt,omitzero"`
	SetBy     string     `json:"setBy,omitempty"`
}

// StreamList is the answer of GET /streams, by name.
type StreamList struct {
	Streams []StreamInfo `json:"streams"`
}

// StreamPauseRequest is the optional body of POST /streams/{name}/pause.
type StreamPauseRequest struct {
	Reason string `json:"reason,omitempty"`
}
