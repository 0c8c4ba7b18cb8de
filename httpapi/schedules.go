package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/queue"
)

// Recurring schedules (queue/schedules.go): head's alone, to create, read
// and change.

func (s *Server) scheduleRoutes() {
	s.route("GET", "/v1/schedules", kindRead, allowHead|allowGlobal, s.handleSchedules)
	s.route("POST", "/v1/schedules", kindWrite, allowHead|allowGlobal, s.handleScheduleCreate)
	s.route("GET", "/v1/schedules/{name}", kindRead, allowHead|allowGlobal, s.handleSchedule)
	s.route("PUT", "/v1/schedules/{name}", kindWrite, allowHead|allowGlobal, s.handleScheduleReplace)
	s.route("DELETE", "/v1/schedules/{name}", kindWrite, allowHead|allowGlobal, s.handleScheduleDelete)
	s.route("POST", "/v1/schedules/{name}/pause", kindWrite, allowHead|allowGlobal, s.handleSchedulePause)
	s.route("POST", "/v1/schedules/{name}/resume", kindWrite, allowHead|allowGlobal, s.handleScheduleResume)
	s.route("POST", "/v1/schedules/{name}/trigger", kindWrite, allowHead|allowGlobal, s.handleScheduleTrigger)
}

// scheduleInput is the service's input for a schedule request, as caller.
func scheduleInput(caller queue.Caller, req *api.ScheduleRequest) (queue.ScheduleInput, error) {
	in := queue.ScheduleInput{Name: req.Name, Cron: req.Cron, Timezone: req.Timezone, Overlap: req.Overlap, Catchup: req.Catchup,
		Paused: req.Paused, Note: req.Note, Actor: caller.Actor("")}
	const maxSeconds = 1 << 40 // far past every bound, short of overflowing a duration
	switch {
	case req.IntervalSeconds < 0 || req.IntervalSeconds > maxSeconds:
		return in, badRequest("intervalSeconds must be a whole number from %d to %d", int64(queue.MinScheduleInterval.Seconds()), int64(queue.MaxScheduleInterval.Seconds()))
	case req.CatchupWindowSeconds < 0 || req.CatchupWindowSeconds > maxSeconds:
		return in, badRequest("catchupWindowSeconds must be a whole number from 1 to %d", int64(queue.MaxCatchupWindow.Seconds()))
	}
	in.Interval = time.Duration(req.IntervalSeconds) * time.Second
	in.CatchupWindow = time.Duration(req.CatchupWindowSeconds) * time.Second
	if len(req.Job.Payload) == 0 {
		return in, badRequest("job is required: the job every run creates (the body of POST /jobs), with its payload")
	}
	job, err := createInput(caller, &req.Job)
	if err != nil {
		return in, err
	}
	in.Job = job
	return in, nil
}

// viewSchedule is a schedule as the API shows it.
func viewSchedule(v *queue.ScheduleView) api.Schedule {
	sc := v.Schedule
	out := api.Schedule{Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, IntervalSeconds: sc.Interval, Overlap: sc.Overlap,
		Catchup: sc.Catchup, CatchupWindowSeconds: sc.CatchupWindow, Note: sc.Note, Paused: sc.Paused, PausedAt: api.Time(sc.PausedAt),
		NextFireAt: api.Time(v.Next), LastFireAt: api.Time(sc.LastTick), LastFiredAt: api.Time(sc.LastFiredAt),
		Runs: sc.Runs, Skipped: sc.Skipped, Recent: make([]api.ScheduleRun, 0, len(sc.Recent)),
		CreatedAt: api.Time(sc.CreatedAt), UpdatedAt: api.Time(sc.UpdatedAt), CreatedBy: sc.Actor}
	if t := sc.Template; t != nil {
		j := api.JobCreateRequest{Payload: t.Payload, MaxAttempts: t.MaxAttempts, Target: t.Target, Stream: t.Stream,
			LeaseSeconds: int(t.LeaseSeconds), TaskClass: t.TaskClass, Priority: t.Priority, ConcurrencyKey: t.ConcurrencyKey,
			ConcurrencyLimit: t.ConcurrencyLimit, Requires: t.Requires}
		if t.BackoffBase > 0 || t.BackoffMax > 0 {
			j.Backoff = &api.Backoff{Base: t.BackoffBase, Max: t.BackoffMax}
		}
		if t.ResultSchema != "" {
			j.ResultSchema = json.RawMessage(t.ResultSchema)
		}
		j.RateLimit = viewRate(t.Rate)
		out.Job = j
	}
	for _, r := range sc.Recent {
		out.Recent = append(out.Recent, api.ScheduleRun{Tick: api.Time(r.Tick), JobID: r.JobID, Trigger: r.Trigger, Error: r.Error})
	}
	return out
}

func (s *Server) handleSchedules(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := s.queue.Schedules(c.caller.Actor(""))
	if err != nil {
		return err
	}
	out := api.ScheduleList{Schedules: make([]api.Schedule, 0, len(list))}
	for i := range list {
		out.Schedules = append(out.Schedules, viewSchedule(&list[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleSchedule(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := s.queue.Schedule(c.caller.Actor(""), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(v))
	return nil
}

func (s *Server) handleScheduleCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.setSchedule(w, r, c, "", http.StatusCreated)
}

func (s *Server) handleScheduleReplace(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.setSchedule(w, r, c, r.PathValue("name"), http.StatusOK)
}

// setSchedule creates a schedule (name "") or replaces the one named.
func (s *Server) setSchedule(w http.ResponseWriter, r *http.Request, c *call, name string, status int) error {
	var req api.ScheduleRequest
	if err := decodeRequired(c, &req, "a schedule: name, cron or intervalSeconds, and job"); err != nil {
		return err
	}
	if name != "" {
		if req.Name != "" && req.Name != name {
			return badRequest("the body's name %q differs from the path's %q", req.Name, name)
		}
		req.Name = name
	}
	in, err := scheduleInput(c.caller, &req)
	if err != nil {
		return err
	}
	in.Replace = name != ""
	v, idx, err := s.queue.CreateSchedule(r.Context(), in)
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, status, viewSchedule(v))
	return nil
}

func (s *Server) handleScheduleDelete(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	idx, err := s.queue.DeleteSchedule(r.Context(), r.PathValue("name"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleSchedulePause(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.pauseSchedule(w, r, c, true)
}

func (s *Server) handleScheduleResume(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.pauseSchedule(w, r, c, false)
}

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request, c *call, pause bool) error {
	if err := noFields(c); err != nil {
		return err
	}
	v, idx, err := s.queue.PauseSchedule(r.Context(), r.PathValue("name"), pause, c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(v))
	return nil
}

func (s *Server) handleScheduleTrigger(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	v, j, idx, err := s.queue.TriggerSchedule(r.Context(), r.PathValue("name"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, api.ScheduleTrigger{Job: *viewJob(j), Schedule: viewSchedule(v)})
	return nil
}
