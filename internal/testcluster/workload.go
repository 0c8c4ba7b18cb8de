package testcluster

import (
	"context"
	"strconv"
	"time"
)

// LoadEnv is the node environment of a fault workload (the drill, the chaos
// workload): short leases, a fast reaper and a short leadership grace, so
// work whose answer was lost in a fault is taken back within seconds, and
// log level info (the harness's default is debug, and such a load writes a
// lot). extra is added last and wins.
func LoadEnv(leaseSeconds, reaperIntervalMS, leaseGraceMS int, extra map[string]string) map[string]string {
	env := map[string]string{
		"LEASE_SECONDS":        strconv.Itoa(leaseSeconds),
		"REAPER_INTERVAL_MS":   strconv.Itoa(reaperIntervalMS),
		"SPINE_LEASE_GRACE_MS": strconv.Itoa(leaseGraceMS),
		"SPINE_LOG_LEVEL":      "info",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// SleepCtx sleeps for d unless ctx ends first; it reports whether it slept
// the whole time (false: ctx ended).
func SleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
