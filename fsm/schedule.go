package fsm

import (
	"fmt"
	"strconv"
)

// Recurring schedules (from LevelPolicies): a named job template and when
// to make a job of it, by a cron expression or a fixed interval. The state
// machine never reads the clock or parses a spec: the leader's scheduler
// (queue/schedules.go) computes which ticks are due and proposes one fire
// entry per schedule that creates the tick's jobs and advances the
// schedule's last fired tick together, so a tick is fired at most once
// whatever the leader does (a fire for a tick at or before the last one
// is refused), and each job carries the tick in its idempotency key.

// Command types of schedules (44-47).
const (
	CmdScheduleSet    CommandType = 44
	CmdScheduleDelete CommandType = 45
	CmdScheduleFire   CommandType = 46
	CmdSchedulePause  CommandType = 47
)

// Schedule bounds.
const (
	// MaxSchedules bounds the schedules a cluster holds.
	MaxSchedules = 10_000
	// ScheduleRecent is how many of its latest runs a schedule keeps.
	ScheduleRecent = 20
)

// Overlap policies: what a tick does while the job of the schedule's
// previous run has not finished.
const (
	// OverlapSkip: the tick makes no job (it counts as skipped).
	OverlapSkip = "skip"
	// OverlapQueue: the tick's job is created at once but waits for the
	// previous run's job to end (however it ends) before it is claimable:
	// the schedule's jobs run one at a time, in tick order.
	OverlapQueue = "queue"
	// OverlapAllow: the tick's job is created claimable at once, so runs
	// may overlap.
	OverlapAllow = "allow"
)

// Catch-up policies: which ticks a scheduler fires that are late (the
// cluster was down or had no leader when they came).
const (
	CatchupNone   = "none"   // none: late ticks are skipped
	CatchupLatest = "latest" // only the latest late tick
	CatchupAll    = "all"    // every late tick within the catch-up window
)

// Schedule is one recurring schedule.
type Schedule struct {
	Name string
	// Template is the create every run makes (its ID, Now, idempotency
	// key and actor are the fire's).
	Template *CreateCommand
	// Cron is a cron expression (seconds optional) and Timezone its time
	// zone (an IANA name; "" is UTC); or Interval (seconds) fires at every
	// multiple of it since the Unix epoch. The state machine keeps them as
	// given: the service parses them.
	Cron     string
	Timezone string
	Interval int64
	// Overlap and Catchup are policies (OverlapSkip..., CatchupNone...);
	// CatchupWindow (seconds) bounds how late a tick CatchupAll fires.
	Overlap       string
	Catchup       string
	CatchupWindow int64
	Note          string

	Paused   bool
	PausedAt int64
	// Anchor: ticks at or before it are never fired (the schedule's
	// creation, or its last resume: the ticks of a pause are dropped).
	Anchor int64
	// LastTick is the latest tick fired or skipped (unix nanoseconds; 0:
	// none yet), LastFiredAt when the entry that fired it was stamped (a
	// trigger changes neither).
	LastTick    int64
	LastFiredAt int64
	// Runs counts the jobs the schedule made; Skipped the ticks it made
	// none for (overlap skip, catch-up none or latest, a failed create).
	Runs    int64
	Skipped int64
	// Recent holds the latest runs, oldest first, at most ScheduleRecent.
	Recent []ScheduleRun

	CreatedAt int64
	UpdatedAt int64
	Actor     string
	// Index is the Raft index of the entry that last changed the
	// schedule's definition or pause.
	Index uint64
}

// ScheduleRun is one job a schedule made (or tried to).
type ScheduleRun struct {
	// Tick is the tick's time (unix nanoseconds); for a trigger, when it
	// was asked.
	Tick    int64
	JobID   string
	Trigger bool
	// Error is why the job could not be created ("" when it was).
	Error string
}

// LastJob returns the id of the latest job the schedule made, or "".
func (s *Schedule) LastJob() string {
	for i := len(s.Recent) - 1; i >= 0; i-- {
		if s.Recent[i].JobID != "" {
			return s.Recent[i].JobID
		}
	}
	return ""
}

// ScheduleKeyPrefix starts the idempotency key of every job a schedule
// makes; a create may not use it.
const ScheduleKeyPrefix = "schedule:"

// ScheduleKey is the idempotency key of the job a schedule's tick makes;
// a trigger's key names the trigger's time.
func ScheduleKey(name string, tick int64, trigger bool) string {
	if trigger {
		return ScheduleKeyPrefix + name + ":trigger:" + strconv.FormatInt(tick, 10)
	}
	return ScheduleKeyPrefix + name + ":" + strconv.FormatInt(tick/1e9, 10)
}

// ScheduleSetCommand creates a schedule (a name in use is refused with
// ErrExists unless Replace, which keeps the runs so far).
type ScheduleSetCommand struct {
	Now      int64
	Schedule *Schedule
	Replace  bool
	Actor    Actor
}

// ScheduleDeleteCommand deletes a schedule (its jobs stay).
type ScheduleDeleteCommand struct {
	Now   int64
	Name  string
	Actor Actor
}

// SchedulePauseCommand pauses (Pause) or resumes a schedule.
type SchedulePauseCommand struct {
	Now   int64
	Name  string
	Pause bool
	Actor Actor
}

// ScheduleFireCommand makes a schedule's job. A tick fire (Trigger
// false) fires the tick Through, after the schedule's last one: it creates
// the tick's job (id ID; none when ID is empty: the tick is skipped) and
// sets the last tick to Through, passing over the ticks between (Dropped
// counts them, as the scheduler's catch-up policy chose). A fire whose
// Through is not after the last tick is refused (ErrStaleTick). A trigger
// (Trigger true) makes one job for the time Through and leaves the ticks
// alone. One entry makes at most one job: each job has an index of its
// own.
type ScheduleFireCommand struct {
	Now     int64
	Name    string
	Through int64
	ID      string
	Trigger bool
	Dropped int64
	// Actor is who asked for a trigger (none for a tick): its token is
	// named on the job's events.
	Actor Actor
}

// ErrStaleTick: a fire for ticks the schedule has already fired.
var ErrStaleTick = fmt.Errorf("tick already fired")

func init() {
	register(CmdScheduleSet, "schedule-set", func() command { return new(ScheduleSetCommand) })
	register(CmdScheduleDelete, "schedule-delete", func() command { return new(ScheduleDeleteCommand) })
	register(CmdScheduleFire, "schedule-fire", func() command { return new(ScheduleFireCommand) })
	register(CmdSchedulePause, "schedule-pause", func() command { return new(SchedulePauseCommand) })
	registerSnap(catalogRow(snapSchedule, "Schedules", 11, tSchedules, func(t *tables) *catalog[Schedule] { return t.schedules },
		func(s *Schedule) string { return s.Name },
		func(e *enc, s *Schedule) { panic("fsm: schedules are written in the tagged encoding only") },
		func(d *dec) *Schedule { d.fail("a schedule record below the tagged version"); return &Schedule{} }))
}

func (c *ScheduleSetCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	objPtr(f, 2, &c.Schedule)
	f.bool(3, &c.Replace)
	f.actor(4, &c.Actor)
}

func (c *ScheduleDeleteCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.actor(3, &c.Actor)
}

func (c *SchedulePauseCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.bool(3, &c.Pause)
	f.actor(4, &c.Actor)
}

func (c *ScheduleFireCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.i64(3, &c.Through)
	f.str(4, &c.ID)
	f.bool(5, &c.Trigger)
	f.i64(6, &c.Dropped)
	f.actor(7, &c.Actor)
}

func (s *Schedule) fields(f *fields) {
	f.str(1, &s.Name)
	objPtr(f, 2, &s.Template)
	f.str(3, &s.Cron)
	f.istr(4, &s.Timezone)
	f.i64(5, &s.Interval)
	f.istr(6, &s.Overlap)
	f.istr(7, &s.Catchup)
	f.i64(8, &s.CatchupWindow)
	f.str(9, &s.Note)
	f.bool(10, &s.Paused)
	f.i64(11, &s.PausedAt)
	f.i64(12, &s.Anchor)
	f.i64(13, &s.LastTick)
	f.i64(14, &s.LastFiredAt)
	f.i64(15, &s.Runs)
	f.i64(16, &s.Skipped)
	objs(f, 17, &s.Recent)
	f.i64(18, &s.CreatedAt)
	f.i64(19, &s.UpdatedAt)
	f.istr(20, &s.Actor)
	f.u64(21, &s.Index)
}

func (r *ScheduleRun) fields(f *fields) {
	f.i64(1, &r.Tick)
	f.str(2, &r.JobID)
	f.bool(3, &r.Trigger)
	f.str(4, &r.Error)
}

// schedulesAt refuses a schedule command below LevelPolicies.
func (a *applier) schedulesAt(op string) *Result {
	if a.t.level < LevelPolicies {
		return fail(fmt.Errorf("%s: %w: schedules need cluster level %d", op, ErrInvalid, LevelPolicies))
	}
	return nil
}

func validOverlap(s string) bool {
	return s == OverlapSkip || s == OverlapQueue || s == OverlapAllow
}

func validCatchup(s string) bool {
	return s == CatchupNone || s == CatchupLatest || s == CatchupAll
}

func (c *ScheduleSetCommand) apply(a *applier) *Result {
	if r := a.schedulesAt("schedule set"); r != nil {
		return r
	}
	if c.Schedule == nil {
		return fail(fmt.Errorf("schedule set: %w: no schedule", ErrInvalid))
	}
	in := *c.Schedule
	switch {
	case in.Name == "":
		return fail(fmt.Errorf("schedule set: %w: a name is required", ErrInvalid))
	case in.Template == nil || len(in.Template.Payload) == 0:
		return fail(fmt.Errorf("schedule set: %w: a job template with a payload is required", ErrInvalid))
	case (in.Cron == "") == (in.Interval == 0), in.Interval < 0:
		return fail(fmt.Errorf("schedule set: %w: a cron expression or a positive interval, not both", ErrInvalid))
	case !validOverlap(in.Overlap), !validCatchup(in.Catchup), in.CatchupWindow < 0:
		return fail(fmt.Errorf("schedule set: %w: unknown overlap or catch-up policy", ErrInvalid))
	}
	old := a.t.schedules.get(in.Name)
	switch {
	case old != nil && !c.Replace:
		return fail(fmt.Errorf("schedule %s: %w", in.Name, ErrExists))
	case old == nil && c.Replace:
		return fail(fmt.Errorf("schedule %s: %w", in.Name, ErrNotFound))
	case old == nil && a.t.schedules.len() >= MaxSchedules:
		return fail(fmt.Errorf("schedule set: %w: at most %d schedules", ErrInvalid, MaxSchedules))
	}
	s := in
	s.Template = new(CreateCommand)
	*s.Template = *in.Template
	s.Template.Now, s.Template.ID, s.Template.IdempotencyKey, s.Template.Actor = 0, "", "", Actor{}
	s.Paused, s.PausedAt = in.Paused, 0
	if s.Paused {
		s.PausedAt = c.Now
	}
	s.Anchor, s.LastTick, s.LastFiredAt, s.Runs, s.Skipped, s.Recent = c.Now, 0, 0, 0, 0, nil
	s.CreatedAt, s.UpdatedAt, s.Actor, s.Index = c.Now, c.Now, a.in.actor(c.Actor), a.index
	if old != nil {
		// A replaced definition keeps the record of what ran, and the ticks
		// fired: its ticks start after the later of the old last tick and
		// now.
		s.LastTick, s.LastFiredAt, s.Runs, s.Skipped, s.Recent = old.LastTick, old.LastFiredAt, old.Runs, old.Skipped, old.Recent
		s.CreatedAt = old.CreatedAt
	}
	putIn(a.writer, tSchedules, a.t.schedules, s.Name, &s)
	return &Result{Schedule: &s}
}

func (c *ScheduleDeleteCommand) apply(a *applier) *Result {
	if r := a.schedulesAt("schedule delete"); r != nil {
		return r
	}
	s := a.t.schedules.get(c.Name)
	if s == nil {
		return fail(fmt.Errorf("schedule %s: %w", c.Name, ErrNotFound))
	}
	deleteIn(a.writer, tSchedules, a.t.schedules, c.Name)
	return &Result{Schedule: s}
}

func (c *SchedulePauseCommand) apply(a *applier) *Result {
	if r := a.schedulesAt("schedule pause"); r != nil {
		return r
	}
	old := a.t.schedules.get(c.Name)
	if old == nil {
		return fail(fmt.Errorf("schedule %s: %w", c.Name, ErrNotFound))
	}
	if old.Paused == c.Pause {
		return &Result{Schedule: old} // idempotent
	}
	s := *old
	s.Paused, s.UpdatedAt, s.Index = c.Pause, c.Now, a.index
	if c.Pause {
		s.PausedAt = c.Now
	} else {
		// The ticks that came while it was paused are dropped: the next
		// tick is the first after the resume.
		s.PausedAt, s.Anchor = 0, max(old.Anchor, c.Now)
	}
	putIn(a.writer, tSchedules, a.t.schedules, s.Name, &s)
	return &Result{Schedule: &s}
}

func (c *ScheduleFireCommand) apply(a *applier) *Result {
	if r := a.schedulesAt("schedule fire"); r != nil {
		return r
	}
	old := a.t.schedules.get(c.Name)
	switch {
	case old == nil:
		return fail(fmt.Errorf("schedule %s: %w", c.Name, ErrNotFound))
	case c.Trigger && c.ID == "", c.Dropped < 0:
		return fail(fmt.Errorf("schedule fire: %w: a trigger makes a job", ErrInvalid))
	case !c.Trigger && (c.Through <= old.LastTick || c.Through <= old.Anchor):
		return fail(fmt.Errorf("schedule %s: tick %d: %w", c.Name, c.Through, ErrStaleTick))
	case !c.Trigger && old.Paused:
		return fail(fmt.Errorf("schedule %s: %w: paused", c.Name, ErrInvalid))
	}
	s := *old
	var made []*Job
	if c.ID != "" {
		run := ScheduleRun{Tick: c.Through, Trigger: c.Trigger}
		prev := a.t.job(s.LastJob())
		unfinished := prev != nil && !prev.State.Terminal()
		if !c.Trigger && s.Overlap == OverlapSkip && unfinished {
			s.Skipped++
		} else {
			cmd := *s.Template
			cmd.Now, cmd.ID, cmd.IdempotencyKey = c.Now, c.ID, ScheduleKey(s.Name, c.Through, c.Trigger)
			cmd.Actor, cmd.form = Actor{Role: "schedule", WorkerID: s.Name}, 0
			if s.Overlap == OverlapQueue && unfinished {
				cmd.DependsOn, cmd.RunOnDepFailure = []string{prev.ID}, true
			}
			a.schedule = s.Name
			res := cmd.apply(a)
			a.schedule = ""
			switch {
			case res.Err != nil:
				run.Error = res.Err.Error()
				s.Skipped++
			case res.Duplicate:
				// The tick's job exists (an earlier fire made it): it is the run.
				run.JobID = res.Job.ID
			default:
				run.JobID = res.Job.ID
				s.Runs++
				made = append(made, res.Job)
			}
			s.Recent = append(append(make([]ScheduleRun, 0, len(old.Recent)+1), old.Recent...), run)
			if n := len(s.Recent) - ScheduleRecent; n > 0 {
				s.Recent = s.Recent[n:]
			}
		}
	} else if !c.Trigger {
		s.Skipped++
	}
	if !c.Trigger {
		s.Skipped += c.Dropped
		s.LastTick, s.LastFiredAt = c.Through, c.Now
	}
	putIn(a.writer, tSchedules, a.t.schedules, s.Name, &s)
	res := &Result{Schedule: &s, Jobs: made}
	if len(made) == 1 {
		res.Job = made[0]
	}
	return res
}

// Schedule returns the schedule named name, or nil.
func (r *Reader) Schedule(name string) *Schedule {
	var s *Schedule
	r.point(func(t *tables) { s = t.schedules.get(name) })
	return s
}

// Schedules returns every schedule, by name.
func (r *Reader) Schedules() []*Schedule {
	t := r.view()
	out := make([]*Schedule, 0, t.schedules.len())
	t.schedules.ascend(func(s *Schedule) bool { out = append(out, s); return true })
	return out
}

// ScheduleCount is how many schedules there are.
func (r *Reader) ScheduleCount() int {
	var n int
	r.point(func(t *tables) { n = t.schedules.len() })
	return n
}
