package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// BenchmarkUITaskList renders a page of the web UI's task list with
// 100,000 jobs in the state: the first page, a page deep in the list
// (cursor), and a state filter. A page costs the same wherever it is.
func BenchmarkUITaskList(b *testing.B) {
	t := &testing.T{} // the test env's helpers take a *testing.T; nothing here fails it
	e := newEnv(t)
	head := fsm.Actor{Role: fsm.HeadRole}
	for i := range 100_000 {
		cmd := fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{Now: 1, ID: fmt.Sprintf("j%06d", i), Stream: []string{"a", "b"}[i%2],
			Payload: []byte(`{"n":1}`), Actor: head})
		if _, _, err := e.fc.Apply(context.Background(), cmd); err != nil {
			b.Fatal(err)
		}
	}
	ck := uiLogin(t, e, headTok)
	for _, q := range []string{"", "?after=80000", "?state=queued&stream=b&after=50000"} {
		b.Run("page"+q, func(b *testing.B) {
			for range b.N {
				if r := e.page("GET", "/ui/tasks"+q, ck, ""); r.Code != http.StatusOK {
					b.Fatalf("%d", r.Code)
				}
			}
		})
	}
}

// flatPages are the pages and routes whose cost must not grow with the
// number of queued jobs: the UI's dashboard, cluster and streams pages,
// the developer queue's status and streams, the dead letters, the system
// state and its agents, and a task claim that names no stream.
var flatPages = []struct{ name, path string }{
	{"dashboard", "/ui/"},
	{"cluster", "/ui/cluster"},
	{"ui-streams", "/ui/streams"},
	{"api-status", "/api/status"},
	{"api-streams", "/api/streams"},
	{"dlq", "/dlq"},
	{"v1-state", "/v1/state"},
	{"v1-agents", "/v1/agents"},
	{"claim-no-stream", "POST /api/claim"},
}

// flatEnv is a server whose state holds queued jobs and tasks, as many as
// queued in all (jobs in streams a and b, tasks in the developer queue's
// auth and web), four of them then running under two workers and two
// done; no dead letters.
func flatEnv(t *testing.T, queued int) (*env, *http.Cookie) {
	t.Helper()
	e := newEnv(t, func(c *envConfig) {
		c.Config.Logger = hclog.NewNullLogger()
		c.Queue.Logger = hclog.NewNullLogger()
	})
	must := func(r resp, want int) {
		t.Helper()
		if r.Code != want {
			t.Fatalf("setup: %d %s", r.Code, r.Body)
		}
	}
	must(e.do("PUT", "/api/registry", headTok, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}}), 200)
	must(e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "s"}), 201)
	for _, st := range []string{"auth", "web"} {
		must(e.do("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: st, Session: "s", Instructions: "do it"}), 201)
	}
	head := fsm.Actor{Role: fsm.HeadRole}
	now := testNow.UnixNano()
	for i := range queued {
		var cmd []byte
		if i%4 < 2 {
			cmd = fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{Now: now, ID: fmt.Sprintf("j%07d", i), Stream: []string{"a", "b"}[i%2],
				Payload: []byte(`{"n":1}`), Actor: head})
		} else {
			cmd = fsm.MustEncode(fsm.CmdTaskCreate, &fsm.TaskCreateCommand{Now: now, ID: fmt.Sprintf("t%07d", i), Stream: []string{"auth", "web"}[i%2],
				ToolName: "run-bash", Payload: []byte(`{"script_path":"x.sh"}`), Actor: head})
		}
		if _, _, err := e.fc.Apply(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	// Six claimed under two workers: four stay running, two are done.
	for i := range 6 {
		j, _, err := e.srv.queue.ClaimNext(context.Background(), queue.ClaimNextInput{Streams: []string{"a", "auth"},
			Actor: fsm.Actor{Role: fsm.HeadRole, WorkerID: fmt.Sprintf("w%d", i%2)}})
		if err != nil || j == nil {
			t.Fatalf("claim: %v %v", j, err)
		}
		if i >= 4 {
			_, _, err := e.srv.queue.Complete(context.Background(), queue.CompleteInput{Ref: fsm.LeaseRef{JobID: j.ID,
				AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}, Actor: fsm.Actor{Role: fsm.HeadRole, WorkerID: j.Lease.WorkerID},
				Result: []byte(`{"summary":"ok"}`)})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return e, uiLogin(t, e, headTok)
}

// flatPage answers one of flatPages.
func (e *env) flatPage(path string, ck *http.Cookie) resp {
	switch {
	case path == "POST /api/claim":
		return e.do("POST", "/api/claim", headTok, map[string]any{"worker_id": "w9"})
	case strings.HasPrefix(path, "/ui/"):
		return e.page("GET", path, ck, "")
	}
	return e.do("GET", path, headTok, nil)
}

// BenchmarkFlatPages answers each of flatPages with 1,000 to 300,000
// queued jobs (flatSizes): each costs the same at every size.
//
//	go test -run '^$' -bench FlatPages -benchtime 200x ./httpapi/
func BenchmarkFlatPages(b *testing.B) {
	for _, n := range flatSizes {
		t := &testing.T{} // the test env's helpers take a *testing.T; nothing here fails it
		e, ck := flatEnv(t, n)
		runtime.GC() // the build's garbage, not the pages'
		for _, p := range flatPages {
			b.Run(fmt.Sprintf("jobs=%d/%s", n, p.name), func(b *testing.B) {
				for range b.N {
					if r := e.flatPage(p.path, ck); r.Code >= 300 && r.Code != http.StatusBadRequest {
						b.Fatalf("%s: %d %s", p.path, r.Code, r.Body)
					}
				}
			})
		}
	}
}

var flatSizes = []int{1_000, 30_000, 100_000, 300_000}
