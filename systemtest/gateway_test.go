package systemtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/queue"
)

// A push gateway on three processes (docs/controlplane.md, "Delivery"):
// a separate gateway process per mode receives the routed tasks Spine
// POSTs to it, checks their signature and keeps (task, idempotency key)
// so a delivery sent twice runs once, and completes them through the task
// API with its role's token and the lease token. Through a leader kill
// every task is delivered and completed once; a gateway that refuses sends
// its tasks to another; one that never answers turns suspect and its task
// goes to another; one killed after it accepted a task loses the task to
// another once it is declared dead.
func TestPushGatewayDelivery(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"SPINE_HEALTH_SUSPECT_AFTER": "1s", "SPINE_HEALTH_DEAD_AFTER": "2s",
		"SPINE_GATEWAY_ACCEPT_TIMEOUT": "2s"})
	leader, fs := apiRoles(t, c)
	dir := t.TempDir()
	gateways := map[string]*testGateway{}
	start := func(id, mode string, pools ...string) *testGateway {
		g := startTestGateway(t, dir, id, mode, c.URLs())
		meta := map[string]string{}
		for _, p := range pools {
			meta[p] = "y"
		}
		var reg api.Gateway
		if mode == "accept" {
			// As an operator does it: the CLI prints the secret it made.
			args := []string{"gateway", "register", id, "--address", g.url, "--capacity", "20", "--delivery", "push", "--role", "right_claw", "--addr", fs[0].URL}
			for _, p := range pools {
				args = append(args, "--meta", p+"=y")
			}
			code, out, errOut := devCLI(t, c, dir, dir, apiHead, args...)
			if err := json.Unmarshal([]byte(out), &reg); code != 0 || err != nil {
				t.Fatalf("spine gateway register: exit %d %v\n%s%s", code, err, out, errOut)
			}
		} else {
			apiDecode(t, apiWant(t, devqRetry(t, "POST", fs[0].URL+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: id, Address: g.url,
				Capacity: 20, Metadata: meta, Delivery: "push", Role: "right_claw"}), 201), &reg)
		}
		if reg.Delivery != "push" || reg.Role != "right_claw" || len(reg.Secret) < 16 {
			t.Fatalf("registered %+v", reg)
		}
		g.setSecret(reg.Secret)
		// The secret is shown once: never in a view.
		var view api.Gateway
		apiDecode(t, apiWant(t, devqRetry(t, "GET", fs[0].URL+"/v1/gateways/"+id, apiHead, nil), 200), &view)
		if view.Secret != "" || view.Delivery != "push" {
			t.Fatalf("view %+v", view)
		}
		gateways[id] = g
		return g
	}
	route := func(base, jobID string, pool string) {
		t.Helper()
		apiWant(t, devqRetry(t, "POST", base+"/v1/tasks/route", apiHead, api.RouteRequest{JobID: jobID,
			Labels: map[string]string{pool: "y"}, IdempotencyKey: "route-" + jobID}), 200)
	}
	doneBy := func(jobID, want string, attempts int) apiJob {
		t.Helper()
		var j apiJob
		apiEventually(t, 60*time.Second, "task "+jobID+" completed by "+want, func() error {
			r, err := apiRequest("GET", fs[1].URL+"/jobs/"+jobID, apiHead, nil)
			if err != nil || r.Status != 200 {
				return fmt.Errorf("read: %v %v", err, r)
			}
			if err := json.Unmarshal(r.Body, &j); err != nil {
				return err
			}
			if j.Status != "done" {
				return fmt.Errorf("status %s", j.Status)
			}
			return nil
		})
		var res struct{ By string }
		if err := json.Unmarshal(j.Result, &res); err != nil || res.By != want || j.Attempts != attempts {
			t.Fatalf("task %s: result %s attempts %d, want by %s in %d", jobID, j.Result, j.Attempts, want, attempts)
		}
		return j
	}
	stream := wName("push")

	// Accepted, through a leader kill: ten tasks, the leader killed after
	// five were routed.
	acc := start("b-accept", "accept", "p1", "p2", "p3", "p4")
	var ids []string
	for i := range 10 {
		if i == 5 {
			if err := c.Kill(leader); err != nil {
				t.Fatal(err)
			}
		}
		j := apiJobOf(t, apiWant(t, devqRetry(t, "POST", fs[i%2].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": map[string]int{"n": i}}), 201))
		route(fs[(i+1)%2].URL, j.ID, "p1")
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		j := doneBy(id, "b-accept", 1)
		if j.Target == nil || *j.Target != "b-accept" {
			t.Fatalf("target %v", j.Target)
		}
	}
	acc.checkOnce(t, ids)

	// Refused: the task goes to the other gateway of its pool, and its
	// attempt is given back.
	start("a-refuse", "refuse", "p2")
	j := apiCreate(t, fs[0].URL, map[string]interface{}{"stream": stream, "payload": 1})
	route(fs[0].URL, j.ID, "p2")
	doneBy(j.ID, "b-accept", 1)
	if !eventsSay(t, fs[1].URL, j.ID, "gateway a-refuse refused it: 422 not for me") {
		t.Fatal("the refusal is not in the task's history")
	}
	if gateways["a-refuse"].received() == 0 {
		t.Fatal("the refusing gateway was never asked")
	}

	// No answer in time: the gateway turns suspect, the task goes on.
	start("a-hang", "hang", "p3")
	j = apiCreate(t, fs[0].URL, map[string]interface{}{"stream": stream, "payload": 2})
	route(fs[0].URL, j.ID, "p3")
	doneBy(j.ID, "b-accept", 1)
	if !eventsSay(t, fs[1].URL, j.ID, "gateway a-hang did not accept it in time") {
		t.Fatal("the timeout is not in the task's history")
	}

	// Killed after it accepted: declared dead, its task goes to another.
	hold := start("a-hold", "hold", "p4")
	j = apiCreate(t, fs[0].URL, map[string]interface{}{"stream": stream, "payload": 3})
	route(fs[0].URL, j.ID, "p4")
	apiEventually(t, 30*time.Second, "a-hold to accept the task", func() error {
		if hold.received() == 0 {
			return fmt.Errorf("nothing delivered yet")
		}
		return nil
	})
	hold.kill()
	doneBy(j.ID, "b-accept", 2)
	if !eventsSay(t, fs[1].URL, j.ID, "gateway a-hold declared dead") {
		t.Fatal("the gateway's death is not in the task's history")
	}
	// The dead gateway's old lease is fenced: its token changes nothing.
	if tok := hold.lastToken(); tok == "" {
		t.Fatal("a-hold kept no lease token")
	} else {
		apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/tasks/"+j.ID+"/complete", apiRight,
			map[string]any{"lease_token": tok, "result": map[string]string{"by": "a-hold"}}), 409)
		doneBy(j.ID, "b-accept", 2)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}

// eventsSay reports whether a job's history has an event whose text holds
// want.
func eventsSay(t *testing.T, base, id, want string) bool {
	t.Helper()
	for _, e := range apiEvents(t, base, apiHead, id) {
		if strings.Contains(e.Text, want) {
			return true
		}
	}
	return false
}

// testGateway is a gateway process the test started (the test binary run
// as testGatewayMain).
type testGateway struct {
	id, url string
	cmd     *exec.Cmd
	log     string // the deliveries it received, one JSON line each
	secret  string // file the process reads the secret from
}

func startTestGateway(t *testing.T, dir, id, mode string, nodes []string) *testGateway {
	t.Helper()
	g := &testGateway{id: id, log: filepath.Join(dir, id+".deliveries"), secret: filepath.Join(dir, id+".secret")}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g.cmd = exec.Command(self, "-test.run=^$")
	g.cmd.Env = append(os.Environ(), "SPINE_TEST_GATEWAY="+id, "GW_MODE="+mode, "GW_LOG="+g.log, "GW_SECRET_FILE="+g.secret,
		"GW_NODES="+strings.Join(nodes, ","), "GW_HEAD="+apiHead, "GW_TOKEN="+apiRight)
	g.cmd.Stderr, _ = os.Create(filepath.Join(dir, id+".stderr"))
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("gateway %s did not start: %v", id, err)
	}
	g.url = strings.TrimSpace(line)
	return g
}

func (g *testGateway) setSecret(s string) { _ = os.WriteFile(g.secret, []byte(s), 0o600) }

func (g *testGateway) kill() {
	if g.cmd.ProcessState == nil {
		_ = g.cmd.Process.Signal(syscall.SIGKILL)
		_ = g.cmd.Wait()
	}
}

type gatewayRecord struct {
	Task, Key, Token string
	Signed           bool
	Completed        bool
}

func (g *testGateway) records() []gatewayRecord {
	raw, _ := os.ReadFile(g.log)
	var out []gatewayRecord
	for _, l := range bytes.Split(raw, []byte("\n")) {
		var r gatewayRecord
		if json.Unmarshal(l, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

func (g *testGateway) received() int { return len(g.records()) }

func (g *testGateway) lastToken() string {
	rs := g.records()
	if len(rs) == 0 {
		return ""
	}
	return rs[len(rs)-1].Token
}

// checkOnce checks that every task was delivered signed and completed
// exactly once by the gateway, however often it was sent.
func (g *testGateway) checkOnce(t *testing.T, ids []string) {
	t.Helper()
	completed := map[string]int{}
	for _, r := range g.records() {
		if !r.Signed {
			t.Fatalf("a delivery without a valid signature: %+v", r)
		}
		if r.Completed {
			completed[r.Task]++
		}
	}
	for _, id := range ids {
		if completed[id] != 1 {
			t.Fatalf("task %s completed %d times by the gateway", id, completed[id])
		}
	}
}

func init() {
	if id := os.Getenv("SPINE_TEST_GATEWAY"); id != "" {
		testGatewayMain(id)
		os.Exit(0)
	}
}

// testGatewayMain is the gateway process: it heartbeats its registration,
// and answers deliveries by GW_MODE: accept (and complete the task with
// the result {"by": id}), hold (accept, never complete), refuse (422), hang
// (never answer).
func testGatewayMain(id string) {
	mode, nodes := os.Getenv("GW_MODE"), strings.Split(os.Getenv("GW_NODES"), ",")
	logf, err := os.OpenFile(os.Getenv("GW_LOG"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // task id + key: runs once
	record := func(r gatewayRecord) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(r)
		_, _ = logf.Write(append(b, '\n'))
	}
	post := func(path, token string, body any) (int, error) {
		b, _ := json.Marshal(body)
		var last error
		for i := 0; i < 100; i++ {
			u := nodes[i%len(nodes)] + path
			req, _ := http.NewRequest("POST", u, bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode < 500 {
					return resp.StatusCode, nil
				}
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			last = err
			time.Sleep(200 * time.Millisecond)
		}
		return 0, last
	}
	go func() {
		for {
			_, _ = post("/v1/gateways/"+id+"/heartbeat", os.Getenv("GW_HEAD"), map[string]any{})
			time.Sleep(300 * time.Millisecond)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println("http://" + ln.Addr().String() + "/spine/tasks")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		secret, _ := os.ReadFile(os.Getenv("GW_SECRET_FILE"))
		var d api.TaskDelivery
		_ = json.Unmarshal(body, &d)
		rec := gatewayRecord{Task: d.TaskID, Key: d.IdempotencyKey,
			Signed: queue.VerifySignature(string(secret), r.Header.Get(queue.SignatureHeader), body, time.Now(), time.Minute) == nil &&
				r.Header.Get(queue.IdempotencyKeyHeader) == d.IdempotencyKey}
		if d.Task != nil {
			rec.Token = d.Task.LeaseToken
		}
		switch mode {
		case "hang":
			record(rec)
			<-r.Context().Done()
			return
		case "refuse":
			record(rec)
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":"not for me"}`))
			return
		}
		if !rec.Signed {
			record(rec)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		dup := seen[d.TaskID+" "+d.IdempotencyKey]
		seen[d.TaskID+" "+d.IdempotencyKey] = true
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		if dup || mode == "hold" {
			record(rec)
			return
		}
		go func() {
			code, _ := post("/v1/tasks/"+d.TaskID+"/complete", os.Getenv("GW_TOKEN"),
				map[string]any{"lease_token": rec.Token, "result": map[string]string{"by": id}})
			rec.Completed = code == http.StatusOK
			record(rec)
		}()
	})
	_ = http.Serve(ln, handler)
}
