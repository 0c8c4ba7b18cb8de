package systemtest

// SKILL.md is what an agent reads to work the queue (GET /skill.md). These
// tests follow it literally: they take its worker script and its curl lines
// out of the file in the repository, not a copy, and run them against a real
// three-process cluster. Helpers are prefixed with skill.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// skillDoc is SKILL.md as the repository has it.
func skillDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// skillTool finds a program the test runs. Without it the test is skipped,
// except under CI=true or SPINE_REQUIRE_AGENT_TOOLS=1 (.ci/run), where
// every test must run.
func skillTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("SPINE_REQUIRE_AGENT_TOOLS") == "1" {
			t.Fatalf("no %s on PATH, and CI runs every test", name)
		}
		t.Skipf("SKILL.md test skipped: it runs %s, which is not on PATH", name)
	}
	return p
}

// skillServed is GET /skill.md of the node at base.
func skillServed(t *testing.T, base string) string {
	t.Helper()
	return string(apiWant(t, apiDo(t, "GET", base+"/skill.md", "", nil), http.StatusOK).Body)
}

// skillFor is md as the node at base serves it: {{node_url}} is that
// node's URL, {{node_urls}} every node's (GET /cluster/nodes), its own
// first.
func skillFor(t *testing.T, md, base string) string {
	t.Helper()
	var nodes api.ClusterNodes
	apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/cluster/nodes", apiHead, nil), http.StatusOK), &nodes)
	all := []string{base}
	for _, n := range nodes.Nodes {
		if n.HTTPAddr != base {
			all = append(all, n.HTTPAddr)
		}
	}
	return strings.NewReplacer("{{node_urls}}", strings.Join(all, ","), "{{node_url}}", base).Replace(md)
}

// skillScript is the body of the fenced python block whose first line is
// "# spine-worker.py".
func skillScript(t *testing.T, md string) string {
	t.Helper()
	const open = "```python\n# spine-worker.py"
	i := strings.Index(md, open)
	if i < 0 {
		t.Fatalf("SKILL.md has no block opening %q", open)
	}
	body := md[i+len("```python\n"):]
	j := strings.Index(body, "\n```\n")
	if j < 0 {
		t.Fatal("SKILL.md: the spine-worker.py block is not closed")
	}
	if strings.Count(md, open) != 1 {
		t.Fatal("SKILL.md has more than one spine-worker.py block")
	}
	return body[:j+1]
}

// skillShell is the shell of SKILL.md's sh blocks: the get and post helper
// functions, and every command line that uses them, keyed by its first two
// words ("post /internal/worker/claim", "post /jobs/$JOB/fail").
type skillShell struct {
	helpers string
	lines   map[string]string
}

func skillCurl(t *testing.T, md string) skillShell {
	t.Helper()
	sh := skillShell{lines: map[string]string{}}
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case line == "```sh":
			in = true
		case line == "```":
			in = false
		case !in:
		case strings.HasPrefix(line, "get()") || strings.HasPrefix(line, "post()"):
			sh.helpers += line + "\n"
		case strings.HasPrefix(line, "get ") || strings.HasPrefix(line, "post "):
			f := strings.Fields(line)
			key := f[0] + " " + f[1]
			if _, dup := sh.lines[key]; dup {
				t.Fatalf("SKILL.md shows %q twice", key)
			}
			sh.lines[key] = line
		}
	}
	if !strings.Contains(sh.helpers, "get()") || !strings.Contains(sh.helpers, "post()") {
		t.Fatalf("SKILL.md defines no get() and post() helpers: %q", sh.helpers)
	}
	return sh
}

// skillEnv is the environment of a process the test starts: the test's own,
// without any SPINE_* variable a developer's shell may have set, plus vars.
func skillEnv(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPINE_") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// skillBuf collects a process's output; the process writes while the test
// may read.
type skillBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *skillBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *skillBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// skillWorker is one running copy of the script.
type skillWorker struct {
	id   string
	out  skillBuf
	done chan struct{}
	err  error // set before done is closed
}

func skillStartWorker(t *testing.T, ctx context.Context, python, script, id string, vars map[string]string) *skillWorker {
	t.Helper()
	w := &skillWorker{id: id, done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, python, script)
	cmd.Env = skillEnv(vars)
	cmd.Stdout, cmd.Stderr = &w.out, &w.out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker %s said:\n%s", id, w.out.String())
		}
	})
	return w
}

// skillWork is the work command the tests give the script: it does a job by
// its payload's kind, and answers with the exit codes SKILL.md documents.
const skillWork = `import json, os, sys, time
job = json.load(sys.stdin)
kind, parent = job.get("kind"), os.getppid()
if kind == "gpu":
    if "gpu" not in os.environ.get("SPINE_CAPABILITIES", "").split(","):
        print("this claw has no GPU", file=sys.stderr)
        sys.exit(69)
    print(json.dumps({"summary": "rendered on a GPU", "worker": os.environ["SPINE_WORKER_ID"]}))
elif kind == "impossible":
    print(json.dumps({"code": "impossible", "message": "asks for a square circle"}))
    sys.exit(65)
elif kind == "flaky":
    if os.environ["SPINE_JOB_ATTEMPT"] == "1":
        print("upstream timed out", file=sys.stderr)
        sys.exit(75)
    print(json.dumps({"summary": "worked on the second try"}))
elif kind == "sleep":
    end = time.monotonic() + job["seconds"]
    while time.monotonic() < end:
        time.sleep(0.1)
        if os.getppid() != parent:  # the worker is gone: so is the job
            sys.exit(1)
    print(json.dumps({"summary": "slept %ds" % job["seconds"], "seconds": job["seconds"]}))
else:
    print(json.dumps({"summary": "doubled %d" % job["n"], "n": job["n"], "doubled": 2 * job["n"]}))
`

// skillGet reads a job through any running node (head), nil on a transport
// error or a node without a leader.
func skillGet(c *testcluster.Cluster, id string) (*api.Job, error) {
	var last error
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		r, err := apiRequest("GET", n.URL+"/jobs/"+id, apiHead, nil)
		if err != nil {
			last = err
			continue
		}
		if r.Status != http.StatusOK {
			last = errors.New(r.String())
			continue
		}
		var j api.Job
		if err := json.Unmarshal(r.Body, &j); err != nil {
			return nil, err
		}
		return &j, nil
	}
	return nil, last
}

func skillAttempts(t *testing.T, base, id string) []*api.JobAttempt {
	t.Helper()
	var l api.JobAttemptList
	apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/jobs/"+id+"/attempts", apiHead, nil), http.StatusOK), &l)
	return l.Attempts
}

// The loop of SKILL.md, run as its script says, by two claws, one with a GPU
// and one without, each told only the leader's URL: ordinary jobs are done
// with their results; a job that requires a GPU is only ever handed to the
// claw that has one; a job nobody can do ends failed, not retried; a flaky
// job is retried once and done; a job that runs 8 s under a 3 s lease is
// done in one attempt, kept by heartbeats while the leader is killed; a job
// head cancels stops at once; and jobs created after the kill, one targeted
// at each claw, are done, so both claws moved to another node on their own
// (learnt from GET /cluster/nodes). Both exit cleanly once idle.
func TestSkillWorkerScript(t *testing.T) {
	t.Parallel()
	python := skillTool(t, "python3")
	md := skillDoc(t)
	dir := t.TempDir()
	script, work := filepath.Join(dir, "spine-worker.py"), filepath.Join(dir, "work.py")
	if err := os.WriteFile(script, []byte(skillScript(t, md)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(work, []byte(skillWork), 0o644); err != nil {
		t.Fatal(err)
	}
	// A 5 s lease: a claim whose answer dies with the leader holds its job
	// only seconds (the script heartbeats, whatever the lease).
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "5", "REAPER_INTERVAL_MS": "200"})
	leader, fs := apiRoles(t, c)

	// The file every node serves is the file read here, with its own
	// addresses.
	if served := skillServed(t, fs[0].URL); served != skillFor(t, md, fs[0].URL) {
		t.Fatal("GET /skill.md is not the repository's SKILL.md with the node's addresses")
	}

	const stream = "skill"
	create := func(base string, payload map[string]any, extra map[string]any) string {
		t.Helper()
		body := map[string]any{"payload": payload, "stream": stream}
		for k, v := range extra {
			body[k] = v
		}
		return apiCreate(t, base, body).ID
	}
	long := create(leader.URL, map[string]any{"kind": "sleep", "seconds": 8}, map[string]any{"leaseSeconds": 3})
	cancelled := create(leader.URL, map[string]any{"kind": "sleep", "seconds": 120}, map[string]any{"leaseSeconds": 3})
	gpu := create(leader.URL, map[string]any{"kind": "gpu"}, map[string]any{"requires": []string{"gpu"}})
	impossible := create(leader.URL, map[string]any{"kind": "impossible"}, nil)
	flaky := create(leader.URL, map[string]any{"kind": "flaky"}, map[string]any{"maxAttempts": 3})
	var plain []string
	for n := 1; n <= 4; n++ {
		plain = append(plain, create(leader.URL, map[string]any{"kind": "double", "n": n}, nil))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	workers := map[string]*skillWorker{}
	for _, w := range []struct{ id, token, caps string }{
		{"claw-plain", apiLeft, "lang:python"},
		{"claw-gpu", apiRight, "gpu,lang:python"},
	} {
		workers[w.id] = skillStartWorker(t, ctx, python, script, w.id, map[string]string{
			"SPINE_URLS": leader.URL, "SPINE_TOKEN": w.token, "SPINE_WORKER_ID": w.id, "SPINE_STREAMS": stream,
			"SPINE_CAPABILITIES": w.caps, "SPINE_WORK_CMD": python + " " + work,
			"SPINE_IDLE_EXIT": "30",
		})
	}

	// Head cancels a job while a claw works on it.
	apiEventually(t, 60*time.Second, "the job to cancel to run", func() error {
		if j := apiGetJob(t, leader.URL, apiHead, cancelled, ""); j.Status != "running" {
			return fmt.Errorf("status %s", j.Status)
		}
		return nil
	})
	apiPost(t, leader.URL, "/jobs/"+cancelled+"/cancel", apiHead, map[string]string{"reason": "not needed any more"}, http.StatusOK)

	// The leader dies while the long job runs and its claw heartbeats.
	apiEventually(t, 60*time.Second, "the long job to run and heartbeat", func() error {
		if j := apiGetJob(t, leader.URL, apiHead, long, ""); j.Status != "running" {
			return fmt.Errorf("status %s", j.Status)
		}
		for _, e := range apiEvents(t, leader.URL, apiHead, long) {
			if e.Type == "heartbeat" {
				return nil
			}
		}
		return errors.New("no heartbeat yet")
	})
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	next, _ := apiRoles(t, c)
	targeted := map[string]string{}
	for id := range workers {
		targeted[id] = create(next.URL, map[string]any{"kind": "double", "n": 10}, map[string]any{"target": id})
	}

	want := map[string]string{long: "done", cancelled: "cancelled", gpu: "done", impossible: "failed", flaky: "done"}
	for _, id := range plain {
		want[id] = "done"
	}
	for _, id := range targeted {
		want[id] = "done"
	}
	final := map[string]*api.Job{}
	apiEventually(t, 150*time.Second, "every job to end", func() error {
		for id := range want {
			if final[id] != nil {
				continue
			}
			j, err := skillGet(c, id)
			if err != nil {
				return err
			}
			switch j.Status {
			case api.JobStatusQueued, api.JobStatusRunning:
				return fmt.Errorf("job %s (%s) is %s", id, j.Payload, j.Status)
			}
			final[id] = j
		}
		return nil
	})
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	for id, status := range want {
		if got := string(final[id].Status); got != status {
			t.Errorf("job %s (%s) ended %s, want %s: %+v", id, final[id].Payload, got, status, final[id])
		}
	}

	// Each result is what the work command printed.
	type result struct {
		Summary string `json:"summary"`
		N       int    `json:"n"`
		Doubled int    `json:"doubled"`
		Seconds int    `json:"seconds"`
		Worker  string `json:"worker"`
	}
	resultOf := func(id string) result {
		t.Helper()
		var r result
		if err := json.Unmarshal(final[id].Result, &r); err != nil || r.Summary == "" {
			t.Errorf("job %s: result %s is not {\"summary\": …, …}: %v", id, final[id].Result, err)
		}
		return r
	}
	for i, id := range plain {
		if r := resultOf(id); r.N != i+1 || r.Doubled != 2*(i+1) {
			t.Errorf("job %s: result %+v", id, r)
		}
	}
	for worker, id := range targeted {
		a := skillAttempts(t, next.URL, id)
		if len(a) == 0 || a[len(a)-1].WorkerID != worker || a[len(a)-1].Outcome != "completed" {
			t.Errorf("job targeted at %s, created after the node both claws were given was killed: attempts %s", worker, skillAttemptsString(a))
		}
	}

	// The long job: one attempt, longer than its lease, held by heartbeats
	// across the leader's death.
	if r := resultOf(long); r.Seconds != 8 {
		t.Errorf("long job: result %+v", r)
	}
	if a := skillAttempts(t, next.URL, long); len(a) != 1 || a[0].Outcome != "completed" || a[0].EndedAt.Sub(a[0].StartedAt) < 8*time.Second {
		t.Errorf("long job: want one completed attempt of 8 s or more under a 3 s lease, got %s", skillAttemptsString(a))
	}

	// failures are the attempts of a job that its claw failed. (Attempts
	// whose lease ran out are not counted: a claim answered just as the
	// leader died may leave one.)
	failures := func(a []*api.JobAttempt) []*api.JobAttempt {
		var out []*api.JobAttempt
		for _, x := range a {
			if x.Outcome == "failed" {
				out = append(out, x)
			}
		}
		return out
	}

	// The impossible job: failed once, not retried, with the work
	// command's code and message.
	if e := final[impossible].Error; e == nil || e.Code != "impossible" || e.Message != "asks for a square circle" || e.Retryable {
		t.Errorf("impossible job: error %+v", e)
	}
	if a := skillAttempts(t, next.URL, impossible); len(failures(a)) != 1 || a[len(a)-1].Outcome != "failed" {
		t.Errorf("impossible job: want one failed attempt, the last, got %s", skillAttemptsString(a))
	}

	// The flaky job: one retryable failure, then done.
	a := skillAttempts(t, next.URL, flaky)
	if f := failures(a); len(f) != 1 || f[0].Error == nil || !f[0].Error.Retryable || f[0].Error.Code != "temporary" ||
		a[len(a)-1].Outcome != "completed" {
		t.Errorf("flaky job: want a retryable failure then a completion, got %s", skillAttemptsString(a))
	}

	// The cancelled job: its claw stopped the work and failed it cancelled.
	if a := skillAttempts(t, next.URL, cancelled); len(a) == 0 || a[len(a)-1].Error == nil || a[len(a)-1].Error.Code != "cancelled" {
		t.Errorf("cancelled job: attempts %s", skillAttemptsString(a))
	}

	// The GPU job: done by the claw with a GPU, never handed to the other.
	if r := resultOf(gpu); r.Worker != "claw-gpu" {
		t.Errorf("GPU job: done by %q, want claw-gpu", r.Worker)
	}
	if !slices.Equal(final[gpu].Requires, []string{"gpu"}) {
		t.Errorf("GPU job: requires %q, want [gpu] (POST /jobs requires)", final[gpu].Requires)
	}
	for _, a := range skillAttempts(t, next.URL, gpu) {
		if a.WorkerID != "claw-gpu" {
			t.Errorf("GPU job handed to %s, which claims without the gpu capability: %s", a.WorkerID, skillAttemptsString(skillAttempts(t, next.URL, gpu)))
			break
		}
	}

	// Both claws exit by themselves once idle, without an error.
	for id, w := range workers {
		select {
		case <-w.done:
		case <-ctx.Done():
			t.Fatalf("worker %s did not exit after SPINE_IDLE_EXIT", id)
		}
		if w.err != nil || strings.Contains(w.out.String(), "Traceback") {
			t.Errorf("worker %s exited with %v:\n%s", id, w.err, w.out.String())
		}
		if !strings.Contains(w.out.String(), `"msg": "node unreachable, moving to the next"`) {
			t.Errorf("worker %s never said it moved to another node:\n%s", id, w.out.String())
		}
	}
}

func skillAttemptsString(as []*api.JobAttempt) string {
	b, _ := json.Marshal(as)
	return string(b)
}

// The curl lines of SKILL.md, run as they stand with bash and curl (the
// variables they name set as the text says): every body they send is
// accepted, and each call does what the text says it does.
func TestSkillCurlLines(t *testing.T) {
	t.Parallel()
	bash, _ := skillTool(t, "bash"), skillTool(t, "curl")
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	// The file as a follower serves it: its lines, and the node they talk
	// to, as the file's SPINE= line sets it.
	served := skillServed(t, fs[0].URL)
	sh := skillCurl(t, served)
	m := regexp.MustCompile(`(?m)^SPINE=(\S+) TOKEN=`).FindStringSubmatch(served)
	if m == nil || m[1] != fs[0].URL {
		t.Fatalf("the served SKILL.md sets SPINE to %q, want the node it came from, %s", m, fs[0].URL)
	}
	const worker = "claw-curl"

	// run runs the line keyed key through a follower with the variables
	// set, and decodes what it printed into v.
	run := func(key string, vars map[string]string, v any) {
		t.Helper()
		line, ok := sh.lines[key]
		if !ok {
			t.Fatalf("SKILL.md has no line %q", key)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bash, "-c", sh.helpers+line)
		env := map[string]string{"SPINE": m[1], "TOKEN": apiLeft, "WORKER": worker, "STREAM": "default"}
		for k, val := range vars {
			env[k] = val
		}
		cmd.Env = skillEnv(env)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", line, err, out, stderr.Bytes())
		}
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("%s printed %s: %v", line, out, err)
		}
	}
	create := func(extra map[string]any) string {
		t.Helper()
		body := map[string]any{"payload": map[string]any{"url": "https://example.com"}}
		for k, v := range extra {
			body[k] = v
		}
		return apiCreate(t, leader.URL, body).ID
	}
	get := func(id string) api.Job {
		t.Helper()
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "GET", leader.URL+"/jobs/"+id, apiHead, nil), http.StatusOK), &j)
		return j
	}
	cancelJob := func(id string) {
		t.Helper()
		apiPost(t, leader.URL, "/jobs/"+id+"/cancel", apiHead, nil, http.StatusOK)
	}
	claim := func(want string) map[string]string {
		t.Helper()
		var cl api.WorkerClaim
		run("post /internal/worker/claim", nil, &cl)
		if !cl.Claimed || cl.JobID != want {
			t.Fatalf("claim: want job %s, got %+v", want, cl)
		}
		return map[string]string{"JOB": cl.JobID, "ATTEMPT": cl.AttemptID, "LEASE": cl.LeaseToken}
	}

	var nodes api.ClusterNodes
	run("get /cluster/nodes", nil, &nodes)
	if len(nodes.Nodes) != 3 || nodes.Leader == "" {
		t.Fatalf("get /cluster/nodes: %+v", nodes)
	}
	var streams struct {
		Streams []api.StreamInfo `json:"streams"`
	}
	run("get /streams", nil, &streams)
	// A stream's instructions, as head wrote them, on the line that reads
	// one stream.
	apiWant(t, apiDo(t, "POST", leader.URL+"/api/sessions", apiHead, map[string]string{"name": "skill-s"}), http.StatusCreated)
	apiWant(t, apiDo(t, "POST", leader.URL+"/api/streams", apiHead, map[string]string{"name": "links", "session": "skill-s",
		"instructions": "Check every link of the payload's url; report the broken ones"}), http.StatusCreated)
	var si api.StreamInfo
	run("get /streams/$STREAM", map[string]string{"STREAM": "links"}, &si)
	if si.Name != "links" || si.Instructions != "Check every link of the payload's url; report the broken ones" {
		t.Fatalf("get /streams/$STREAM: %+v", si)
	}

	// Claim, heartbeat, complete.
	done := create(nil)
	vars := claim(done)
	var hb api.WorkerHeartbeatResult
	run("post /internal/worker/heartbeat", vars, &hb)
	if !hb.OK || hb.LeaseExpiresAt.IsZero() {
		t.Fatalf("heartbeat: %+v", hb)
	}
	var ack api.WorkerAck
	run("post /internal/worker/complete", vars, &ack)
	if j := get(done); !ack.OK || j.Status != api.JobStatusDone || !strings.Contains(string(j.Result), `"summary":"3 of 120 links broken on example.com"`) {
		t.Fatalf("complete: %+v, job %s %s", ack, j.Status, j.Result)
	}

	// Claim, fail (retryable): queued again.
	retried := create(map[string]any{"maxAttempts": 2})
	vars = claim(retried)
	ack = api.WorkerAck{}
	run("post /internal/worker/fail", vars, &ack)
	if j := get(retried); !ack.Requeued || ack.DLQ || ack.Status != api.JobStatusQueued || j.Status != api.JobStatusQueued || j.Error == nil || j.Error.Code != "timeout" {
		t.Fatalf("fail: %+v, job %+v", ack, j)
	}
	cancelJob(retried)

	// Claim, release not for this worker: queued, no attempt used, not
	// handed to the worker again; a repeat is refused.
	released := create(nil)
	vars = claim(released)
	ack = api.WorkerAck{}
	run("post /internal/worker/release", vars, &ack)
	if j := get(released); !ack.Requeued || ack.Status != api.JobStatusQueued || j.Status != api.JobStatusQueued || j.Attempts != 0 || len(j.NotFor) != 1 || j.NotFor[0] != worker {
		t.Fatalf("release: %+v, job %+v", ack, j)
	}
	var refusal api.WorkerRefusal
	run("post /internal/worker/release", vars, &refusal)
	if refusal.OK || refusal.Error.Code != api.CodeStaleLease {
		t.Fatalf("release repeated: %+v", refusal)
	}
	cancelJob(released)

	// The v0 lines: list, claim by id, heartbeat, complete; another
	// claimed and released; another claimed and failed with the worker
	// contract's error object, not retryable; a comment and the history.
	var list api.JobList
	byID := func(id string) map[string]string {
		t.Helper()
		var j api.Job
		run("post /jobs/$JOB/claim", map[string]string{"JOB": id}, &j)
		if j.ID != id || j.Status != api.JobStatusRunning || j.LeaseToken == "" || j.AttemptID == "" {
			t.Fatalf("v0 claim: %+v", j)
		}
		return map[string]string{"JOB": id, "LEASE": j.LeaseToken, "ATTEMPT": j.AttemptID}
	}
	v0 := create(nil)
	run("get '/jobs?status=queued&stream=default'", nil, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != v0 {
		t.Fatalf("v0 list: %+v", list)
	}
	vars = byID(v0)
	var j api.Job
	run("post /jobs/$JOB/heartbeat", vars, &j)
	run("post /jobs/$JOB/complete", vars, &j)
	if j.Status != api.JobStatusDone {
		t.Fatalf("v0 complete: %+v", j)
	}
	v0 = create(nil)
	vars = byID(v0)
	run("post /jobs/$JOB/release", vars, &j)
	if j.Status != api.JobStatusQueued {
		t.Fatalf("v0 release: %+v", j)
	}
	cancelJob(v0)
	v0 = create(nil)
	vars = byID(v0)
	run("post /jobs/$JOB/comment", vars, &j)
	run("post /jobs/$JOB/fail", vars, &j)
	if j.Error == nil || j.Error.Code != "no_input" || j.Error.Retryable {
		t.Errorf("v0 fail: error %+v", j.Error)
	}
	if j.Status != api.JobStatusFailed {
		t.Errorf("v0 fail with the worker contract's error object, retryable false: the job is %s, want failed", j.Status)
		cancelJob(v0)
	}
	var history api.JobEventList
	run("get /jobs/$JOB/events", vars, &history)
	if len(history.Events) < 3 {
		t.Fatalf("v0 events: %+v", history)
	}

	// The claim line names capabilities without gpu: a GPU job is passed
	// over, stays queued for a claw that has one, and GET /streams counts
	// it as unmatched.
	gpu := create(map[string]any{"requires": []string{"gpu"}})
	other := create(nil)
	var cl api.WorkerClaim
	run("post /internal/worker/claim", nil, &cl)
	if cl.JobID != other {
		t.Errorf("the claim line (capabilities lang:python) was handed job %s, want %s: the GPU job %s requires gpu", cl.JobID, other, gpu)
	}
	if j := get(gpu); j.Status != api.JobStatusQueued {
		t.Errorf("GPU job: %s, want queued", j.Status)
	}
	run("get /streams", nil, &streams)
	unmatched := "none"
	for _, si := range streams.Streams {
		if si.Name == "default" {
			b, _ := json.Marshal(si.Unmatched)
			unmatched = string(b)
		}
	}
	if unmatched != `[{"requires":["gpu"],"jobs":1}]` {
		t.Errorf("GET /streams: the default stream's unmatched is %s, want the GPU job", unmatched)
	}
}

// Every node serves SKILL.md with its own address in the examples and the
// cluster's nodes listed, its own first; and the file answers what an
// agent would otherwise guess: which streams are its own and in what order,
// what a stream's instructions are for and where they are, which
// capabilities to declare and who says so, how to choose a worker id (and
// that it is bound to the role), and which of the APIs are for it.
func TestSkillServedByEveryNode(t *testing.T) {
	t.Parallel()
	md := skillDoc(t)
	c := startCluster(t, 3, nil)
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL)
	}
	for _, n := range c.Nodes {
		served := skillServed(t, n.URL)
		if served != skillFor(t, md, n.URL) {
			t.Errorf("%s serves a SKILL.md that is not the repository's with its addresses", n.ID)
		}
		if strings.Contains(served, "{{") || strings.Contains(served, "127.0.0.1:36725") {
			t.Errorf("%s serves a placeholder or a made-up address", n.ID)
		}
		for _, want := range []string{
			"This file came from `" + n.URL + "`",
			"\nSPINE=" + n.URL + " TOKEN=",
			"SPINE_URLS=" + n.URL + ",",
			"`" + n.URL + "/mcp`",
		} {
			if !strings.Contains(served, want) {
				t.Errorf("%s: the served SKILL.md has no %q", n.ID, want)
			}
		}
		for _, u := range urls {
			if !strings.Contains(served, u) {
				t.Errorf("%s: the served SKILL.md does not name node %s", n.ID, u)
			}
		}
	}

	// The questions, each answered in the section it belongs to.
	section := func(title string) string {
		t.Helper()
		i := strings.Index(md, "\n## "+title+"\n")
		if i < 0 {
			t.Fatalf("SKILL.md has no section %q", title)
		}
		rest := md[i+len(title)+5:]
		if j := strings.Index(rest, "\n## "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	need := strings.Join(strings.Fields(section("What you need")), " ") // as one line: wrapping aside
	apis := section("Which API for what")
	for _, q := range []struct{ what, text string }{
		{"streams: none is assigned, all are open", "every stream is open to every claw"},
		{"streams: in what order a claim takes them", "**first first**"},
		{"streams: the operator names them", "Work the streams your operator named, in their order"},
		{"streams: named none", "Named none: claim `[\"default\"]`"},
		{"instructions: where", "`GET /streams/<name>`"},
		{"instructions: what for", "what its jobs are for and how to do them"},
		{"instructions: a stream without", "has none to follow: each job's `payload` is the whole task"},
		{"capabilities: what they are", "labels for what you have or can do"},
		{"capabilities: who says which", "your operator tells you yours"},
		{"capabilities: what a job requires", "a claim hands you only jobs whose `requires` are all among your `capabilities`"},
		{"worker id: how to choose", "1 to 128 letters, digits"},
		{"worker id: bound to the role", "**bound to your role**"},
		{"worker id: refused to another role", "403 `worker_id_taken`"},
		{"worker id: lapses", "7 days"},
	} {
		if !strings.Contains(need, q.text) {
			t.Errorf("SKILL.md does not answer %s: no %q under \"What you need\"", q.what, q.text)
		}
	}
	for _, row := range []struct{ api, yours string }{
		{"`/internal/worker/*`", "**yes**"},
		{"`/mcp`", "yes"},
		{"`/api/*`", "only if your operator gave you a developer-queue playbook"},
		{"`/v1/*`", "no, unless your operator registered you as a worker of a gateway"},
	} {
		found := false
		for _, line := range strings.Split(apis, "\n") {
			if strings.HasPrefix(line, "| "+row.api) && strings.Contains(line, row.yours) {
				found = true
			}
		}
		if !found {
			t.Errorf("SKILL.md's table of APIs has no row for %s saying %q", row.api, row.yours)
		}
	}
}

// An operator's skill file (SPINE_SKILL_MD_PATH) is served in place of
// the built-in one, with the same placeholders replaced and nothing else
// touched.
func TestSkillOperatorFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "skill.md")
	const custom = "# Our claws\n\nTalk to {{node_url}} (all: {{node_urls}}); {{not_ours}} stays.\n"
	if err := os.WriteFile(path, []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, map[string]string{"SPINE_SKILL_MD_PATH": path})
	base := c.Nodes[0].URL
	want := "# Our claws\n\nTalk to " + base + " (all: " + base + "); {{not_ours}} stays.\n"
	if got := skillServed(t, base); got != want {
		t.Fatalf("GET /skill.md: %q, want %q", got, want)
	}
}
