// Package testcluster starts real `spine serve` processes on loopback for
// system tests, the failover drill, the chaos workload and benchmarks: it
// builds the binary, picks free ports, bootstraps and joins nodes, kills them
// by pid (SIGKILL or SIGTERM), pauses and resumes them (SIGSTOP, SIGCONT),
// restarts them from their data directories, and checks that the replicas
// converged to the same state ([Cluster.CheckConverged]).
package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spine-queue/spine/internal/netns"
)

// Build compiles ./cmd/spine of the module containing the working directory
// into dir and returns the binary's path. Set SPINE_TEST_RACE=1 to build it
// with the race detector.
func Build(dir string) (string, error) {
	return BuildCommand(dir, "spine")
}

// BuildCommand builds the module's command ./cmd/name into dir (with -race
// when SPINE_TEST_RACE=1) and returns the binary's path.
func BuildCommand(dir, name string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if os.Getenv("SPINE_TEST_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/"+name)...)
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Options configure a cluster. Zero values take defaults.
type Options struct {
	// Binary is the spine executable (see Build). Required.
	Binary string
	// Dir holds each node's data dir and log. Required.
	Dir string
	// Nodes is the number of nodes (default 3).
	Nodes int
	// Env is added to every node's environment (e.g. LEASE_SECONDS).
	Env map[string]string
	// Logf, when set, receives harness progress lines.
	Logf func(format string, args ...interface{})
	// StartTimeout bounds Start (default 60s).
	StartTimeout time.Duration
	// MetricsAddr gives every node a --metrics-addr of its own (a free
	// loopback port; Node.MetricsURL).
	MetricsAddr bool
	// NodeArgs, when set, gives each node (by id: "n1", "n2", ...) extra
	// `spine serve` arguments, such as its --tls-* files.
	NodeArgs func(id string) []string
	// TLS, when set, is how the harness reaches nodes that serve HTTPS
	// (NodeArgs with --tls-*): node URLs are https:// and its requests
	// use this configuration (the cluster CA as root).
	TLS *tls.Config
	// Net, when set, runs node i (0-based) in host i's network namespace of
	// Net, at its address, so that a test can partition the nodes for real
	// (netns.Net.Partition, Cut, Heal). It needs Nodes <= Net.Hosts().
	Net *netns.Net
}

// Tokens used by every cluster this package starts.
const (
	HeadToken  = "test-head-token"
	LeftToken  = "test-left-token"
	RightToken = "test-right-token"
)

// Node is one spine process.
type Node struct {
	ID         string
	URL        string // http://127.0.0.1:port
	MetricsURL string // with Options.MetricsAddr: its /metrics without a token
	HTTPAddr   string
	RaftAddr   string
	GossipAddr string
	DataDir    string
	LogPath    string

	// Host is the node's host in Options.Net (0-based), -1 without one.
	Host int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool   // SIGSTOPped by Pause and not resumed since
	binary string // set by RestartWith: this node's executable from then on
	args   []string
	env    []string
}

// Cluster is a set of spine processes.
type Cluster struct {
	Nodes  []*Node
	opts   Options
	client *http.Client
}

// ports this process has handed out: a port picked by listening on :0 and
// closing is free only until someone binds it, and the kernel may offer the
// same one again (two nodes of one cluster were once given the same gossip
// port), so no port is handed out twice.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// FreePort returns a loopback address free for TCP and, for udp, also for
// UDP on the same port (memberlist binds both), never one it returned
// before in this process.
func FreePort(udp bool) (string, error) {
	for tries := 0; tries < 100; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().(*net.TCPAddr)
		ok := true
		if udp {
			u, err := net.ListenPacket("udp", addr.String())
			if err != nil {
				ok = false
			} else {
				u.Close()
			}
		}
		l.Close()
		portsMu.Lock()
		if ok && !ports[addr.Port] {
			ports[addr.Port] = true
			portsMu.Unlock()
			return addr.String(), nil
		}
		portsMu.Unlock()
	}
	return "", errors.New("testcluster: no free port after 100 tries")
}

func (c *Cluster) logf(format string, args ...interface{}) {
	if c.opts.Logf != nil {
		c.opts.Logf("testcluster: "+format, args...)
	}
}

// Start launches the nodes: the first bootstraps, the rest join it. It
// returns once every node is a voter and a leader serves. A node that exits
// while the cluster forms fails Start at once; if it exited because a port
// was taken meanwhile by another process, Start tries again on new ports.
func Start(opts Options) (*Cluster, error) {
	if opts.Binary == "" || opts.Dir == "" {
		return nil, errors.New("testcluster: Binary and Dir are required")
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.Net != nil && opts.Nodes > opts.Net.Hosts() {
		return nil, fmt.Errorf("testcluster: %d nodes on a network of %d hosts", opts.Nodes, opts.Net.Hosts())
	}
	deadline := time.Now().Add(opts.StartTimeout)
	for attempt := 1; ; attempt++ {
		c, err := startOnce(opts, deadline)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 || time.Now().After(deadline) {
			return nil, err
		}
		if opts.Logf != nil {
			opts.Logf("testcluster: a port was taken by another process; starting again on new ports")
		}
		for i := 1; i <= opts.Nodes; i++ {
			_ = os.RemoveAll(filepath.Join(opts.Dir, fmt.Sprintf("n%d", i)))
			_ = os.Remove(filepath.Join(opts.Dir, fmt.Sprintf("n%d.log", i)))
		}
	}
}

// errPortTaken marks a start that failed because a node could not bind.
var errPortTaken = errors.New("a node could not bind its port")

func startOnce(opts Options, deadline time.Time) (*Cluster, error) {
	c := &Cluster{opts: opts, client: &http.Client{Timeout: 5 * time.Second}}
	scheme := "http://"
	if opts.TLS != nil {
		scheme = "https://"
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = opts.TLS.Clone()
		c.client.Transport = tr
	}
	env := append(os.Environ(),
		"HEAD_TOKEN="+HeadToken, "LEFT_CLAW_TOKEN="+LeftToken, "RIGHT_CLAW_TOKEN="+RightToken,
		"SPINE_LOG_LEVEL=debug")
	for k, v := range opts.Env {
		env = append(env, k+"="+v)
	}
	for i := 1; i <= opts.Nodes; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i), DataDir: filepath.Join(opts.Dir, fmt.Sprintf("n%d", i)),
			LogPath: filepath.Join(opts.Dir, fmt.Sprintf("n%d.log", i)), env: env, Host: -1}
		var err error
		var metricsAddr string
		if opts.Net != nil {
			// A host of its own: every port is free there.
			n.Host = i - 1
			ip := opts.Net.IP(n.Host)
			n.HTTPAddr, n.RaftAddr, n.GossipAddr, metricsAddr = ip+":7100", ip+":7101", ip+":7102", ip+":7103"
		} else {
			if n.HTTPAddr, err = FreePort(false); err != nil {
				return nil, err
			}
			if n.RaftAddr, err = FreePort(false); err != nil {
				return nil, err
			}
			if n.GossipAddr, err = FreePort(true); err != nil {
				return nil, err
			}
		}
		n.URL = scheme + n.HTTPAddr
		n.args = []string{"serve", "--node-id", n.ID, "--data-dir", n.DataDir, "--http-addr", n.HTTPAddr,
			"--raft-addr", n.RaftAddr, "--gossip-addr", n.GossipAddr}
		if opts.MetricsAddr {
			if metricsAddr == "" {
				if metricsAddr, err = FreePort(false); err != nil {
					return nil, err
				}
			}
			n.MetricsURL = "http://" + metricsAddr + "/metrics"
			n.args = append(n.args, "--metrics-addr", metricsAddr)
		}
		if opts.NodeArgs != nil {
			n.args = append(n.args, opts.NodeArgs(n.ID)...)
		}
		if i == 1 {
			n.args = append(n.args, "--bootstrap")
		} else {
			n.args = append(n.args, "--join", c.Nodes[0].URL)
		}
		c.Nodes = append(c.Nodes, n)
	}
	// A cluster that never forms is stopped, and its nodes' logs go into
	// the error: the caller has no Cluster to ask them from.
	failed := func(err error) (*Cluster, error) {
		c.Stop()
		logs := c.Logs(8000)
		if strings.Contains(logs, "address already in use") {
			err = fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, fmt.Errorf("%w\n%s", err, logs)
	}
	// wait polls cond until it holds, the deadline passes, or a launched
	// node exits (it will not come back by itself).
	wait := func(cond func() error) error {
		for {
			for _, n := range c.Nodes {
				if n.launched() && !n.Running() {
					return &exitedError{n.ID}
				}
			}
			err := cond()
			if err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("not within %v: %w", opts.StartTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i, n := range c.Nodes {
		if err := c.launch(n); err != nil {
			return failed(err)
		}
		if i == 0 {
			if err := wait(func() error {
				if c.Leader() == nil {
					return errors.New("no leader")
				}
				return nil
			}); err != nil {
				return failed(err)
			}
		}
	}
	if err := wait(func() error { return c.votersAlive(opts.Nodes) }); err != nil {
		return failed(err)
	}
	c.logf("cluster of %d up: %v", opts.Nodes, c.URLs())
	return c, nil
}

// exitedError stops a wait: a node exited while the cluster formed.
type exitedError struct{ id string }

func (e *exitedError) Error() string { return e.id + " exited while the cluster was forming" }

func (c *Cluster) launch(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	bin := c.opts.Binary
	if n.binary != "" {
		bin = n.binary
	}
	cmd := exec.Command(bin, n.args...)
	if c.opts.Net != nil {
		cmd = c.opts.Net.Command(n.Host, bin, n.args...)
	}
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = NodeProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.paused = cmd, exited, false
	c.logf("started %s pid %d (%s)", n.ID, cmd.Process.Pid, n.URL)
	return nil
}

// Pid is the node's process id, or 0 if it is not running.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	select {
	case <-n.exited:
		return 0
	default:
		return n.cmd.Process.Pid
	}
}

// launched reports whether the node's process was ever started.
func (n *Node) launched() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Running reports whether the node's process is alive.
func (n *Node) Running() bool { return n.Pid() != 0 }

// Stop terminates every node that is still running (a paused one is woken
// first).
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func(n *Node) { defer wg.Done(); _ = c.Terminate(n) }(n)
	}
	wg.Wait()
}

// URLs are the HTTP base URLs of all nodes.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL
	}
	return out
}

// Logs returns the last max bytes of every node's log, for failure reports.
func (c *Cluster) Logs(max int) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		data, _ := os.ReadFile(n.LogPath)
		if len(data) > max {
			data = data[len(data)-max:]
		}
		fmt.Fprintf(&b, "==== %s (%s) ====\n%s\n", n.ID, n.LogPath, data)
	}
	return b.String()
}

// Eventually calls fn every interval until it returns nil or timeout
// passes, returning fn's last error.
func Eventually(timeout, interval time.Duration, fn func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for {
		if err = fn(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %w", timeout, err)
		case <-time.After(interval):
		}
	}
}
