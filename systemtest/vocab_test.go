package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// Issue #38, one vocabulary per API and the right words in each answer,
// as a user and an agent meet them on three spine processes: each step
// through a follower, as the CLI or a plain HTTP client sends it.
func TestEachAnswerSpeaksItsAPI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	_, fs := apiRoles(t, c)
	dir, leases := t.TempDir(), t.TempDir()
	yml := "project:\n  name: vocab\ntools:\n  run-bash:\n    task_class: FAST_SCRIPT\n"
	if err := os.WriteFile(filepath.Join(dir, "spine.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(token string, want int, args ...string) string {
		t.Helper()
		code, out, errOut := devCLI(t, c, dir, leases, token, args...)
		if code != want {
			t.Fatalf("spine %s: exit %d (want %d)\nstdout %s\nstderr %s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	run(apiHead, 0, "reload")
	run(apiHead, 0, "session", "create", "s1")
	run(apiHead, 0, "stream", "create", "auth", "--session=s1", "--instructions", "do it")

	t.Run("ClaimWithoutStreamOverHTTP", func(t *testing.T) {
		// The HTTP answer names the body's field; the CLI its flag.
		r := apiDo(t, "POST", fs[0].URL+"/api/claim", apiLeft, map[string]any{})
		apiWantError(t, r, http.StatusBadRequest, api.CodeStreamRequired)
		var eb apiErrorBody
		apiDecode(t, r, &eb)
		if !strings.HasPrefix(eb.Error.Message, "stream is required") || strings.Contains(eb.Error.Message, "--") {
			t.Fatalf("POST /api/claim {}: %s", r.Body)
		}
		if out := run(apiLeft, 2, "claim"); !strings.Contains(out, "--stream is required") {
			t.Fatalf("spine claim: %q", out)
		}
	})

	t.Run("RepeatedCompleteAnswersTheFirst", func(t *testing.T) {
		var tk api.Task
		if err := json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "run-bash", `{"n":1}`, "--stream=auth")), &tk); err != nil {
			t.Fatal(err)
		}
		run(apiLeft, 0, "claim", "--stream=auth")
		first := run(apiLeft, 0, "complete", tk.ID, "--result", `{"summary":"did it"}`)
		again := run(apiLeft, 0, "complete", tk.ID, "--result", `{"summary":"did it"}`)
		var a, b api.Task
		if json.Unmarshal([]byte(first), &a) != nil || json.Unmarshal([]byte(again), &b) != nil ||
			a.ID != tk.ID || a.Status != b.Status || a.Status != api.TaskSucceeded || a.FinishedAt != b.FinishedAt || string(a.Result) != string(b.Result) {
			t.Fatalf("the repeat answered otherwise:\n%s\n%s", first, again)
		}
		// Completed once: one completed event.
		var events api.JobEventList
		apiDecode(t, apiWant(t, apiDo(t, "GET", fs[1].URL+"/jobs/"+tk.ID+"/events?consistent", apiHead, nil), http.StatusOK), &events)
		n := 0
		for _, e := range events.Events {
			if e.Type == "completed" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d completed events: %s", n, apiDo(t, "GET", fs[1].URL+"/jobs/"+tk.ID+"/events", apiHead, nil).Body)
		}
	})

	t.Run("StreamStatsCountsCancelled", func(t *testing.T) {
		for range 2 {
			j := apiCreate(t, fs[0].URL, map[string]any{"stream": "gone"})
			apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+j.ID+"/cancel", apiHead, map[string]any{"reason": "not needed"}), http.StatusOK)
		}
		var row []string
		apiEventually(t, 10*time.Second, "the stream's cancelled jobs in spine stream stats", func() error {
			out := run(apiHead, 0, "stream", "stats", "gone", "-o", "table")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 {
				return fmt.Errorf("stream stats: %q", out)
			}
			head := strings.Fields(lines[0])
			row = strings.Fields(lines[1])
			for i, h := range head {
				if h == "CANCELLED" && i < len(row) && row[i] == "2" {
					return nil
				}
			}
			return fmt.Errorf("no cancelled column with 2:\n%s", out)
		})
	})

	t.Run("ClaimByIDOfAScheduledJob", func(t *testing.T) {
		j := apiCreate(t, fs[0].URL, map[string]any{"stream": "later", "delaySeconds": 3600})
		r := apiDo(t, "POST", fs[1].URL+"/jobs/"+j.ID+"/claim", apiLeft, map[string]any{})
		apiWantError(t, r, http.StatusConflict, api.CodeNotYetClaimable)
		var eb struct {
			Error struct {
				Message string  `json:"message"`
				Job     api.Job `json:"job"`
			} `json:"error"`
		}
		apiDecode(t, r, &eb)
		runAt := eb.Error.Job.RunAt
		if eb.Error.Job.ID != j.ID || runAt.IsZero() || !strings.Contains(eb.Error.Message, "scheduled") ||
			!strings.Contains(eb.Error.Message, runAt.Format(time.RFC3339Nano)) || time.Until(runAt) < 50*time.Minute {
			t.Fatalf("claim by id of a scheduled job: %s", r.Body)
		}
	})

	t.Run("NextAnswersTheTaskView", func(t *testing.T) {
		j := apiCreate(t, fs[0].URL, map[string]any{"stream": "nx"})
		r := apiWant(t, apiDo(t, "GET", fs[0].URL+"/v1/tasks/next?consistent&agent_id=w-1&streams=nx", apiLeft, nil), http.StatusOK)
		var next api.ControlTask
		apiDecode(t, r, &next)
		if next.ID != j.ID || next.State != api.StateQueued || next.MaxAttempts == 0 || strings.Contains(string(r.Body), `"maxAttempts"`) {
			t.Fatalf("GET /v1/tasks/next: %s", r.Body)
		}
	})
}

// A worker's lease that its gateway's death ended is reaped naming the
// gateway, on three processes: the gateway's heartbeats stop (its process
// is killed) while the worker keeps heartbeating and stays healthy; the
// job's reaped event reads "gateway G of worker W declared dead".
func TestGatewayDeathIsNamedInTheReap(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"SPINE_HEALTH_SUSPECT_AFTER": "1s", "SPINE_HEALTH_DEAD_AFTER": "2s"})
	_, fs := apiRoles(t, c)
	base := fs[0].URL
	apiEventually(t, 30*time.Second, "the cluster at the delivery level", func() error {
		var st api.ClusterStatus
		apiDecode(t, apiDo(t, "GET", base+"/cluster/status", apiHead, nil), &st)
		if st.Level < 2 {
			return fmt.Errorf("level %d", st.Level)
		}
		return nil
	})
	g, w, stream := wName("vgw"), wName("vw"), wName("vstream")
	apiWant(t, apiDo(t, "POST", base+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: g, Address: "http://10.3.3.3:7000", Capacity: 4}), 201)
	apiWant(t, apiDo(t, "POST", base+"/v1/workers", apiLeft, api.WorkerRegisterRequest{ID: w, Gateway: g, Capacity: 1}), 201)
	env := append(os.Environ(), "SPINE_ADDRS="+strings.Join(c.URLs(), ","), "SPINE_TOKEN="+apiHead)
	beat := func(kind, id string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", `while true; do "$0" "$1" heartbeat "$2" > /dev/null 2>&1; sleep 0.3; done`, binary, kind, id)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _, _ = cmd.Process.Wait() })
		return cmd
	}
	gwProc := beat("gateway", g)
	beat("worker", w)
	job := wCreate(t, base, stream, map[string]int{"n": 1}, nil)
	if a := wMustClaim(t, fs[1].URL, apiLeft, w, []string{stream}); a.JobID != job.ID {
		t.Fatalf("claimed %s, want %s", a.JobID, job.ID)
	}
	_ = syscall.Kill(-gwProc.Process.Pid, syscall.SIGKILL)
	want := "gateway " + g + " of worker " + w + " declared dead"
	apiEventually(t, 30*time.Second, "the job reaped, naming the gateway", func() error {
		var ev struct {
			Events []wEvent `json:"events"`
		}
		apiDecode(t, apiDo(t, "GET", fs[1].URL+"/jobs/"+job.ID+"/events", apiHead, nil), &ev)
		for _, e := range ev.Events {
			if e.Type == "reaped" {
				if e.Text != want {
					t.Fatalf("reaped: %q, want %q", e.Text, want)
				}
				return nil
			}
		}
		return fmt.Errorf("not reaped yet")
	})
	var wk api.Worker
	apiDecode(t, apiDo(t, "GET", fs[1].URL+"/v1/workers/"+w+"?consistent", apiHead, nil), &wk)
	if wk.Health != api.HealthHealthy {
		t.Fatalf("the worker, whose gateway died, is %s", wk.Health)
	}
}
