package api

import "time"

// ScheduleRequest is the body of POST /v1/schedules (a new schedule) and
// PUT /v1/schedules/{name} (a schedule's new definition). Give Cron or
// IntervalSeconds, not both.
type ScheduleRequest struct {
	// Name: 1-128 letters, digits, '_', '.', ':' or '-' (in the PUT's
	// path; a body's name, if given, must be the same).
	Name string `json:"name,omitempty"`
	// Cron is a cron expression: five fields (minute hour day-of-month
	// month day-of-week) or six with seconds first, or a descriptor
	// (@yearly, @monthly, @weekly, @daily, @hourly); it may start with
	// CRON_TZ=<zone>. Timezone is its IANA time zone (default UTC).
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// IntervalSeconds fires at every multiple of it since
	// 1970-01-01T00:00:00Z (3600: on the hour), at least 1.
	IntervalSeconds int64 `json:"intervalSeconds,omitempty"`
	// Overlap: skip (default), queue or allow. Catchup: none, latest
	// (default) or all, within CatchupWindowSeconds (default 3600).
	Overlap              string `json:"overlap,omitempty"`
	Catchup              string `json:"catchup,omitempty"`
	CatchupWindowSeconds int64  `json:"catchupWindowSeconds,omitempty"`
	// Paused creates the schedule paused.
	Paused bool   `json:"paused,omitempty"`
	Note   string `json:"note,omitempty"`
	// Job is the job every run creates: the body of POST /jobs, without
	// runAt, delaySeconds, dependsOn, onDependencyFailure or
	// idempotencyKey.
	Job JobCreateRequest `json:"job"`
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	Name                 string           `json:"name"`
	Cron                 string           `json:"cron,omitempty"`
	Timezone             string           `json:"timezone,omitempty"`
	IntervalSeconds      int64            `json:"intervalSeconds,omitempty"`
	Overlap              string           `json:"overlap"`
	Catchup              string           `json:"catchup"`
	CatchupWindowSeconds int64            `json:"catchupWindowSeconds"`
	Note                 string           `json:"note,omitempty"`
	Job                  JobCreateRequest `json:"job"`
	Paused               bool             `json:"paused"`
	PausedAt             time.Time        `json:"pausedAt,omitzero"`
	// NextFireAt is the schedule's next tick (none while paused);
	// LastFireAt the latest tick fired or skipped, LastFiredAt when that
	// happened.
	NextFireAt  time.Time `json:"nextFireAt,omitzero"`
	LastFireAt  time.Time `json:"lastFireAt,omitzero"`
	LastFiredAt time.Time `json:"lastFiredAt,omitzero"`
	// Runs counts the jobs the schedule made; Skipped the ticks that made
	// none (overlap skip, catch-up, or a job that could not be created).
	Runs    int64 `json:"runs"`
	Skipped int64 `json:"skipped"`
	// Recent are the latest runs (at most 20), oldest first.
	Recent    []ScheduleRun `json:"recent"`
	CreatedAt time.Time     `json:"createdAt"`
	UpdatedAt time.Time     `json:"updatedAt"`
	CreatedBy string        `json:"createdBy,omitempty"`
}

// ScheduleRun is one run of a schedule: its tick (a trigger's time), and
// the job it made, or why none could be made.
type ScheduleRun struct {
	Tick    time.Time `json:"tick"`
	JobID   string    `json:"jobId,omitempty"`
	Trigger bool      `json:"trigger,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// ScheduleList is the answer of GET /v1/schedules.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

// ScheduleTrigger is the answer of POST /v1/schedules/{name}/trigger: the
// job made and the schedule after it.
type ScheduleTrigger struct {
	Job      Job      `json:"job"`
	Schedule Schedule `json:"schedule"`
}
