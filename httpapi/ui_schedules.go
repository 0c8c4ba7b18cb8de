package httpapi

import (
	"net/http"

	"github.com/spine-queue/spine/queue"
)

// The schedules page of the web UI: head's, as the API's schedule routes
// are. It lists each schedule with its next and last fire and the jobs of
// its latest runs, with pause, resume, run now and delete.

func (s *Server) uiScheduleRoutes() {
	s.uiRoute("GET /ui/schedules", kindRead, allowHead|allowGlobal, s.uiSchedules)
	s.uiRoute("POST /ui/schedules/{name}/pause", kindWrite, allowHead|allowGlobal, s.uiSchedulePause(true))
	s.uiRoute("POST /ui/schedules/{name}/resume", kindWrite, allowHead|allowGlobal, s.uiSchedulePause(false))
	s.uiRoute("POST /ui/schedules/{name}/trigger", kindWrite, allowHead|allowGlobal, s.uiScheduleTrigger)
	s.uiRoute("POST /ui/schedules/{name}/delete", kindWrite, allowHead|allowGlobal, s.uiScheduleDelete)
}

type schedulesData struct {
	Schedules []queue.ScheduleView
}

func (s *Server) uiSchedules(w http.ResponseWriter, r *http.Request, u *uiView) error {
	list, err := s.queue.Schedules(u.caller.Actor(""))
	if err != nil {
		return err
	}
	u.Title, u.Nav, u.Data, u.Refresh = "Schedules", "schedules", &schedulesData{Schedules: list}, 5000
	return s.render(w, http.StatusOK, "schedules", u)
}

func (s *Server) uiSchedulePause(pause bool) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, u *uiView) error {
		if _, _, err := s.queue.PauseSchedule(r.Context(), r.PathValue("name"), pause, u.caller.Actor("")); err != nil {
			return err
		}
		http.Redirect(w, r, "/ui/schedules", http.StatusSeeOther)
		return nil
	}
}

func (s *Server) uiScheduleTrigger(w http.ResponseWriter, r *http.Request, u *uiView) error {
	if _, _, _, err := s.queue.TriggerSchedule(r.Context(), r.PathValue("name"), u.caller.Actor("")); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/schedules", http.StatusSeeOther)
	return nil
}

func (s *Server) uiScheduleDelete(w http.ResponseWriter, r *http.Request, u *uiView) error {
	if _, err := s.queue.DeleteSchedule(r.Context(), r.PathValue("name"), u.caller.Actor("")); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/schedules", http.StatusSeeOther)
	return nil
}
