package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	spine "github.com/spine-queue/spine"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/devconfig"
)

// runCommand is spine run (seed 004 §14.1): it uses the cluster SPINE_ADDRS
// (or --addr, or spine.yml's port on 127.0.0.1) names when it answers, else
// starts a local one under --data; purges in the background; then starts a
// watcher for the stream the user picks, or for every active stream of
// --session.
func runCommand(env *cliEnv, g *clientFlags) *cobra.Command {
	var (
		config, data, session string
		nodes                 int
	)
	cmd := &cobra.Command{
		Use:     "run",
		Short:   "Use (or start) the cluster, purge in the background, and start watchers (pick a stream, or --session)",
		GroupID: "devq",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&config, "config", devconfig.FileName, "the project's spine.yml (for the port of a local cluster)")
	fs.StringVar(&data, "data", "data", "where a local cluster keeps its data, tokens and lock")
	fs.IntVar(&nodes, "nodes", 3, "nodes of a local cluster (1 for a laptop)")
	fs.StringVar(&session, "session", "", "start a watcher for every active stream of this session")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		port := devconfig.DefaultPort
		if cfg, err := devconfig.Load(config); err == nil && cfg.Server.Port > 0 {
			port = cfg.Server.Port
		}
		addrs := g.addrs
		if len(addrs) == 0 {
			addrs = splitCSV(env.getenv("SPINE_ADDRS"))
		}
		if len(addrs) == 0 {
			addrs = []string{fmt.Sprintf("http://127.0.0.1:%d", port)}
		}
		token := g.token
		if token == "" {
			token = env.getenv("SPINE_TOKEN")
		}
		if token == "" {
			// The local cluster's head token, when an earlier spine run made one.
			token = headToken(filepath.Join(data, "tokens.env"))
		}
		startedHere := false
		if !answers(env.ctx, addrs) {
			started, head, err := startLocal(env, data, nodes, port)
			if err != nil {
				fmt.Fprintf(env.stderr, "spine: %v\n", err)
				return exitCodeError(exitError)
			}
			addrs, startedHere = started, true
			if token == "" {
				token = head
			}
			remember(env, data)
		} else {
			fmt.Fprintf(env.stdout, "Using the cluster at %s\n", strings.Join(addrs, ", "))
		}
		cl, err := client.New(addrs, append(g.tlsOptions(env), client.WithToken(token), client.WithTimeout(g.timeout))...)
		if err != nil {
			return &usageError{cmd, err.Error()}
		}
		// The startup purge, in the background: the leader's hook does it too.
		go func() { _, _ = cl.TaskPurge(context.WithoutCancel(env.ctx), "") }()

		st, err := cl.DevStatus(env.ctx)
		if err != nil {
			fmt.Fprintf(env.stderr, "spine: %v\n", err)
			return exitCodeError(exitCode(err))
		}
		var watch []*client.Stream
		if session != "" {
			for _, s := range st.Streams {
				if s.Session == session {
					watch = append(watch, s)
				}
			}
			if len(watch) == 0 {
				fmt.Fprintf(env.stderr, "spine: session %s has no active stream\n", session)
				return exitCodeError(exitNotFound)
			}
			fmt.Fprintf(env.stdout, "\nStarting watchers for session '%s':\n", session)
		} else {
			s, err := pickStream(env, st)
			if errors.Is(err, errNothingToWatch) {
				nothingToWatch(env, g, data, addrs, startedHere)
				return nil
			}
			if err != nil {
				fmt.Fprintf(env.stderr, "spine: %v\n", err)
				return exitCodeError(exitUsage)
			}
			watch = []*client.Stream{s}
		}
		script := filepath.Join(data, "spine-watcher.sh")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(script, spine.WatcherScript, 0o755); err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		for _, s := range watch {
			fmt.Fprintf(env.stdout, "\n[%s] Starting watcher...\n", s.Name)
			if strings.TrimSpace(s.Instructions) == "" {
				fmt.Fprintf(env.stdout, "[%s] (no instructions)\n", s.Name)
			}
			for _, l := range strings.Split(strings.TrimSpace(s.Instructions), "\n") {
				if l != "" {
					fmt.Fprintf(env.stdout, "[%s] %s\n", s.Name, l)
				}
			}
			fmt.Fprintf(env.stdout, "[%s] %d queued tasks\n", s.Name, s.Queued)
			pid, err := startWatcher(script, s.Name, self, addrs, token)
			if err != nil {
				fmt.Fprintf(env.stderr, "spine: watcher of %s: %v\n", s.Name, err)
				return exitCodeError(exitError)
			}
			if err := recordWatcher(data, watcher{Stream: s.Name, PID: pid}); err != nil {
				fmt.Fprintf(env.stderr, "spine: note: the watcher of %s (pid %d) was not recorded (%v); 'spine stop --stream %s' stops it\n", s.Name, pid, err, s.Name)
			}
		}
		remember(env, data)
		fmt.Fprintf(env.stdout, "\nReady. Open an agent terminal for each stream (docs/WORKER_PLAYBOOK.md); 'spine stop' stops them.\n")
		return nil
	}
	return cmd
}

// remember records data as a data dir spine run used here, for spine stop.
func remember(env *cliEnv, data string) {
	if err := rememberRunDir(env, data); err != nil {
		fmt.Fprintf(env.stderr, "spine: note: could not record the data dir %s for spine stop (%v); 'spine stop --data %s' stops what runs there\n", data, err, data)
	}
}

// errNothingToWatch: no active session has an active stream.
var errNothingToWatch = errors.New("no active session with an active stream")

// nothingToWatch tells the user, when there is no stream to watch, how to
// create one with the cluster spine run uses: the commands to run, with
// the address and token they need when the defaults would not find them,
// and, when this run started the cluster, that it keeps running for them
// and how to stop it.
func nothingToWatch(env *cliEnv, g *clientFlags, data string, addrs []string, startedHere bool) {
	w := env.stdout
	fmt.Fprintln(w, "\nNo session to watch yet: create a session and a stream, then run spine run again:")
	var vars []string
	if env.getenv("SPINE_ADDRS") == "" && strings.Join(addrs, ",") != defaultAddr {
		vars = append(vars, "SPINE_ADDRS="+strings.Join(addrs, ","))
	}
	if g.token == "" && env.getenv("SPINE_TOKEN") == "" && filepath.Clean(data) != filepath.Dir(localTokensFile) {
		vars = append(vars, fmt.Sprintf("SPINE_TOKEN=$(sed -n 's/^HEAD_TOKEN=//p' %s)", shellQuote(filepath.Join(data, "tokens.env"))))
	}
	if len(vars) > 0 {
		fmt.Fprintf(w, "  export %s\n", strings.Join(vars, " "))
	}
	fmt.Fprintln(w, "  spine session create NAME")
	fmt.Fprintln(w, "  spine stream create STREAM --session NAME --instructions \"what to do; done when\"")
	if startedHere {
		stop := "spine stop"
		if filepath.Clean(data) != "data" {
			stop += " --data " + shellQuote(data)
		}
		fmt.Fprintf(w, "The local cluster keeps running for that; '%s' stops it.\n", stop)
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// answers reports whether any of addrs answers /health within 2 s.
func answers(ctx context.Context, addrs []string) bool {
	for _, a := range addrs {
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(a, "/")+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

// pickStream asks the user for a session with queued tasks, then one of its
// streams (seed 004 §14.1).
func pickStream(env *cliEnv, st *client.DevStatus) (*client.Stream, error) {
	in := bufio.NewReader(env.stdin)
	bySession := map[string][]*client.Stream{}
	for _, s := range st.Streams {
		bySession[s.Session] = append(bySession[s.Session], s)
	}
	// The sessions with a stream to watch; those with queued tasks, if any.
	var sessions, queued []string
	count := map[string]int{}
	for _, ses := range st.Sessions {
		if len(bySession[ses.Name]) == 0 {
			continue
		}
		sessions = append(sessions, ses.Name)
		for _, s := range bySession[ses.Name] {
			count[ses.Name] += s.Queued
		}
		if count[ses.Name] > 0 {
			queued = append(queued, ses.Name)
		}
	}
	if len(sessions) == 0 {
		return nil, errNothingToWatch
	}
	if len(queued) > 0 {
		sessions = queued
		fmt.Fprintln(env.stdout, "\nSessions with queued tasks:")
		for i, ses := range sessions {
			fmt.Fprintf(env.stdout, "  %d. %s (%d streams, %d queued tasks)\n", i+1, ses, len(bySession[ses]), count[ses])
		}
	} else {
		fmt.Fprintln(env.stdout, "\nSessions (nothing queued):")
		for i, ses := range sessions {
			fmt.Fprintf(env.stdout, "  %d. %s (%d streams, nothing queued)\n", i+1, ses, len(bySession[ses]))
		}
	}
	i, err := choose(env, in, "Select session", len(sessions))
	if err != nil {
		return nil, err
	}
	streams := bySession[sessions[i]]
	if len(streams) == 0 {
		return nil, fmt.Errorf("session %s has no active stream", sessions[i])
	}
	fmt.Fprintf(env.stdout, "\nStreams in '%s':\n", sessions[i])
	for k, s := range streams {
		fmt.Fprintf(env.stdout, "  %d. %s (%d queued)\n", k+1, s.Name, s.Queued)
	}
	k, err := choose(env, in, "Select stream", len(streams))
	if err != nil {
		return nil, err
	}
	return streams[k], nil
}

func choose(env *cliEnv, in *bufio.Reader, prompt string, n int) (int, error) {
	for tries := 0; tries < 3; tries++ {
		fmt.Fprintf(env.stdout, "\n%s: ", prompt)
		line, err := in.ReadString('\n')
		if v, perr := strconv.Atoi(strings.TrimSpace(line)); perr == nil && v >= 1 && v <= n {
			return v - 1, nil
		}
		if err != nil {
			return 0, errors.New("no choice made (use --session to pick without questions)")
		}
		fmt.Fprintf(env.stdout, "  (a number from 1 to %d)\n", n)
	}
	return 0, errors.New("no valid choice")
}

// startLocal starts a local cluster of n nodes under data (ports from
// port), as make run does, detached from this process, and waits for a
// leader. Its tokens are data/tokens.env; data/spine.lock holds the nodes'
// pids, and a live lock refuses a second start.
func startLocal(env *cliEnv, data string, n, port int) (addrs []string, head string, err error) {
	if n < 1 {
		return nil, "", errors.New("--nodes must be at least 1")
	}
	lock := filepath.Join(data, "spine.lock")
	if b, err := os.ReadFile(lock); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, _ := strconv.Atoi(f); pid > 0 && processAlive(pid) {
				return nil, "", fmt.Errorf("a local cluster started by spine run is still running (pid %d, %s) but does not answer; 'spine stop' stops it", pid, lock)
			}
		}
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", err
	}
	tokens, err := localTokens(filepath.Join(data, "tokens.env"))
	if err != nil {
		return nil, "", err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	var pids []string
	for i := 1; i <= n; i++ {
		hp, raft, gossip := port+(i-1)*10, port+(i-1)*10+1, port+(i-1)*10+2
		addrs = append(addrs, fmt.Sprintf("http://127.0.0.1:%d", hp))
		args := []string{"serve", "--node-id", fmt.Sprintf("n%d", i), "--data-dir", filepath.Join(data, fmt.Sprintf("n%d", i)),
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", hp), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", raft),
			"--gossip-addr", fmt.Sprintf("127.0.0.1:%d", gossip)}
		if i == 1 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", addrs[0])
		}
		logf, err := os.OpenFile(filepath.Join(data, fmt.Sprintf("n%d.log", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, "", err
		}
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), tokens...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		logf.Close()
		if err != nil {
			return nil, "", err
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
		_ = cmd.Process.Release()
	}
	if err := os.WriteFile(lock, []byte(strings.Join(pids, " ")+"\n"), 0o644); err != nil {
		return nil, "", err
	}
	head = headToken(filepath.Join(data, "tokens.env"))
	fmt.Fprintf(env.stdout, "Starting a local %d-node cluster on %s (data in %s, tokens in %s)\n", n, addrs[0], data, filepath.Join(data, "tokens.env"))
	deadline := time.Now().Add(30 * time.Second)
	for !answers(env.ctx, addrs[:1]) || !hasLeader(env.ctx, addrs[0]) {
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("the local cluster did not come up in 30 s; see %s/n1.log", data)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return addrs, head, nil
}

func hasLeader(ctx context.Context, addr string) bool {
	cl, err := client.New([]string{addr}, client.WithTimeout(2*time.Second))
	if err != nil {
		return false
	}
	h, err := cl.Health(ctx, addr)
	return err == nil && h.LeaderID != ""
}

// localTokens reads path's KEY=VALUE lines, writing fresh tokens first when
// it does not exist.
func localTokens(path string) ([]string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		gen := func(prefix string) string {
			b := make([]byte, 18)
			_, _ = rand.Read(b)
			return prefix + "-" + base64.RawURLEncoding.EncodeToString(b)
		}
		content := fmt.Sprintf("HEAD_TOKEN=%s\nLEFT_CLAW_TOKEN=%s\nRIGHT_CLAW_TOKEN=%s\n", gen("head"), gen("left"), gen("right"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && strings.Contains(l, "=") {
			out = append(out, l)
		}
	}
	return out, nil
}

// headToken returns the HEAD_TOKEN of a tokens file, or "".
func headToken(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "HEAD_TOKEN="); ok {
			return v
		}
	}
	return ""
}
