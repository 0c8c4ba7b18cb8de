package systemtest

// The replicated core: acknowledged writes survive SIGKILL of the leader and
// of the whole cluster, and the operator CLI manages a real cluster.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// coreExpect is what a job must look like after any failure.
type coreExpect struct {
	i         int
	status    string
	attempts  int
	claimedBy string
	attemptID string
	result    string
	errMsg    string
	events    string
}

func TestCoreAcknowledgedWritesSurviveKills(t *testing.T) {
	c := startCluster(t, 3, nil)
	const n = 200
	stream := "core"

	// 200 concurrent creates spread over all three nodes.
	var (
		mu   sync.Mutex
		exp  = map[string]*coreExpect{}
		ids  = make([]string, n)
		errs []string
		wg   sync.WaitGroup
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				base := c.Nodes[i%3].URL
				r, err := apiRequest("POST", base+"/jobs", apiHead, map[string]interface{}{"payload": map[string]int{"i": i}, "stream": stream})
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case r.Status != http.StatusCreated:
					errs = append(errs, r.String())
				default:
					var j apiJob
					if err := json.Unmarshal(r.Body, &j); err != nil || j.ID == "" {
						errs = append(errs, r.String())
					} else {
						ids[i] = j.ID
						exp[j.ID] = &coreExpect{i: i, status: "queued", events: "created"}
					}
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d creates failed on a healthy cluster, first: %s", len(errs), errs[0])
	}

	// Move jobs through every state, through every node.
	for i := 0; i < 140; i++ {
		id, base := ids[i], c.Nodes[i%3].URL
		e := exp[id]
		claw, clawRole := apiLeft, "left_claw"
		if i%2 == 1 {
			claw, clawRole = apiRight, "right_claw"
		}
		cl := apiJobOf(t, apiPost(t, base, "/jobs/"+id+"/claim", claw, map[string]string{"workerId": fmt.Sprint("w", i)}, 200))
		base2 := c.Nodes[(i+1)%3].URL
		switch {
		case i < 40:
			apiPost(t, base2, "/jobs/"+id+"/complete", claw, map[string]interface{}{"result": map[string]int{"i": i}}, 200)
			e.status, e.attempts, e.result, e.events = "done", 1, fmt.Sprintf(`{"i":%d}`, i), "created,claimed,completed"
		case i < 80:
			apiPost(t, base2, "/jobs/"+id+"/fail", claw, map[string]interface{}{"error": fmt.Sprint("e-", i), "requeue": false}, 200)
			e.status, e.attempts, e.errMsg, e.events = "failed", 1, fmt.Sprint("e-", i), "created,claimed,failed"
		case i < 120:
			e.status, e.attempts, e.claimedBy, e.attemptID, e.events = "running", 1, clawRole, cl.AttemptID, "created,claimed"
		default:
			apiPost(t, base2, "/jobs/"+id+"/release", claw, nil, 200)
			e.status, e.attempts, e.events = "queued", 0, "created,claimed,released"
		}
	}

	verify := func(t *testing.T, node *testcluster.Node, query string) {
		t.Helper()
		q := url.Values{"stream": {stream}, "limit": {"1000"}}
		if query == "stale" {
			q.Set("stale", "true")
		}
		got := map[string]apiJob{}
		for _, j := range apiListAll(t, node.URL, apiHead, q) {
			got[j.ID] = j
		}
		if len(got) != len(exp) {
			t.Errorf("%s (%s read) lists %d jobs, want %d", node.ID, query, len(got), len(exp))
		}
		bad := 0
		for id, e := range exp {
			j, ok := got[id]
			switch {
			case !ok:
				t.Errorf("%s (%s read): acknowledged job %s (#%d) is missing", node.ID, query, id, e.i)
			case j.Status != e.status || j.Attempts != e.attempts || j.ClaimedBy != e.claimedBy || j.AttemptID != e.attemptID ||
				string(j.Result) != e.result || (e.errMsg != "" && (j.Error == nil || j.Error.Message != e.errMsg)) ||
				string(j.Payload) != fmt.Sprintf(`{"i":%d}`, e.i):
				t.Errorf("%s (%s read): job #%d = status %s attempts %d owner %q attempt %q result %s payload %s; want %+v",
					node.ID, query, e.i, j.Status, j.Attempts, j.ClaimedBy, j.AttemptID, j.Result, j.Payload, *e)
			default:
				continue
			}
			if bad++; bad > 10 {
				t.Fatalf("%s: too many mismatches", node.ID)
			}
		}
		// Event histories replicate too (a sample, one per state).
		for _, i := range []int{0, 41, 82, 123, 150} {
			ev := apiEvents(t, node.URL, apiHead, ids[i])
			if got := apiEventTypes(ev); got != exp[ids[i]].events {
				t.Errorf("%s: job #%d events %s, want %s", node.ID, i, got, exp[ids[i]].events)
			}
		}
	}
	verifyAll := func(t *testing.T) {
		t.Helper()
		for _, node := range c.Nodes {
			if node.Running() {
				verify(t, node, "default")
			}
		}
		apiCaughtUp(t, c)
		for _, node := range c.Nodes {
			if node.Running() {
				verify(t, node, "stale")
			}
		}
	}
	verifyAll(t)

	// SIGKILL the leader: a new one is elected and every acknowledged job is
	// readable on both survivors.
	old, _ := apiRoles(t, c)
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if nl == old {
		t.Fatal("the killed node is leader")
	}
	verifyAll(t)

	// Writes after the failover, through both survivors.
	k := 0
	for _, node := range c.Nodes {
		if !node.Running() {
			continue
		}
		for j := 0; j < 5; j++ {
			i := 80 + k
			claw := apiLeft
			if i%2 == 1 {
				claw = apiRight
			}
			apiPost(t, node.URL, "/jobs/"+ids[i]+"/complete", claw, map[string]string{"result": "late"}, 200)
			e := exp[ids[i]]
			e.status, e.claimedBy, e.attemptID, e.result, e.events = "done", "", "", `"late"`, "created,claimed,completed"
			nj := apiCreate(t, node.URL, map[string]interface{}{"payload": map[string]int{"i": 1000 + k}, "stream": stream})
			exp[nj.ID] = &coreExpect{i: 1000 + k, status: "queued", events: "created"}
			k++
		}
	}

	// The killed node restarts from its data dir and catches up.
	if err := c.Restart(old); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	verify(t, old, "stale")
	verify(t, old, "default")

	// SIGKILL every node at once, restart all: nothing acknowledged is lost.
	for _, node := range c.Nodes {
		if err := c.Kill(node); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range c.Nodes {
		if err := c.Restart(node); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	verifyAll(t)
	// The restarted cluster takes writes and the running leases still fence.
	id := ids[100]
	apiWantError(t, apiDo(t, "POST", c.Nodes[0].URL+"/jobs/"+id+"/complete", apiLeft,
		map[string]string{"leaseToken": "wrong", "attemptId": exp[id].attemptID}), 409, "stale_lease")
	apiPost(t, c.Nodes[1].URL, "/jobs/"+id+"/complete", apiLeft, nil, 200)
	apiCreate(t, c.Nodes[2].URL, nil)
}

// coreCLI runs the spine binary and returns its exit code, stdout and stderr.
func coreCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "SPINE_ADDRS=", "SPINE_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("spine %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

type coreStatus struct {
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
	Nodes []struct {
		ID         string `json:"id"`
		RaftAddr   string `json:"raft_addr"`
		HTTPAddr   string `json:"http_addr"`
		GossipAddr string `json:"gossip_addr"`
		Suffrage   string `json:"suffrage"`
		Alive      bool   `json:"alive"`
	} `json:"nodes"`
	Term        uint64 `json:"term"`
	CommitIndex uint64 `json:"commit_index"`
	NodeID      string `json:"node_id"`
	State       string `json:"state"`
}

// coreCLIStatus runs `spine cluster status` against addr and decodes it.
func coreCLIStatus(t *testing.T, addr string) coreStatus {
	t.Helper()
	code, out, errOut := coreCLI(t, "cluster", "status", "--addr", addr, "--token", apiHead)
	if code != 0 {
		t.Fatalf("cluster status: exit %d: %s", code, errOut)
	}
	var st coreStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster status output is not JSON: %v\n%s", err, out)
	}
	return st
}

func (st coreStatus) voters() (alive []string) {
	for _, n := range st.Nodes {
		if n.Suffrage == "voter" && n.Alive {
			alive = append(alive, n.ID)
		}
	}
	return alive
}

func TestCoreClusterCLI(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)

	t.Run("Status", func(t *testing.T) {
		st := coreCLIStatus(t, fs[0].URL)
		if st.Leader.ID != leader.ID || st.Leader.HTTPAddr != leader.URL || st.NodeID != fs[0].ID || st.State != "Follower" || st.Term == 0 || st.CommitIndex == 0 {
			t.Errorf("status via %s: %+v", fs[0].ID, st)
		}
		if v := st.voters(); len(v) != 3 || len(st.Nodes) != 3 {
			t.Errorf("voters alive %v of %+v", v, st.Nodes)
		}
		for _, n := range st.Nodes {
			var want *testcluster.Node
			for _, cn := range c.Nodes {
				if cn.ID == n.ID {
					want = cn
				}
			}
			if want == nil || n.RaftAddr != want.RaftAddr || n.HTTPAddr != want.URL || n.GossipAddr != want.GossipAddr {
				t.Errorf("member %+v does not match the node started", n)
			}
		}
		code, out, _ := coreCLI(t, "cluster", "status", "--addr", leader.URL, "--token", apiHead, "--output", "table")
		if code != 0 || !strings.Contains(out, "LEADER") || !strings.Contains(out, leader.ID) {
			t.Errorf("table status: exit %d\n%s", code, out)
		}
	})

	t.Run("FailuresExitNonZero", func(t *testing.T) {
		code, _, errOut := coreCLI(t, "cluster", "status", "--addr", fs[1].URL, "--token", "wrong-token")
		if code != 6 || !strings.Contains(errOut, "spine:") || !strings.Contains(strings.ToLower(errOut), "token") {
			t.Errorf("bad token: exit %d, stderr %q (want exit 6 and a message about the token)", code, errOut)
		}
		code, _, errOut = coreCLI(t, "cluster", "status", "--addr", fs[1].URL, "--token", apiLeft)
		if code != 6 || !strings.Contains(errOut, "forbidden") && !strings.Contains(errOut, "may not") {
			t.Errorf("claw token: exit %d, stderr %q", code, errOut)
		}
		code, _, errOut = coreCLI(t, "cluster", "remove", "--addr", leader.URL, "--token", apiHead)
		if code != 2 || !strings.Contains(errOut, "--node-id") {
			t.Errorf("remove without --node-id: exit %d, stderr %q", code, errOut)
		}
		code, _, errOut = coreCLI(t, "cluster", "status", "--addr", "http://"+apiFreeAddr(t), "--token", apiHead, "--retry-for", "0")
		if code != 5 || errOut == "" {
			t.Errorf("unreachable node: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("TransferLeader", func(t *testing.T) {
		old, _ := apiRoles(t, c)
		code, out, errOut := coreCLI(t, "cluster", "transfer-leader", "--addr", old.URL, "--token", apiHead)
		if code != 0 {
			t.Fatalf("transfer-leader: exit %d: %s %s", code, out, errOut)
		}
		var nl *testcluster.Node
		apiEventually(t, 20*time.Second, "leadership moves", func() error {
			if nl = c.Leader(); nl == nil || nl == old {
				return fmt.Errorf("leader %v", nl)
			}
			return nil
		})
		// To a named node, asked through a follower.
		var target, via *testcluster.Node
		for _, n := range c.Nodes {
			if n != nl && target == nil {
				target = n
			} else if n != nl {
				via = n
			}
		}
		code, _, errOut = coreCLI(t, "cluster", "transfer-leader", "--to", target.ID, "--addr", via.URL, "--token", apiHead)
		if code != 0 {
			t.Fatalf("transfer-leader --to %s: exit %d: %s", target.ID, code, errOut)
		}
		apiEventually(t, 20*time.Second, "leadership moves to "+target.ID, func() error {
			if l := c.Leader(); l != target {
				return fmt.Errorf("leader %v", l)
			}
			return nil
		})
		code, _, errOut = coreCLI(t, "cluster", "transfer-leader", "--to", "no-such-node", "--addr", target.URL, "--token", apiHead)
		if code == 0 || errOut == "" {
			t.Errorf("transfer to an unknown node: exit %d, stderr %q", code, errOut)
		}
		// The cluster still takes writes through every node.
		for _, n := range c.Nodes {
			apiCreate(t, n.URL, nil)
		}
	})

	t.Run("JoinAndRemove", func(t *testing.T) {
		marker := apiCreate(t, c.Nodes[0].URL, map[string]interface{}{"payload": "before n4"})
		n4 := coreStartExtraNode(t, "n4")
		join := []string{"cluster", "join", "--node-id", "n4", "--raft-addr", n4.raft, "--http-addr", n4.url,
			"--gossip-addr", n4.gossip, "--token", apiHead}
		for i, n := range []*testcluster.Node{c.Nodes[1], c.Nodes[2]} { // twice: idempotent
			code, out, errOut := coreCLI(t, append(join, "--addr", n.URL)...)
			if code != 0 {
				t.Fatalf("join #%d: exit %d: %s", i+1, code, errOut)
			}
			if !strings.Contains(out, `"n4"`) {
				t.Errorf("join #%d answer does not list n4:\n%s", i+1, out)
			}
		}
		l, _ := apiRoles(t, c)
		apiEventually(t, 30*time.Second, "n4 is an alive voter", func() error {
			st := coreCLIStatus(t, l.URL)
			if v := st.voters(); len(v) != 4 || len(st.Nodes) != 4 {
				return fmt.Errorf("voters alive %v, members %d", v, len(st.Nodes))
			}
			return nil
		})
		// n4 has the data: a job from before the join, read locally.
		apiEventually(t, 30*time.Second, "n4 replicates", func() error {
			r, err := apiRequest("GET", n4.url+"/jobs/"+marker.ID+"?stale", apiHead, nil)
			if err != nil {
				return err
			}
			if r.Status != 200 {
				return fmt.Errorf("%s", r)
			}
			return nil
		})
		// n4 serves the API: a write through it is forwarded to the leader.
		apiCreate(t, n4.url, nil)

		for i := 0; i < 2; i++ { // twice: idempotent
			code, out, errOut := coreCLI(t, "cluster", "remove", "--node-id", "n4", "--addr", c.Nodes[i].URL, "--token", apiHead)
			if code != 0 {
				t.Fatalf("remove #%d: exit %d: %s", i+1, code, errOut)
			}
			if strings.Contains(out, `"n4"`) {
				t.Errorf("remove #%d answer still lists n4:\n%s", i+1, out)
			}
		}
		st := coreCLIStatus(t, c.Nodes[2].URL)
		if len(st.Nodes) != 3 || len(st.voters()) != 3 {
			t.Errorf("after remove: %+v", st.Nodes)
		}
		n4.kill()
		for _, n := range c.Nodes {
			apiCreate(t, n.URL, nil)
		}
	})
}

// TestCoreWritesRideOutLeaderTransfers moves leadership around while
// writes flow through every node: a follower whose forward reaches a node
// that has just stepped down sends it on to the next leader instead of
// answering 503, and every acknowledged write is there afterwards.
func TestCoreWritesRideOutLeaderTransfers(t *testing.T) {
	c := startCluster(t, 3, nil)
	stream := apiUnique("transfer")
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		acked   []string
		bounced []string // forwarded writes answered "not the leader"
		unknown int
		wg      sync.WaitGroup
	)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				base := c.Nodes[(g+i)%3].URL
				r, err := apiRequest("POST", base+"/jobs", apiHead, map[string]interface{}{"payload": i, "stream": stream})
				mu.Lock()
				switch {
				case err != nil:
					bounced = append(bounced, err.Error())
				case r.Status == 201:
					var j apiJob
					_ = json.Unmarshal(r.Body, &j)
					acked = append(acked, j.ID)
				case r.Status == 503 && strings.Contains(string(r.Body), "outcome_unknown"):
					unknown++ // honest: the write met the step-down mid-apply
				case r.Status == 503 && r.Header.Get("X-Spine-Node") != "" && strings.Contains(string(r.Body), "forwarded"):
					bounced = append(bounced, r.String())
				}
				mu.Unlock()
			}
		}(g)
	}
	for k := 0; k < 4; k++ {
		old, _ := apiRoles(t, c)
		apiPost(t, old.URL, "/cluster/transfer-leader", apiHead, map[string]string{}, 200)
		apiEventually(t, 20*time.Second, "leadership moves", func() error {
			if l := c.Leader(); l == nil || l == old {
				return fmt.Errorf("leader %v", l)
			}
			return nil
		})
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		apiEventually(t, 20*time.Second, "writes after the transfer", func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) < n+20 {
				return fmt.Errorf("%d acked", len(acked))
			}
			return nil
		})
	}
	cancel()
	wg.Wait()
	t.Logf("%d writes acknowledged, %d outcome unknown", len(acked), unknown)
	if len(bounced) > 0 {
		t.Errorf("%d forwarded writes were bounced instead of sent on to the new leader; first: %s", len(bounced), bounced[0])
	}
	got := map[string]bool{}
	for _, j := range apiListAll(t, c.Nodes[0].URL, apiHead, url.Values{"stream": {stream}, "limit": {"1000"}}) {
		got[j.ID] = true
	}
	for _, id := range acked {
		if !got[id] {
			t.Errorf("acknowledged job %s is missing", id)
		}
	}
}

type coreExtraNode struct {
	url, raft, gossip string
	cmd               *exec.Cmd
	done              chan struct{}
}

func (n *coreExtraNode) kill() {
	select {
	case <-n.done:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL) // by pid
	<-n.done
}

// coreStartExtraNode starts an empty node that waits to be added by
// `spine cluster join`; it is SIGKILLed (by pid) at the end of the test.
func coreStartExtraNode(t *testing.T, id string, env ...string) *coreExtraNode {
	t.Helper()
	dir := t.TempDir()
	httpAddr := apiFreeAddr(t)
	n := &coreExtraNode{url: "http://" + httpAddr, raft: apiFreeAddr(t), gossip: apiFreeAddr(t), done: make(chan struct{})}
	logPath := filepath.Join(dir, id+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(binary, "serve", "--node-id", id, "--data-dir", filepath.Join(dir, "data"), "--http-addr", httpAddr,
		"--raft-addr", n.raft, "--gossip-addr", n.gossip)
	n.cmd.Env = append(os.Environ(), "HEAD_TOKEN="+apiHead, "LEFT_CLAW_TOKEN="+apiLeft, "RIGHT_CLAW_TOKEN="+apiRight, "SPINE_LOG_LEVEL=debug")
	n.cmd.Env = append(n.cmd.Env, env...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = testcluster.NodeProcAttr()
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.done) }()
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			if len(data) > 6000 {
				data = data[len(data)-6000:]
			}
			t.Logf("==== %s ====\n%s", id, data)
		}
	})
	apiEventually(t, 20*time.Second, id+" answers /health", func() error {
		r, err := apiRequest("GET", n.url+"/health", "", nil)
		if err != nil {
			return err
		}
		if r.Status != 200 {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	return n
}
