package fsm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The developer queue (seed 004) over the job model: sessions group
// streams, a stream is a FIFO lane with instructions, and a task is a job
// with a tool, a task class and a timeout. Sessions and streams are small
// catalogs; the registry (tools, task classes, the script index, purge
// settings) is one object replaced whole.

// Catalog statuses of sessions and streams.
const (
	StatusActive = "active"
	StatusEnded  = "ended"
)

// Session is a bounded period of work that groups streams.
type Session struct {
	ID          string
	Name        string
	Description string
	Status      string
	StartedAt   int64
	EndedAt     int64
	UpdatedAt   int64
	CreateIndex uint64
}

// Stream is a named FIFO lane of a session, with instructions every claim
// hands the worker. Its name is the Stream of the jobs in it: the same
// lane as a v0 job's stream and a worker-contract claim's streams.
type Stream struct {
	ID           string
	Name         string
	Session      string // the session's name
	Instructions string
	Status       string
	CreatedAt    int64
	EndedAt      int64
	UpdatedAt    int64
	CreateIndex  uint64
}

// Ended reports whether s takes no new jobs and hands out none.
func (s *Stream) Ended() bool { return s != nil && s.Status == StatusEnded }

// TaskClass names a default timeout.
type TaskClass struct {
	Name    string
	Timeout int64 // seconds
}

// DefaultTaskClasses are the seed's classes and timeouts, in force until a
// registry names others.
var DefaultTaskClasses = []TaskClass{
	{Name: "FAST_SCRIPT", Timeout: 30},
	{Name: "LLM_HEAVY", Timeout: 900},
	{Name: "LLM_LITE", Timeout: 300},
	{Name: "MEDIUM_SCRIPT", Timeout: 300},
}

// Tool is a registered tool a task runs.
type Tool struct {
	Name        string
	Description string
	TaskClass   string
	Timeout     int64 // seconds; 0: the class's
}

// Script is one entry of the script index: a script under a script dir
// and the metadata of its top comment block.
type Script struct {
	Path        string
	Name        string
	Description string
	Inputs      string
	Outputs     string
	Tags        []string
}

// Project describes the project the queue serves (spine.yml).
type Project struct {
	Name     string
	RepoPath string
	PRDPath  string
}

// Registry is the tool registry and project configuration in force, as
// the last reload proposed it. Its lists are sorted by name (path for
// scripts) and hold no duplicates.
type Registry struct {
	Project    Project
	Classes    []TaskClass
	Tools      []Tool
	ScriptDirs []string
	Scripts    []Script
	// PurgeDays is the retention of finished tasks in days (0: the default).
	PurgeDays int
	UpdatedAt int64
}

// DefaultPurgeDays is the retention of finished tasks without a registry.
const DefaultPurgeDays = 3

// MaxPurgeDays is the longest retention of finished tasks, ten years. A
// reload asking for more is refused before it is proposed; a registry that
// holds more (written before the bound existed) is read as MaxPurgeDays.
const MaxPurgeDays = 3650

// Tool returns the registered tool name, or nil.
func (r *Registry) Tool(name string) *Tool {
	if r == nil {
		return nil
	}
	i := sort.Search(len(r.Tools), func(i int) bool { return r.Tools[i].Name >= name })
	if i < len(r.Tools) && r.Tools[i].Name == name {
		return &r.Tools[i]
	}
	return nil
}

// ClassTimeout returns the timeout of task class name, and whether it is
// known.
func (r *Registry) ClassTimeout(name string) (int64, bool) {
	classes := DefaultTaskClasses
	if r != nil && len(r.Classes) > 0 {
		classes = r.Classes
	}
	for _, c := range classes {
		if c.Name == name {
			return c.Timeout, true
		}
	}
	return 0, false
}

// Retention returns the retention of finished tasks in days, at most
// MaxPurgeDays.
func (r *Registry) Retention() int {
	if r == nil || r.PurgeDays <= 0 {
		return DefaultPurgeDays
	}
	return min(r.PurgeDays, MaxPurgeDays)
}

// nanosPerDay is a day in nanoseconds.
const nanosPerDay = 24 * 3600 * 1_000_000_000

// RetentionNanos is Retention in nanoseconds. It never overflows: a stored
// retention of a million days, multiplied out, would wrap into a cut-off in
// the future, and a purge would delete tasks that had just finished.
func (r *Registry) RetentionNanos() int64 {
	return int64(r.Retention()) * nanosPerDay
}

// toolNames lists the registered tools, for an error message.
func (r *Registry) toolNames() string {
	if r == nil || len(r.Tools) == 0 {
		return "none are registered (load spine.yml with spine reload)"
	}
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return "known tools: " + strings.Join(names, ", ")
}

// check validates a registry a reload proposes.
func (r *Registry) check() error {
	for i, c := range r.Classes {
		if c.Name == "" || c.Timeout <= 0 {
			return fmt.Errorf("task class %q: a name and a positive timeout are required", c.Name)
		}
		if i > 0 && r.Classes[i-1].Name >= c.Name {
			return fmt.Errorf("task classes must be sorted and unique (%q)", c.Name)
		}
	}
	for i, t := range r.Tools {
		if t.Name == "" {
			return fmt.Errorf("a tool has no name")
		}
		if i > 0 && r.Tools[i-1].Name >= t.Name {
			return fmt.Errorf("tools must be sorted and unique (%q)", t.Name)
		}
		if _, ok := r.ClassTimeout(t.TaskClass); !ok {
			return fmt.Errorf("tool %q: unknown task class %q", t.Name, t.TaskClass)
		}
		if t.Timeout < 0 {
			return fmt.Errorf("tool %q: timeout must not be negative", t.Name)
		}
	}
	for i, s := range r.Scripts {
		if i > 0 && r.Scripts[i-1].Path >= s.Path {
			return fmt.Errorf("scripts must be sorted and unique (%q)", s.Path)
		}
	}
	if r.PurgeDays < 0 {
		return fmt.Errorf("purge days must not be negative")
	}
	return nil
}

// IsTask reports whether j is a developer-queue task.
func (j *Job) IsTask() bool { return j.Extra().Timeout > 0 }

// AutoFailCode is the error code of a task the reaper failed at twice its
// timeout.
const AutoFailCode = "auto_failed"

// autoFailMessage is seed 004's message for a task auto-failed at twice its
// timeout.
func autoFailMessage(timeout int64) string {
	return fmt.Sprintf("Auto-failed: task exceeded 2x timeout (%ds) with no complete/fail reported. Likely worker crash or disconnect.", timeout)
}

// hasSummary reports whether a task result is a JSON object with a string
// "summary".
func hasSummary(result []byte) bool {
	var r struct {
		Summary *string `json:"summary"`
	}
	if json.Unmarshal(result, &r) != nil || r.Summary == nil {
		return false
	}
	return true
}

func (t *tables) session(name string) *Session { return t.sessions.get(name) }
func (t *tables) stream(name string) *Stream   { return t.streams.get(name) }

// devq reports whether the state holds anything of the developer queue (a
// snapshot of it needs version 3).
func (t *tables) devq() bool {
	return t.sessions.len() > 0 || t.streams.len() > 0 || t.registry != nil || t.taskEnded.Len() > 0
}

func (w *writer) putSession(s *Session)   { putIn(w, tSessions, w.t.sessions, s.Name, s) }
func (w *writer) putStream(s *Stream)     { putIn(w, tStreams, w.t.streams, s.Name, s) }
func (w *writer) putRegistry(r *Registry) { w.t.registry = r }

// taskEndedEntry keys a finished task by finish time (task retention).
func taskEndedEntry(j *Job) (timeItem, bool) {
	return timeItem{j.FinishedAt, j.CreateIndex, j}, j.IsTask() && j.State.Terminal()
}
