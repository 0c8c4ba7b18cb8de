package queue

import (
	"context"
	"math"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// RateInput is a rate limit as a caller gives it (a create's or a
// stream default's rateLimit): at most Limit claims of Key's jobs per
// PeriodSeconds, up to Burst (0: Limit) at once.
type RateInput struct {
	Key           string
	Limit         int
	PeriodSeconds float64
	Burst         int
}

// Rate checks in and returns the state machine's rate limit.
func (in *RateInput) Rate() (*fsm.RateLimit, error) {
	switch {
	case !ValidName(in.Key):
		return nil, invalid("rateLimit.key must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	case in.Limit < 1 || in.Limit > fsm.MaxRateLimit:
		return nil, invalid("rateLimit.limit must be 1 to %d claims per period", fsm.MaxRateLimit)
	case math.IsNaN(in.PeriodSeconds) || in.PeriodSeconds < 0.001 || in.PeriodSeconds > float64(fsm.MaxRatePeriod/1e9):
		return nil, invalid("rateLimit.periodSeconds must be 0.001 to %d (7 days)", fsm.MaxRatePeriod/1e9)
	case in.Burst < 0 || in.Burst > fsm.MaxRateBurst:
		return nil, invalid("rateLimit.burst must be 0 (the limit) to %d", fsm.MaxRateBurst)
	}
	r := &fsm.RateLimit{Key: in.Key, Limit: in.Limit, PeriodNanos: int64(math.Round(in.PeriodSeconds * 1e9)), Burst: in.Burst}
	if err := r.Valid(); err != nil {
		return nil, invalid("rateLimit: %v", err)
	}
	return r, nil
}

// rateFor is the rate limit of a create or defaults request, checked,
// and refused while the cluster's level has no rate limits.
func (s *Service) rateFor(ctx context.Context, in *RateInput) (*fsm.RateLimit, error) {
	if in == nil {
		return nil, nil
	}
	r, err := in.Rate()
	if err != nil {
		return nil, err
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return nil, ErrUpgradeInProgress
	}
	return r, nil
}

// RateInfo is one rate key's bucket as a caller sees it.
type RateInfo struct {
	fsm.RateBucket
	// Tokens is how many claims it allows now; NextAt (unix nanoseconds)
	// when it next allows one, if it allows none now.
	Tokens int
	NextAt int64
	// Waiting counts the queued jobs it holds back that the caller sees.
	Waiting int
}

// Rates lists the rate keys in use, by key, with how many of the jobs the
// caller sees each holds back. Its cost grows with the keys and their
// groups (stream and target), not with the jobs held back.
func (s *Service) Rates(c Caller) []RateInfo {
	r := s.state.Read()
	waiting := r.RateKeyWaiting(c.ViewRole(), c.InScope)
	now := s.now()
	var out []RateInfo
	for _, b := range r.RateBuckets() {
		ri := RateInfo{RateBucket: b, Tokens: b.Tokens(now), Waiting: waiting[b.Key]}
		if ri.Tokens == 0 {
			ri.NextAt = b.AllowAt()
		}
		out = append(out, ri)
	}
	return out
}

// RateWaiting counts, per stream, the queued jobs their rate holds back
// that the caller sees.
func (s *Service) RateWaiting(c Caller) map[string]int {
	return s.state.Read().RateWaiting(c.ViewRole(), c.InScope)
}

// RatePeriodSeconds is a rate's period in seconds, as the API shows it.
func RatePeriodSeconds(r *fsm.RateLimit) float64 { return time.Duration(r.PeriodNanos).Seconds() }
