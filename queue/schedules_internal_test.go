package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
)

func TestParseScheduleSpec(t *testing.T) {
	bad := []struct {
		cron, tz string
		every    time.Duration
		want     string
	}{
		{"", "", 0, "needs cron or intervalSeconds"},
		{"* * * * *", "", time.Minute, "not both"},
		{"61 * * * *", "", 0, "cron"},
		{"* * * *", "", 0, "cron"},
		{"@every 5s", "", 0, "@every"},
		{"0 9 * * *", "Mars/Olympus", 0, "not an IANA time zone"},
		{"CRON_TZ=UTC 0 9 * * *", "UTC", 0, "time zone once"},
		{"", "UTC", time.Minute, "cron only"},
		{"", "", 500 * time.Millisecond, "intervalSeconds"},
		{"", "", 1500 * time.Millisecond, "intervalSeconds"},
	}
	for _, b := range bad {
		if _, err := parseSpec(b.cron, b.tz, b.every); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("cron %q tz %q every %v: %v, want %q", b.cron, b.tz, b.every, err, b.want)
		}
	}
	at := func(s string) int64 { v, _ := time.Parse(time.RFC3339, s); return v.UnixNano() }
	good := []struct {
		cron, tz    string
		every       time.Duration
		after, next string
	}{
		{"*/5 * * * * *", "", 0, "2026-03-04T05:06:07Z", "2026-03-04T05:06:10Z"}, // seconds
		{"0 9 * * *", "", 0, "2026-03-04T05:06:07Z", "2026-03-04T09:00:00Z"},     // UTC by default
		{"0 9 * * *", "America/New_York", 0, "2026-03-04T05:06:07Z", "2026-03-04T14:00:00Z"},
		{"0 9 * * *", "America/New_York", 0, "2026-07-04T05:06:07Z", "2026-07-04T13:00:00Z"}, // summer time
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "", 0, "2026-03-04T05:06:07Z", "2026-03-05T00:00:00Z"},
		{"@hourly", "", 0, "2026-03-04T05:06:07Z", "2026-03-04T06:00:00Z"},
		{"", "", 10 * time.Second, "2026-03-04T05:06:07Z", "2026-03-04T05:06:10Z"},
		{"", "", time.Hour, "2026-03-04T05:00:00Z", "2026-03-04T06:00:00Z"},
	}
	for _, g := range good {
		sp, err := parseSpec(g.cron, g.tz, g.every)
		if err != nil {
			t.Fatalf("%q: %v", g.cron, err)
		}
		if got := sp.next(at(g.after)); got != at(g.next) {
			t.Errorf("%q %s after %s: %s, want %s", g.cron, g.tz, g.after, time.Unix(0, got).UTC(), g.next)
		}
	}
}

// Which tick the scheduler fires, by catch-up policy, after an outage.
func TestDueFireCatchup(t *testing.T) {
	at := func(s string) int64 { v, _ := time.Parse(time.RFC3339, s); return v.UnixNano() }
	hourly, _ := parseSpec("@hourly", "", 0)
	base := &fsm.Schedule{Name: "h", Cron: "@hourly", LastTick: at("2026-03-04T10:00:00Z"), Anchor: at("2026-03-01T00:00:00Z")}
	now := at("2026-03-04T12:30:00Z")
	check := func(catchup string, window int64, wantThrough string, wantJob bool, wantDropped int64) {
		t.Helper()
		sc := *base
		sc.Catchup, sc.CatchupWindow = catchup, window
		f := dueFire(&sc, hourly, now)
		if f == nil || f.Through != at(wantThrough) || (f.ID != "") != wantJob || f.Dropped != wantDropped {
			t.Fatalf("%s window %d: %+v, want through %s job %v dropped %d", catchup, window, f, wantThrough, wantJob, wantDropped)
		}
	}
	check(fsm.CatchupNone, 0, "2026-03-04T12:00:00Z", false, 1)    // 30 minutes late: skipped, as is 11:00
	check(fsm.CatchupLatest, 0, "2026-03-04T12:00:00Z", true, 1)   // 12:00 runs, 11:00 skipped
	check(fsm.CatchupAll, 3600, "2026-03-04T12:00:00Z", true, 1)   // 11:00 is outside the hour's window
	check(fsm.CatchupAll, 3*3600, "2026-03-04T11:00:00Z", true, 0) // both, 11:00 first
	// On time: none fires it.
	sc := *base
	sc.Catchup = fsm.CatchupNone
	sc.LastTick = at("2026-03-04T11:00:00Z")
	if f := dueFire(&sc, hourly, at("2026-03-04T12:00:03Z")); f == nil || f.ID == "" || f.Dropped != 0 {
		t.Fatalf("a tick 3s late under none: %+v", f)
	}
	// Nothing due, or paused: no fire.
	if f := dueFire(&sc, hourly, at("2026-03-04T11:59:59Z")); f != nil {
		t.Fatalf("fired early: %+v", f)
	}
	sc.Paused = true
	if f := dueFire(&sc, hourly, at("2026-03-04T13:00:00Z")); f != nil {
		t.Fatal("a paused schedule fired")
	}
	// All, bounded: of 2000 missed 1s ticks, the latest MaxCatchupTicks.
	every, _ := parseSpec("", "", time.Second)
	n := at("2026-03-04T12:00:00Z")
	s1 := &fsm.Schedule{Name: "s", Interval: 1, Catchup: fsm.CatchupAll, CatchupWindow: 3600, LastTick: n - 2000e9}
	f := dueFire(s1, every, n)
	if f == nil || f.Through != n-(MaxCatchupTicks-1)*1e9 || f.Dropped != 2000-MaxCatchupTicks {
		t.Fatalf("bounded catch-up: %+v", f)
	}
	// The ticks before the anchor (a creation or resume) never fire.
	s2 := &fsm.Schedule{Name: "s", Interval: 1, Catchup: fsm.CatchupAll, CatchupWindow: 3600, Anchor: n}
	if f := dueFire(s2, every, n+500e6); f != nil {
		t.Fatalf("fired before the first tick after the anchor: %+v", f)
	}
	if f := dueFire(s2, every, n+1e9); f == nil || f.Through != n+1e9 {
		t.Fatalf("first tick: %+v", f)
	}
}
