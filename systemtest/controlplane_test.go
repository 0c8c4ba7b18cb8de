package systemtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// The control plane's registry on three processes: gateways and workers
// registered through a follower (by the CLI and over HTTP) are the same
// list on every node; after the leader's death the list is still whole, a
// re-registration through another node updates in place, and deregistering
// a gateway takes its workers on every node.
func TestRegistryOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	dir := t.TempDir()
	cli := func(args ...string) string {
		t.Helper()
		tok := apiLeft
		if args[0] == "gateway" {
			tok = apiHead // gateways are head's to register
		}
		code, out, errOut := devCLI(t, c, dir, dir, tok, args...)
		if code != 0 {
			t.Fatalf("spine %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	gwA, gwB := wName("gwa"), wName("gwb")
	cli("gateway", "register", gwA, "--address", "http://10.0.0.7:7000", "--capacity", "4", "--meta", "zone=eu-1")
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: gwB, Address: "https://gw-b.internal", Capacity: 2}), 201)
	w1, w2 := wName("w"), wName("w")
	cli("worker", "register", w1, "--gateway", gwA, "--capability", "gpu,bash", "--capacity", "2")
	cli("worker", "register", w2, "--gateway", gwB, "--capability", "bash")

	listOn := func(url string) (api.GatewayList, api.WorkerList) {
		t.Helper()
		var g api.GatewayList
		var w api.WorkerList
		apiDecode(t, apiWant(t, apiDo(t, "GET", url+"/v1/gateways?consistent", apiHead, nil), 200), &g)
		apiDecode(t, apiWant(t, apiDo(t, "GET", url+"/v1/workers?consistent", apiHead, nil), 200), &w)
		return g, w
	}
	apiCaughtUp(t, c)
	var first string
	for _, n := range c.Nodes {
		g, w := listOn(n.URL)
		b, _ := json.Marshal([]any{g, w})
		if first == "" {
			first = string(b)
		} else if string(b) != first {
			t.Fatalf("%s answers another registry:\n%s\n%s", n.ID, b, first)
		}
		if len(g.Gateways) != 2 || len(w.Workers) != 2 {
			t.Fatalf("%s: %d gateways, %d workers", n.ID, len(g.Gateways), len(w.Workers))
		}
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// Until a new leader is elected a consistent read answers 503 (and a
	// client retries); then it answers the whole registry.
	var g api.GatewayList
	var w api.WorkerList
	apiEventually(t, 15*time.Second, "the registry read through the new leader", func() error {
		g, w = api.GatewayList{}, api.WorkerList{}
		rg := apiDo(t, "GET", fs[1].URL+"/v1/gateways?consistent", apiHead, nil)
		rw := apiDo(t, "GET", fs[1].URL+"/v1/workers?consistent", apiHead, nil)
		if rg.Status != 200 || rw.Status != 200 {
			if rg.Status != 503 && rg.Status != 200 || rw.Status != 503 && rw.Status != 200 {
				t.Fatalf("a read during the failover: %s / %s", rg, rw)
			}
			return fmt.Errorf("%s / %s", rg, rw)
		}
		apiDecode(t, rg, &g)
		apiDecode(t, rw, &w)
		return nil
	})
	if len(g.Gateways) != 2 || len(w.Workers) != 2 {
		t.Fatalf("after the leader's death: %+v %+v", g, w)
	}
	var upd api.Gateway
	if err := json.Unmarshal([]byte(cli("gateway", "register", gwA, "--address", "http://10.0.0.8:7000", "--capacity", "6", "--addr", fs[1].URL)), &upd); err != nil ||
		upd.Address != "http://10.0.0.8:7000" || upd.Capacity != 6 || upd.Metadata["zone"] != "" || len(upd.Workers) != 1 {
		t.Fatalf("re-register after the failover: %+v %v", upd, err)
	}
	var gone api.GatewayDeregistered
	if err := json.Unmarshal([]byte(cli("gateway", "deregister", gwA)), &gone); err != nil || len(gone.Workers) != 1 || gone.Workers[0].ID != w1 {
		t.Fatalf("deregister: %+v %v", gone, err)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	for _, n := range c.Nodes {
		g, w := listOn(n.URL)
		if len(g.Gateways) != 1 || g.Gateways[0].ID != gwB || len(w.Workers) != 1 || w.Workers[0].ID != w2 {
			t.Fatalf("%s after the deregistration: %+v %+v", n.ID, g, w)
		}
	}
	if out := cli("worker", "list", "--output", "table"); !strings.Contains(out, w2) || strings.Contains(out, w1) {
		t.Fatalf("worker table:\n%s", out)
	}
}

// Health through gossip on three processes: heartbeats sent to followers
// only keep a gateway healthy on every node (they reach the leader by
// gossip, not by Raft: the log does not grow); a worker that stops is
// suspect, then dead, on every node; its heartbeat brings it back; across
// the leader's death the new leader neither condemns the one still
// beating nor revives the silent one until it speaks.
func TestRegistryHealthOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"SPINE_HEALTH_SUSPECT_AFTER": "1500ms", "SPINE_HEALTH_DEAD_AFTER": "3s"})
	leader, fs := apiRoles(t, c)
	gw, wk := wName("hgw"), wName("hw")
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: gw, Address: "http://10.1.1.1:7000", Capacity: 1}), 201)
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/workers", apiLeft, api.WorkerRegisterRequest{ID: wk, Gateway: gw, Capacity: 1}), 201)
	apiCaughtUp(t, c)

	// The gateway beats through the followers, every 200 ms, until stopped.
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			u := fs[i%2].URL
			if r, err := apiRequest("POST", u+"/v1/gateways/"+gw+"/heartbeat", apiHead, nil); err == nil && r.Status != 200 {
				t.Errorf("heartbeat through %s: %s", u, r)
				return
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-beating
	}()
	healthOf := func(url, kind, id string) (string, time.Time) {
		r, err := apiRequest("GET", url+"/v1/"+kind+"/"+id, apiHead, nil)
		if err != nil || r.Status != 200 {
			return fmt.Sprint(r, err), time.Time{}
		}
		var v struct {
			Health   string    `json:"health"`
			LastSeen time.Time `json:"last_seen"`
		}
		json.Unmarshal(r.Body, &v)
		return v.Health, v.LastSeen
	}
	everywhere := func(kind, id, want string) {
		t.Helper()
		apiEventually(t, 20*time.Second, fmt.Sprintf("%s %s %s on every node", kind, id, want), func() error {
			for _, n := range c.Nodes {
				if !n.Running() {
					continue
				}
				if h, _ := healthOf(n.URL, kind, id); h != want {
					return fmt.Errorf("%s says %s", n.ID, h)
				}
			}
			return nil
		})
	}
	st := func() uint64 {
		s, err := c.Status(leader)
		if err != nil {
			t.Fatal(err)
		}
		return s.CommitIndex
	}
	everywhere("workers", wk, "dead") // silent from the start
	idx := st()
	// The leader hears the gateway's heartbeats only through gossip.
	apiEventually(t, 10*time.Second, "the leader to know the gateway's heartbeats", func() error {
		if _, seen := healthOf(leader.URL, "gateways", gw); time.Since(seen) > 2*time.Second {
			return fmt.Errorf("leader last saw it at %v", seen)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // longer than the suspect threshold
	everywhere("gateways", gw, "healthy")
	if got := st(); got != idx {
		t.Fatalf("heartbeats with no change of health wrote %d log entries", got-idx)
	}

	// The worker speaks once (through a follower): healthy again. Its id
	// is the left claw's: the right claw's heartbeat for it is refused.
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/v1/workers/"+wk+"/heartbeat", apiRight, nil), 403, api.CodeWorkerIDTaken)
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/v1/workers/"+wk+"/heartbeat", apiLeft, nil), 200)
	everywhere("workers", wk, "healthy")
	everywhere("workers", wk, "dead")

	// The leader dies; the gateway keeps beating through the followers.
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	everywhere("gateways", gw, "healthy")
	everywhere("workers", wk, "dead")
	close(stop)
	<-beating
	everywhere("gateways", gw, "suspect")
	everywhere("gateways", gw, "dead")
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/gateways/"+gw+"/heartbeat", apiHead, nil), 200)
	everywhere("gateways", gw, "healthy")
	apiWantError(t, apiDo(t, "POST", fs[0].URL+"/v1/workers/nope/heartbeat", apiLeft, nil), 404, api.CodeNotFound)
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// A worker process dies (SIGKILL: its heartbeats stop): within seconds it
// is declared dead and the job it held goes back to the queue, although
// its lease (LEASE_SECONDS, 300 s) had minutes left; another worker then
// claims it. A worker that keeps beating keeps its job.
func TestDeadWorkerLosesItsLeaseInSeconds(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"SPINE_HEALTH_SUSPECT_AFTER": "1s", "SPINE_HEALTH_DEAD_AFTER": "2s"})
	_, fs := apiRoles(t, c)
	base := fs[0].URL
	gw, doomed, alive := wName("dgw"), wName("doomed"), wName("alive")
	apiWant(t, apiDo(t, "POST", base+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: gw, Address: "http://10.2.2.2:7000", Capacity: 2}), 201)
	for _, w := range []string{doomed, alive} {
		apiWant(t, apiDo(t, "POST", base+"/v1/workers", apiLeft, api.WorkerRegisterRequest{ID: w, Gateway: gw, Capacity: 1}), 201)
	}
	apiCaughtUp(t, c) // every node knows them before they beat
	// Each worker is a process that heartbeats every 300 ms through the CLI
	// (the living one for its gateway too: a dead gateway takes its
	// workers' leases with it).
	dir := t.TempDir()
	env := append(os.Environ(), "SPINE_ADDRS="+strings.Join(c.URLs(), ","), "SPINE_TOKEN="+apiHead)
	procs := map[string]*exec.Cmd{}
	for _, w := range []string{doomed, alive} {
		beatGateway := ""
		if w == alive {
			beatGateway = gw
		}
		cmd := exec.Command("bash", "-c", `while true; do "$0" worker heartbeat "$1" > /dev/null || exit 1
  [ -z "$2" ] || "$0" gateway heartbeat "$2" > /dev/null || exit 1; sleep 0.3; done`, binary, w, beatGateway)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		logf, _ := os.Create(filepath.Join(dir, w+".log"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[w] = cmd
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_, _ = cmd.Process.Wait()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("%s's heartbeat loop:\n%s", w, b)
			}
		})
	}
	stream := wName("dstream")
	jobs := map[string]string{}
	for _, w := range []string{doomed, alive} {
		wCreate(t, base, stream, map[string]int{"n": 1}, nil)
		jobs[w] = wMustClaim(t, fs[1].URL, testcluster.LeftToken, w, []string{stream}).JobID
	}
	time.Sleep(3 * time.Second) // past the dead threshold: both beat, both keep their jobs
	for w, id := range jobs {
		if j := wGetJob(t, base, id); j.Status != "running" {
			t.Fatalf("%s's job is %s while it beats", w, j.Status)
		}
	}
	// Who works on what, through a follower.
	var agents api.AgentList
	apiDecode(t, apiDo(t, "GET", fs[1].URL+"/v1/agents?consistent", apiHead, nil), &agents)
	working := map[string]string{}
	for _, a := range agents.Agents {
		if len(a.Tasks) == 1 {
			working[a.ID] = a.Tasks[0].JobID
		}
	}
	if working[doomed] != jobs[doomed] || working[alive] != jobs[alive] {
		t.Fatalf("agents: %+v", agents.Agents)
	}
	killed := time.Now()
	_ = syscall.Kill(-procs[doomed].Process.Pid, syscall.SIGKILL)
	apiEventually(t, 20*time.Second, "the dead worker's job back in the queue", func() error {
		if j := wGetJob(t, fs[0].URL, jobs[doomed]); j.Status != "queued" {
			return fmt.Errorf("its job is %s", j.Status)
		}
		return nil
	})
	t.Logf("the job went back %v after the worker was killed (lease: 300 s)", time.Since(killed).Round(100*time.Millisecond))
	var w api.Worker
	apiDecode(t, apiDo(t, "GET", fs[1].URL+"/v1/workers/"+doomed, apiHead, nil), &w)
	if w.Health != api.HealthDead {
		t.Fatalf("the killed worker is %s", w.Health)
	}
	if j := wGetJob(t, base, jobs[alive]); j.Status != "running" {
		t.Fatalf("the living worker's job is %s", j.Status)
	}
	// The state, through the other follower: one queued job (the dead
	// worker's), one running; what the next claim would take.
	var st api.SystemState
	apiDecode(t, apiDo(t, "GET", fs[0].URL+"/v1/state?consistent", apiHead, nil), &st)
	var depth *api.QueueDepth
	for _, q := range st.Queues {
		if q.Stream == stream {
			depth = q
		}
	}
	if depth == nil || depth.Queued != 1 || depth.Running != 1 || len(st.Nodes) != 3 || st.Leader.ID == "" {
		t.Fatalf("state: %+v (queue %+v)", st, depth)
	}
	var next api.ControlTask
	apiDecode(t, apiDo(t, "GET", fs[1].URL+"/v1/tasks/next?consistent&agent_id="+alive+"-2&streams="+stream, apiLeft, nil), &next)
	if next.ID != jobs[doomed] || next.State != api.StateReleased {
		t.Fatalf("next: %+v", next)
	}
	if a := wMustClaim(t, fs[0].URL, testcluster.LeftToken, alive+"-2", []string{stream}); a.JobID != jobs[doomed] || a.Attempt != 2 {
		t.Fatalf("the released job claimed again: %+v", a)
	}
}

// Routing on three processes: a job routed to the least loaded healthy
// gateway is redirected to another when the process of its gateway dies
// (its heartbeats stop), after the cluster's leader was killed too; with
// no healthy gateway left the answer is 503 no_healthy_gateway.
func TestRouteFailsOverWhenTheGatewayDies(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"SPINE_HEALTH_SUSPECT_AFTER": "1s", "SPINE_HEALTH_DEAD_AFTER": "2s"})
	leader, fs := apiRoles(t, c)
	base := fs[0].URL
	ga, gb := wName("rga"), wName("rgb") // ga sorts first: it wins the tie
	for _, g := range []string{ga, gb} {
		apiWant(t, apiDo(t, "POST", base+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: g, Address: "http://10.3.3.3:7000", Capacity: 4}), 201)
	}
	apiCaughtUp(t, c)
	dir := t.TempDir()
	env := append(os.Environ(), "SPINE_ADDRS="+strings.Join(c.URLs(), ","), "SPINE_TOKEN="+apiHead)
	procs := map[string]*exec.Cmd{}
	for _, g := range []string{ga, gb} {
		cmd := exec.Command("bash", "-c", `while true; do "$0" gateway heartbeat "$1" > /dev/null; sleep 0.3; done`, binary, g)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		logf, _ := os.Create(filepath.Join(dir, g+".log"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[g] = cmd
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _, _ = cmd.Process.Wait(); logf.Close() })
	}
	stream := wName("rstream")
	job := wCreate(t, base, stream, map[string]int{"n": 1}, nil)
	var routed api.RouteAnswer
	code, out, errOut := devCLI(t, c, dir, dir, apiHead, "route", job.ID, "--addr", fs[1].URL, "--idempotency-key", "dispatch-"+job.ID)
	if err := json.Unmarshal([]byte(out), &routed); code != 0 || err != nil {
		t.Fatalf("spine route: exit %d %v\n%s%s", code, err, out, errOut)
	}
	if routed.Gateway.ID != ga || string(routed.Job.Target) != ga {
		t.Fatalf("routed to %s, want %s", routed.Gateway.ID, ga)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// The same dispatch repeated on the new leader: the first answer.
	var again api.RouteAnswer
	apiDecode(t, apiWant(t, devqRetry(t, "POST", fs[0].URL+"/v1/tasks/route", apiHead,
		api.RouteRequest{JobID: job.ID, IdempotencyKey: "dispatch-" + job.ID}), 200), &again)
	if again.Gateway.ID != ga || string(again.Job.Target) != ga {
		t.Fatalf("repeated dispatch after the failover: %+v", again.Gateway)
	}
	killed := time.Now()
	_ = syscall.Kill(-procs[ga].Process.Pid, syscall.SIGKILL)
	apiEventually(t, 30*time.Second, "the job redirected to the other gateway", func() error {
		j := wGetJob(t, fs[0].URL, job.ID)
		if j.Target == nil || *j.Target != gb {
			return fmt.Errorf("target %v", j.Target)
		}
		return nil
	})
	t.Logf("redirected %v after its gateway died", time.Since(killed).Round(100*time.Millisecond))
	var ev struct {
		Events []wEvent `json:"events"`
	}
	wGetRetrying(t, fs[1].URL, "/jobs/"+job.ID+"/events", &ev)
	if last := ev.Events[len(ev.Events)-1]; last.Type != "routed" || !strings.Contains(last.Text, ga+" is dead") {
		t.Fatalf("last event: %+v", last)
	}
	_ = syscall.Kill(-procs[gb].Process.Pid, syscall.SIGKILL)
	apiEventually(t, 30*time.Second, "the other gateway to be dead too", func() error {
		var g api.Gateway
		apiDecode(t, apiDo(t, "GET", fs[1].URL+"/v1/gateways/"+gb+"?consistent", apiHead, nil), &g)
		if g.Health != api.HealthDead {
			return fmt.Errorf("%s is %s", gb, g.Health)
		}
		return nil
	})
	other := wCreate(t, fs[1].URL, stream, map[string]int{"n": 2}, nil)
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/v1/tasks/route", apiHead, api.RouteRequest{JobID: other.ID}), 503, api.CodeNoHealthyGateway)
	if j := wGetJob(t, fs[0].URL, other.ID); j.Target != nil && *j.Target != "" {
		t.Fatalf("a refused route changed the job: %+v", j)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
