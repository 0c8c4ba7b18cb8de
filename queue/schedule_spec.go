package queue

import (
	"strings"
	"time"
	_ "time/tzdata" // every node knows every time zone, whatever its system has

	"github.com/robfig/cron/v3"

	"github.com/spine-queue/spine/fsm"
)

// A schedule's spec (schedules.go): its cron expression, in its time zone,
// or its interval, parsed in the API's terms, and the ticks it makes.

// spec is a parsed schedule: the ticks after a time.
type spec interface {
	// next returns the first tick after t (unix nanoseconds), or 0 for
	// none.
	next(t int64) int64
}

type cronSpec struct{ s cron.Schedule }

func (c cronSpec) next(t int64) int64 {
	n := c.s.Next(time.Unix(0, t))
	if n.IsZero() {
		return 0
	}
	return n.UnixNano()
}

// intervalSpec ticks at every multiple of the interval since the epoch.
type intervalSpec struct{ every int64 }

func (i intervalSpec) next(t int64) int64 {
	if t < 0 {
		return 0
	}
	return (t/i.every + 1) * i.every
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSpec parses a schedule's cron expression (with its time zone) or
// interval, in the API's terms.
func parseSpec(expr, tz string, interval time.Duration) (spec, error) {
	switch {
	case expr != "" && interval != 0:
		return nil, invalid("give cron or intervalSeconds, not both")
	case expr == "" && interval == 0:
		return nil, invalid("a schedule needs cron or intervalSeconds")
	case interval != 0:
		if tz != "" {
			return nil, invalid("timezone applies to cron only (an interval counts from 1970-01-01T00:00:00Z)")
		}
		if interval < MinScheduleInterval || interval > MaxScheduleInterval || interval%time.Second != 0 {
			return nil, invalid("intervalSeconds must be a whole number from %d to %d", int64(MinScheduleInterval.Seconds()), int64(MaxScheduleInterval.Seconds()))
		}
		return intervalSpec{every: interval.Nanoseconds()}, nil
	}
	if len(expr) > 256 {
		return nil, invalid("cron is longer than 256 bytes")
	}
	upper := strings.ToUpper(strings.TrimSpace(expr))
	if strings.HasPrefix(upper, "CRON_TZ=") || strings.HasPrefix(upper, "TZ=") {
		if tz != "" {
			return nil, invalid("give the time zone once: in timezone or as CRON_TZ= in cron")
		}
	}
	if strings.HasPrefix(upper, "@EVERY") {
		return nil, invalid("cron: @every is not supported; use intervalSeconds")
	}
	var loc *time.Location
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, invalid("timezone %q is not an IANA time zone name (such as UTC or Europe/Paris)", tz)
		}
		loc = l
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		return nil, invalid("cron %q: %s (fields: [seconds] minutes hours day-of-month month day-of-week, or @yearly, @monthly, @weekly, @daily, @hourly)", expr, err)
	}
	sp, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, invalid("cron %q is not a cron expression", expr)
	}
	if loc != nil {
		sp.Location = loc
	} else if !strings.HasPrefix(upper, "CRON_TZ=") && !strings.HasPrefix(upper, "TZ=") {
		sp.Location = time.UTC
	}
	return cronSpec{s: sp}, nil
}

// scheduleSpec parses a stored schedule's spec.
func scheduleSpec(sc *fsm.Schedule) (spec, error) {
	return parseSpec(sc.Cron, sc.Timezone, time.Duration(sc.Interval)*time.Second)
}

// nextTick is the first tick of sc after its last one (0: none).
func nextTick(sc *fsm.Schedule, sp spec) int64 {
	return sp.next(max(sc.LastTick, sc.Anchor))
}

// countTicks counts the ticks in (from, to], up to limit.
func countTicks(sp spec, from, to int64, limit int) int64 {
	var n int64
	for t := sp.next(from); t != 0 && t <= to && n < int64(limit); t = sp.next(t) {
		n++
	}
	return n
}

// latestTick returns the latest tick in (from, to], or 0: it looks back
// from to over spans that double, so a long outage costs a few steps.
func latestTick(sp spec, from, to int64) int64 {
	for d := int64(time.Second); ; d *= 2 {
		start := max(from, to-d)
		if first := sp.next(start); first != 0 && first <= to {
			last := first
			for t := sp.next(first); t != 0 && t <= to; t = sp.next(t) {
				last = t
			}
			return last
		}
		if start == from || d > int64(10*366*24*time.Hour) {
			return 0
		}
	}
}
