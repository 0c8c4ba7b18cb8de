package systemtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// scriptBasePort finds a BASE_PORT for scripts/run-cluster.sh with nodes
// nodes: node i uses BASE_PORT+10(i-1) (HTTP), +1 (Raft), +2 (gossip,
// TCP and UDP), all free now.
func scriptBasePort(t *testing.T, nodes int) int {
	t.Helper()
	free := func(port int, udp bool) bool {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false
		}
		l.Close()
		if udp {
			u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				return false
			}
			u.Close()
		}
		return true
	}
	for tries := 0; tries < 100; tries++ {
		addr, err := testcluster.FreePort(true)
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		base, _ := strconv.Atoi(p)
		ok := base+10*nodes < 65535
		for i := 0; ok && i < nodes; i++ {
			ok = free(base+10*i, false) && free(base+10*i+1, false) && free(base+10*i+2, true)
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range for run-cluster.sh")
	return 0
}

// lockedBuffer collects a process's output for a test to poll.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// make run's script, on real processes: it prints and records each node's
// pid and the command that started it; that command, run again, restarts
// a killed node, which rejoins; the CLI run from the directory holding
// ./data/tokens.env needs no token; a node killed under the script is
// reported and the others keep running; SIGTERM stops the nodes and the
// script exits 0.
func TestRunClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(strings.TrimSpace(string(root)), "scripts", "run-cluster.sh")
	dir := t.TempDir()
	base := scriptBasePort(t, 2)
	url1 := fmt.Sprintf("http://127.0.0.1:%d", base)

	var out lockedBuffer
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BIN="+binary, "DATA=data", "NODES=2", "BASE_PORT="+strconv.Itoa(base),
		"SPINE_ADDRS=", "SPINE_TOKEN=")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = testcluster.NodeProcAttr() // dies with the test process
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var extra *exec.Cmd // the node this test restarts itself, in its own process group
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("run-cluster.sh output:\n%s", tail(out.String(), 6000))
		}
		// Whatever happened: the script stops what it started, then the
		// test stops anything left (by pid) and its own restarted node.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		for _, n := range readNodesTxt(t, dir) {
			if processAlive(n.pid) {
				_ = syscall.Kill(n.pid, syscall.SIGKILL)
			}
		}
		if extra != nil && extra.Process != nil {
			_ = syscall.Kill(-extra.Process.Pid, syscall.SIGTERM)
			_ = extra.Wait()
		}
	})

	apiEventually(t, 90*time.Second, "run-cluster.sh to report the cluster up", func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("the script exited early: %v", err)
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C stops all nodes.") {
			return errors.New("not up yet")
		}
		return nil
	})
	printed := out.String()
	nodes := readNodesTxt(t, dir)
	if len(nodes) != 2 {
		t.Fatalf("nodes.txt: %+v", nodes)
	}
	for _, n := range nodes {
		if !processAlive(n.pid) || !strings.Contains(printed, fmt.Sprintf("%s  pid %d", n.id, n.pid)) || !strings.Contains(printed, n.cmd) ||
			!strings.Contains(n.cmd, "serve --node-id "+n.id+" ") {
			t.Fatalf("%s: pid %d alive=%v, command %q; printed:\n%s", n.id, n.pid, processAlive(n.pid), n.cmd, printed)
		}
	}
	if !strings.Contains(printed, "export SPINE_ADDRS="+url1+",") || !strings.Contains(printed, " SPINE_TOKEN=head-") {
		t.Fatalf("the Try lines do not say what to export:\n%s", printed)
	}

	// From the directory holding data/tokens.env, without SPINE_TOKEN.
	status := func() (int, string, string) {
		c := exec.Command(binary, "cluster", "status", "--addr", url1, "-o", "table", "--retry-for", "5s")
		c.Dir = dir
		c.Env = append(os.Environ(), "SPINE_ADDRS=", "SPINE_TOKEN=")
		var o, e bytes.Buffer
		c.Stdout, c.Stderr = &o, &e
		err := c.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	if code, o, e := status(); code != 0 || !strings.Contains(o, "n2") {
		t.Fatalf("cluster status with the token from ./data/tokens.env: exit %d\n%s%s", code, o, e)
	}

	// Kill n2: the script says so and keeps n1.
	n2 := nodes[1]
	if err := syscall.Kill(n2.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 20*time.Second, "the script to report n2's death", func() error {
		if !strings.Contains(out.String(), fmt.Sprintf("n2 (pid %d) was killed (SIGKILL)", n2.pid)) {
			return errors.New("not reported")
		}
		return nil
	})
	if !processAlive(nodes[0].pid) {
		t.Fatal("n1 died with n2")
	}

	// n2's command restarts it; it rejoins with its data.
	logf, err := os.Create(filepath.Join(dir, "n2-restarted.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	extra = exec.Command("bash", "-c", n2.cmd)
	extra.Stdout, extra.Stderr = logf, logf
	extra.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := extra.Start(); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the restarted n2 to be alive in n1's status", func() error {
		code, o, e := status()
		for _, l := range strings.Split(o, "\n") {
			if f := strings.Fields(l); code == 0 && len(f) > 2 && f[0] == "n2" && f[2] == "true" {
				return nil
			}
		}
		return fmt.Errorf("exit %d\n%s%s", code, o, e)
	})

	// SIGTERM (what make passes on, like Ctrl-C): n1 stops, exit 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("the script exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the script did not exit within 30s of SIGTERM")
	}
	if processAlive(nodes[0].pid) {
		t.Fatal("n1 still runs after the script stopped")
	}
	if !strings.Contains(out.String(), "stopped 1 nodes") {
		t.Fatalf("no stop report:\n%s", tail(out.String(), 2000))
	}
}

type scriptNode struct {
	id  string
	pid int
	cmd string
}

// readNodesTxt parses DATA/nodes.txt (ID PID COMMAND lines).
func readNodesTxt(t *testing.T, dir string) []scriptNode {
	f, err := os.Open(filepath.Join(dir, "data", "nodes.txt"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []scriptNode
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		parts := strings.SplitN(l, " ", 3)
		if len(parts) != 3 {
			t.Errorf("nodes.txt line %q", l)
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil {
			t.Errorf("nodes.txt line %q: %v", l, err)
			continue
		}
		out = append(out, scriptNode{id: parts[0], pid: pid, cmd: parts[2]})
	}
	return out
}
