package httpapi

import (
	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// Views.

func viewSession(ses *fsm.Session, streams []*fsm.Stream) *api.Session {
	v := &api.Session{ID: ses.ID, Name: ses.Name, Description: ses.Description, Status: ses.Status,
		StartedAt: api.Time(ses.StartedAt), EndedAt: api.Time(ses.EndedAt), UpdatedAt: api.Time(ses.UpdatedAt), Streams: []string{}}
	for _, st := range streams {
		if st.Session == ses.Name {
			v.Streams = append(v.Streams, st.Name)
		}
	}
	return v
}

func viewStream(st *fsm.Stream, counts map[string][2]int) *api.Stream {
	c := counts[st.Name]
	return &api.Stream{ID: st.ID, Name: st.Name, Session: st.Session, Instructions: st.Instructions, Status: st.Status,
		CreatedAt: api.Time(st.CreatedAt), EndedAt: api.Time(st.EndedAt), UpdatedAt: api.Time(st.UpdatedAt),
		Queued: c[0], Running: c[1]}
}

// viewTask is a task as the developer queue shows it; st, when given,
// adds its stream's id and instructions.
func viewTask(j *fsm.Job, st *fsm.Stream, now int64) *api.Task {
	v := &api.Task{ID: j.ID, Stream: api.TaskStream{Name: j.Stream}, ToolName: j.Extra().ToolName, TaskClass: j.Extra().TaskClass,
		Payload: j.Payload, Status: api.TaskStatus(api.JobStatus(j.State)), Timeout: j.Extra().Timeout, Attempts: int(j.Attempts),
		Result: j.Result, Stdout: j.Extra().Stdout, Stderr: j.Extra().Stderr, Stale: queue.Stale(j, now), ClonedFrom: j.Extra().ClonedFrom,
		CreatedAt: api.Time(j.CreatedAt), UpdatedAt: api.Time(j.UpdatedAt), StartedAt: api.Time(j.StartedAt),
		FinishedAt: api.Time(j.FinishedAt)}
	if st != nil {
		v.Stream.ID, v.Stream.Instructions = st.ID, st.Instructions
	}
	if j.Error != nil {
		v.Error, v.AutoFailed = j.Error.Message, j.Error.Code == fsm.AutoFailCode
	}
	if l := j.Lease; l != nil {
		v.ClaimedBy, v.WorkerID, v.AttemptID, v.LeaseExpiresAt = l.Owner, l.WorkerID, l.AttemptID, api.Time(l.ExpiresAt)
	}
	return v
}

func viewRegistry(r *fsm.Registry) api.Registry {
	out := api.Registry{TaskClasses: []api.TaskClass{}, Tools: []api.Tool{}, ScriptDirs: []string{}, Scripts: []api.Script{},
		PurgeOlderThanDays: r.Retention()}
	classes := fsm.DefaultTaskClasses
	if r != nil {
		out.Project = api.Project{Name: r.Project.Name, RepoPath: r.Project.RepoPath, PRDPath: r.Project.PRDPath}
		out.UpdatedAt = api.Time(r.UpdatedAt)
		out.ScriptDirs = append(out.ScriptDirs, r.ScriptDirs...)
		if len(r.Classes) > 0 {
			classes = r.Classes
		}
		for _, t := range r.Tools {
			eff := t.Timeout
			if eff == 0 {
				eff, _ = r.ClassTimeout(t.TaskClass)
			}
			out.Tools = append(out.Tools, api.Tool{Name: t.Name, Description: t.Description, TaskClass: t.TaskClass,
				Timeout: t.Timeout, EffectiveTimeout: eff})
		}
		for _, sc := range r.Scripts {
			out.Scripts = append(out.Scripts, api.Script{Path: sc.Path, Name: sc.Name, Description: sc.Description,
				Inputs: sc.Inputs, Outputs: sc.Outputs, Tags: sc.Tags})
		}
	}
	for _, c := range classes {
		out.TaskClasses = append(out.TaskClasses, api.TaskClass{Name: c.Name, Timeout: c.Timeout})
	}
	return out
}
