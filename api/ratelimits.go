package api

import "time"

// RateLimit is a rate a job's key may be claimed at, cluster-wide: at most
// Limit claims per PeriodSeconds, up to Burst of them at once (0 or left
// out: Limit). It is the rateLimit of a create, of a stream's defaults and
// of a job. A key has one rate: the one the latest create naming the key
// carried (its own or its stream's default); the jobs of the key already
// queued wait under it from then on.
type RateLimit struct {
	Key           string  `json:"key"`
	Limit         int     `json:"limit"`
	PeriodSeconds float64 `json:"periodSeconds"`
	Burst         int     `json:"burst,omitempty"`
}

// RateInfo is one rate key as GET /rates shows it: its rate, how many
// claims it allows now (Tokens), when it next allows one if it allows
// none now (NextAt), and how many queued jobs wait on it.
type RateInfo struct {
	RateLimit
	Tokens  int       `json:"tokens"`
	NextAt  time.Time `json:"nextAt,omitzero"`
	Waiting int       `json:"waiting"`
}

// RateList is the answer of GET /rates, by key.
type RateList struct {
	Rates []RateInfo `json:"rates"`
}
