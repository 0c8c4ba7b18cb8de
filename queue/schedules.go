package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/fsm"
)

// Recurring schedules (fsm/schedule.go). The state machine keeps each
// schedule's definition and the last tick it fired; this file parses the
// specs (time zones are loaded here, never in the state machine),
// computes which ticks are due, and runs the leader's scheduler, which
// proposes one fire entry per tick.

// Schedule bounds and defaults, as the API documents them.
const (
	// MinScheduleInterval and MaxScheduleInterval bound an interval.
	MinScheduleInterval = time.Second
	MaxScheduleInterval = 366 * 24 * time.Hour
	// DefaultCatchupWindow is a schedule's catch-up window when it names
	// none; MaxCatchupWindow the longest it may name.
	DefaultCatchupWindow = time.Hour
	MaxCatchupWindow     = 7 * 24 * time.Hour
	// MaxCatchupTicks bounds the late ticks catch-up "all" fires after an
	// outage: the latest ones; earlier ones are skipped.
	MaxCatchupTicks = 1000
	// ScheduleLateAfter: with catch-up "none", a tick fired more than this
	// late is skipped.
	ScheduleLateAfter = 10 * time.Second
	// SchedulerInterval is how often the leader's scheduler looks for due
	// ticks: a tick's job is created at most about this late.
	SchedulerInterval = 200 * time.Millisecond
	maxNoteBytes      = 1024
)

// ScheduleInput is a new schedule (or, with Replace, a schedule's new
// definition). Job is the template: every field of a create, but runAt,
// delaySeconds, dependsOn and the idempotency key, which a schedule's runs
// cannot share.
type ScheduleInput struct {
	Name     string
	Cron     string
	Timezone string
	// Interval fires at every multiple of it since 1970-01-01T00:00:00Z.
	Interval      time.Duration
	Overlap       string // default skip
	Catchup       string // default latest
	CatchupWindow time.Duration
	Paused        bool
	Note          string
	Replace       bool
	Job           CreateInput
	Actor         fsm.Actor
}

// ScheduleView is a schedule as its readers see it: the state's record
// and its next tick, computed from the spec (0 when paused or when the
// spec never fires again).
type ScheduleView struct {
	*fsm.Schedule
	Next int64
}

// dueFire returns the fire the scheduler proposes for sc at now, or nil
// when no tick is due. Catch-up: "all" fires each late tick within the
// window (at most MaxCatchupTicks, the latest) one entry at a time, in
// order; "latest" fires the latest due tick and skips the earlier ones;
// "none" does too, but skips it as well when it is later than
// ScheduleLateAfter.
func dueFire(sc *fsm.Schedule, sp spec, now int64) *fsm.ScheduleFireCommand {
	from := max(sc.LastTick, sc.Anchor)
	first := sp.next(from)
	if sc.Paused || first == 0 || first > now {
		return nil
	}
	fire := &fsm.ScheduleFireCommand{Name: sc.Name}
	window := sc.CatchupWindow * int64(time.Second)
	if window <= 0 {
		window = int64(DefaultCatchupWindow)
	}
	const scanLimit = 100_000 // a count of skipped ticks beyond it is a lower bound
	switch sc.Catchup {
	case fsm.CatchupAll:
		start := max(from, now-window)
		if countTicks(sp, start, now, MaxCatchupTicks+1) > MaxCatchupTicks {
			// Only the latest MaxCatchupTicks within the window run: start
			// after the tick before them.
			ring := make([]int64, MaxCatchupTicks+1)
			n := 0
			for t := sp.next(start); t != 0 && t <= now; t = sp.next(t) {
				ring[n%len(ring)] = t
				n++
			}
			start = ring[n%len(ring)]
		}
		fire.Through = sp.next(start)
		if fire.Through == 0 || fire.Through > now {
			return nil
		}
		fire.Dropped = countTicks(sp, from, start, scanLimit)
		fire.ID = "-" // a job
	default:
		fire.Through = latestTick(sp, from, now)
		if fire.Through == 0 {
			return nil
		}
		fire.Dropped = countTicks(sp, from, fire.Through-1, scanLimit)
		fire.ID = "-"
		if sc.Catchup == fsm.CatchupNone && now-fire.Through > int64(ScheduleLateAfter) {
			fire.ID = ""
		}
	}
	return fire
}

// ValidateSchedule checks a schedule input without proposing anything
// and returns the schedule the state machine would store.
func (s *Service) ValidateSchedule(ctx context.Context, in ScheduleInput) (*fsm.Schedule, error) {
	if err := s.maySchedule(in.Actor); err != nil {
		return nil, err
	}
	if !ValidName(in.Name) {
		return nil, invalid("schedule name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	}
	sp, err := parseSpec(in.Cron, in.Timezone, in.Interval)
	if err != nil {
		return nil, err
	}
	if sp.next(s.now()) == 0 {
		return nil, invalid("cron %q never fires (no matching time in the next five years)", in.Cron)
	}
	if in.Overlap == "" {
		in.Overlap = fsm.OverlapSkip
	}
	if in.Catchup == "" {
		in.Catchup = fsm.CatchupLatest
	}
	switch {
	case in.Overlap != fsm.OverlapSkip && in.Overlap != fsm.OverlapQueue && in.Overlap != fsm.OverlapAllow:
		return nil, invalid("overlap must be skip, queue or allow")
	case in.Catchup != fsm.CatchupNone && in.Catchup != fsm.CatchupLatest && in.Catchup != fsm.CatchupAll:
		return nil, invalid("catchup must be none, latest or all")
	case in.CatchupWindow < 0 || in.CatchupWindow > MaxCatchupWindow || in.CatchupWindow%time.Second != 0:
		return nil, invalid("catchupWindowSeconds must be a whole number from 1 to %d", int64(MaxCatchupWindow.Seconds()))
	case len(in.Note) > maxNoteBytes:
		return nil, invalid("note is longer than %d bytes", maxNoteBytes)
	case in.Job.RunAt != 0 || in.Job.Delay != 0:
		return nil, invalid("job: runAt and delaySeconds do not apply to a schedule's jobs (each is created at its tick)")
	case in.Job.IdempotencyKey != "":
		return nil, invalid("job: idempotencyKey does not apply to a schedule's jobs (each run's key names its tick)")
	case len(in.Job.DependsOn) > 0 || in.Job.RunOnDepFailure:
		return nil, invalid("job: dependsOn does not apply to a schedule's jobs (with overlap queue each run waits for the one before)")
	}
	window := in.CatchupWindow
	if window == 0 {
		window = DefaultCatchupWindow
	}
	tmpl := new(fsm.CreateCommand)
	in.Job.template, in.Job.Actor = tmpl, in.Actor
	if _, _, _, err := s.Create(ctx, in.Job); err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, invalid("job: %s", ie.Message)
		}
		return nil, err
	}
	return &fsm.Schedule{Name: in.Name, Template: tmpl, Cron: in.Cron, Timezone: in.Timezone, Interval: int64(in.Interval / time.Second),
		Overlap: in.Overlap, Catchup: in.Catchup, CatchupWindow: int64(window / time.Second), Note: in.Note, Paused: in.Paused}, nil
}

// CreateSchedule creates a schedule (409 when the name is taken), or with
// in.Replace replaces one's definition (keeping its runs and last tick).
func (s *Service) CreateSchedule(ctx context.Context, in ScheduleInput) (*ScheduleView, uint64, error) {
	sc, err := s.ValidateSchedule(ctx, in)
	if err != nil {
		return nil, 0, err
	}
	if !in.Replace && s.state.Peek().ScheduleCount() >= fsm.MaxSchedules {
		return nil, 0, invalid("at most %d schedules", fsm.MaxSchedules)
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return nil, 0, ErrUpgradeInProgress
	}
	res, idx, err := s.Propose(ctx, fsm.CmdScheduleSet, &fsm.ScheduleSetCommand{Now: s.now(), Schedule: sc, Replace: in.Replace, Actor: in.Actor})
	if err != nil {
		return nil, idx, err
	}
	return s.scheduleView(res.Schedule), idx, nil
}

// Schedules lists every schedule, by name, for head.
func (s *Service) Schedules(actor fsm.Actor) ([]ScheduleView, error) {
	if err := s.maySchedule(actor); err != nil {
		return nil, err
	}
	all := s.state.Read().Schedules()
	out := make([]ScheduleView, 0, len(all))
	for _, sc := range all {
		out = append(out, *s.scheduleView(sc))
	}
	return out, nil
}

// ScheduleNotFound is a schedule name no schedule has.
type ScheduleNotFound struct{ Name string }

func (e *ScheduleNotFound) Error() string { return "schedule " + e.Name + ": not found" }
func (e *ScheduleNotFound) Unwrap() error { return fsm.ErrNotFound }

// Schedule reads one schedule, for head.
func (s *Service) Schedule(actor fsm.Actor, name string) (*ScheduleView, error) {
	if err := s.maySchedule(actor); err != nil {
		return nil, err
	}
	sc := s.state.Peek().Schedule(name)
	if sc == nil {
		return nil, &ScheduleNotFound{Name: name}
	}
	return s.scheduleView(sc), nil
}

func (s *Service) scheduleView(sc *fsm.Schedule) *ScheduleView {
	v := &ScheduleView{Schedule: sc}
	if sp, err := scheduleSpec(sc); err == nil && !sc.Paused {
		v.Next = nextTick(sc, sp)
	}
	return v
}

// scheduleRefusal maps the state machine's refusal of a schedule command
// to the API's: an unknown name is not found.
func scheduleRefusal(name string, err error) error {
	if errors.Is(err, fsm.ErrNotFound) {
		return &ScheduleNotFound{Name: name}
	}
	return err
}

// PauseSchedule pauses (pause true) or resumes a schedule; both are
// idempotent. A resumed schedule's next tick is the first after the
// resume: the ticks of the pause are not caught up.
func (s *Service) PauseSchedule(ctx context.Context, name string, pause bool, actor fsm.Actor) (*ScheduleView, uint64, error) {
	if err := s.maySchedule(actor); err != nil {
		return nil, 0, err
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return nil, 0, ErrUpgradeInProgress
	}
	res, idx, err := s.Propose(ctx, fsm.CmdSchedulePause, &fsm.SchedulePauseCommand{Now: s.now(), Name: name, Pause: pause, Actor: actor})
	if err != nil {
		return nil, idx, scheduleRefusal(name, err)
	}
	return s.scheduleView(res.Schedule), idx, nil
}

// DeleteSchedule deletes a schedule; the jobs it made stay.
func (s *Service) DeleteSchedule(ctx context.Context, name string, actor fsm.Actor) (uint64, error) {
	if err := s.maySchedule(actor); err != nil {
		return 0, err
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return 0, ErrUpgradeInProgress
	}
	_, idx, err := s.Propose(ctx, fsm.CmdScheduleDelete, &fsm.ScheduleDeleteCommand{Now: s.now(), Name: name, Actor: actor})
	return idx, scheduleRefusal(name, err)
}

// TriggerSchedule makes one job of the schedule now, outside its ticks:
// paused or not, and whatever its overlap policy (with "queue" the job
// still waits for the previous run's). Its idempotency key names the
// trigger's time. The schedule's ticks are unchanged.
func (s *Service) TriggerSchedule(ctx context.Context, name string, actor fsm.Actor) (*ScheduleView, *fsm.Job, uint64, error) {
	if err := s.maySchedule(actor); err != nil {
		return nil, nil, 0, err
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return nil, nil, 0, ErrUpgradeInProgress
	}
	now := s.now()
	res, idx, err := s.Propose(ctx, fsm.CmdScheduleFire, &fsm.ScheduleFireCommand{Now: now, Name: name, Through: now, ID: s.cfg.NewID(), Trigger: true, Actor: actor})
	if err != nil {
		return nil, nil, idx, scheduleRefusal(name, err)
	}
	if res.Job == nil {
		run := res.Schedule.Recent[len(res.Schedule.Recent)-1]
		return nil, nil, idx, invalid("the schedule's job could not be created: %s", run.Error)
	}
	return s.scheduleView(res.Schedule), res.Job, idx, nil
}

// Scheduler returns the leader's scheduler, to run while this node leads:
// every SchedulerInterval it proposes a fire entry for each due tick of
// every schedule (dueFire), stamped with the leader's clock and a new job
// id. The state machine refuses a fire for a tick at or before the
// schedule's last, so a tick a deposed leader fired is never fired again.
func (s *Service) Scheduler() func(context.Context) {
	logger := s.cfg.Logger.Named("scheduler")
	return func(ctx context.Context) {
		logger.Info("scheduler started")
		defer logger.Info("scheduler stopped")
		specs := &specCache{m: map[string]cachedSpec{}}
		t := time.NewTicker(SchedulerInterval)
		defer t.Stop()
		for {
			if s.level() >= fsm.LevelPolicies {
				s.scheduleOnce(ctx, specs, logger)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// specCache keeps each schedule's parsed spec, by name and definition.
type specCache struct {
	mu sync.Mutex
	m  map[string]cachedSpec
}

type cachedSpec struct {
	index uint64
	sp    spec
	err   error
	// from and next: the schedule's first tick after from (its last tick
	// or anchor), so a pass looks at a schedule that is not due without
	// computing anything.
	from, next int64
}

func (c *specCache) get(sc *fsm.Schedule) (spec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[sc.Name]; ok && e.index == sc.Index {
		return e.sp, e.err
	}
	sp, err := scheduleSpec(sc)
	c.m[sc.Name] = cachedSpec{index: sc.Index, sp: sp, err: err, from: -1}
	return sp, err
}

// notDue reports whether sc's next tick, as of its last one, is after now.
func (c *specCache) notDue(sc *fsm.Schedule, sp spec, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[sc.Name]
	if from := max(sc.LastTick, sc.Anchor); e.from != from {
		e.from, e.next = from, sp.next(from)
		c.m[sc.Name] = e
	}
	return e.next == 0 || e.next > now
}

// maxFiresPerPass bounds the fires of one schedule in one pass, so a
// catch-up does not hold up the others.
const maxFiresPerPass = 50

func (s *Service) scheduleOnce(ctx context.Context, specs *specCache, logger hclog.Logger) {
	if s.state.Peek().ScheduleCount() == 0 {
		return // a point look: no view taken (sweep.go)
	}
	for _, sc := range s.state.Read().Schedules() {
		if sc.Paused {
			continue
		}
		sp, err := specs.get(sc)
		if err != nil {
			logger.Warn("schedule not fired: its spec does not parse here", "schedule", sc.Name, "error", err)
			continue
		}
		if specs.notDue(sc, sp, s.now()) {
			continue
		}
		for range maxFiresPerPass {
			if ctx.Err() != nil {
				return
			}
			cur := s.state.Peek().Schedule(sc.Name)
			if cur == nil || cur.Index != sc.Index {
				break // deleted or redefined meanwhile: the next pass
			}
			now := s.now()
			fire := dueFire(cur, sp, now)
			if fire == nil {
				break
			}
			fire.Now = now
			if fire.ID != "" {
				fire.ID = s.cfg.NewID()
			}
			res, _, err := s.Propose(ctx, fsm.CmdScheduleFire, fire)
			if err != nil {
				if !errors.Is(err, fsm.ErrStaleTick) {
					logger.Warn("schedule fire failed", "schedule", sc.Name, "tick", time.Unix(0, fire.Through).UTC(), "error", err)
				}
				break
			}
			if res.Job != nil {
				logger.Debug("schedule fired", "schedule", sc.Name, "tick", time.Unix(0, fire.Through).UTC(), "job", res.Job.ID)
			} else if n := len(res.Schedule.Recent); n > 0 && res.Schedule.Recent[n-1].Error != "" && res.Schedule.Recent[n-1].Tick == fire.Through {
				logger.Warn("schedule tick made no job", "schedule", sc.Name, "error", res.Schedule.Recent[n-1].Error)
			}
		}
	}
}
