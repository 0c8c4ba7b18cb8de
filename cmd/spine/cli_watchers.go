package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spine-queue/spine/internal/durable"
)

// A watcher (scripts/spine-watcher.sh, embedded as spine.WatcherScript)
// keeps the seed's files: /tmp/spine-STREAM.lock holds its pid. spine run
// also records the watchers it starts in DATA/watchers, one "pid stream"
// line each, so spine stop stops this project's watchers and leaves other
// projects' alone.
type watcher struct {
	Stream string `json:"stream"`
	PID    int    `json:"pid"`
}

// watchersFile is the record of the watchers spine run started for the
// project whose data dir is data.
func watchersFile(data string) string { return filepath.Join(data, "watchers") }

// runningWatchers lists the watchers whose lock names a live process.
func runningWatchers() []watcher {
	out := []watcher{}
	locks, _ := filepath.Glob("/tmp/spine-*.lock")
	for _, l := range locks {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 0 || !processAlive(pid) {
			continue
		}
		stream := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(l), "spine-"), ".lock")
		out = append(out, watcher{Stream: stream, PID: pid})
	}
	return out
}

// startWatcher starts the watcher of stream in its own session, detached
// from this process, logging to /tmp/spine-STREAM-watcher.log, and waits
// (up to 10 s) until it holds its stream's lock. It returns its pid (the
// one the lock holds). A watcher that exits first (another one holds the
// lock) is an error with the last line it logged.
func startWatcher(script, stream, self string, addrs []string, token string) (int, error) {
	logPath := "/tmp/spine-" + stream + "-watcher.log"
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command("bash", script, stream)
	cmd.Env = append(os.Environ(), "SPINE="+self, "SPINE_ADDRS="+strings.Join(addrs, ","), "SPINE_TOKEN="+token)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	lock := "/tmp/spine-" + stream + ".lock"
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(lock); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
			return pid, nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			return 0, fmt.Errorf("it exited at start: %s", lines[len(lines)-1])
		case <-deadline:
			return pid, fmt.Errorf("pid %d did not take %s within 10 s", pid, lock)
		case <-tick.C:
		}
	}
}

// recordWatcher adds w to data's record of started watchers.
func recordWatcher(data string, w watcher) error {
	f, err := os.OpenFile(watchersFile(data), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%d %s\n", w.PID, w.Stream); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// projectWatchers returns the running watchers spine run started for
// data: recorded there, and still holding their stream's lock (a pid the
// system reused for something else is no watcher).
func projectWatchers(data string) []watcher {
	f, err := os.Open(watchersFile(data))
	if err != nil {
		return nil
	}
	defer f.Close()
	recorded := map[watcher]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, stream, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if n, err := strconv.Atoi(pid); ok && err == nil {
			recorded[watcher{Stream: stream, PID: n}] = true
		}
	}
	var out []watcher
	for _, w := range runningWatchers() {
		if recorded[w] {
			out = append(out, w)
		}
	}
	return out
}

// stopCommand is spine stop: it stops the watchers spine run started for
// this project (--data's record; --all: every watcher on this machine, as
// the seed's stop did; --stream: that stream's watcher, wherever it came
// from) and, without --stream, the local cluster spine run started (--data's
// lock). Without --data it stops what spine run started from this
// directory: under ./data and under every --data spine run was given here
// (runDirs). A stopped watcher leaves its DATA/watchers record. Running
// tasks stay running, queued stay queued.
func stopCommand(env *cliEnv) *cobra.Command {
	var (
		stream, data string
		all          bool
	)
	cmd := &cobra.Command{
		Use:     "stop",
		Short:   "Stop this project's watchers (or --stream's, or --all on this machine) and the local cluster spine run started",
		GroupID: "devq",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream != "" && all {
				return &usageError{cmd, "--stream and --all exclude each other"}
			}
			dirs := []string{data}
			if !cmd.Flags().Changed("data") {
				dirs = runDirs(env, data)
			}
			var targets []watcher
			switch {
			case stream != "":
				for _, w := range runningWatchers() {
					if w.Stream == stream {
						targets = append(targets, w)
					}
				}
			case all:
				targets = runningWatchers()
			default:
				for _, d := range dirs {
					targets = append(targets, projectWatchers(d)...)
				}
			}
			stopped := 0
			for _, w := range targets {
				if err := syscall.Kill(w.PID, syscall.SIGTERM); err != nil {
					fmt.Fprintf(env.stderr, "spine: watcher of %s (pid %d): %v\n", w.Stream, w.PID, err)
					continue
				}
				// It has exited (and freed its lock) before we say so, so a
				// spine run right after can start the stream's watcher again.
				if !lockFreed(w, 10*time.Second) {
					fmt.Fprintf(env.stderr, "spine: the watcher of %s (pid %d) still holds its lock 10 s after SIGTERM\n", w.Stream, w.PID)
					continue
				}
				fmt.Fprintf(env.stdout, "stopped the watcher of %s (pid %d)\n", w.Stream, w.PID)
				stopped++
			}
			// The records keep only the watchers still running.
			for _, d := range dirs {
				if err := pruneWatchers(d); err != nil {
					fmt.Fprintf(env.stderr, "spine: %s: %v\n", watchersFile(d), err)
				}
			}
			if stream != "" {
				if stopped == 0 {
					fmt.Fprintf(env.stderr, "spine: no watcher of %s runs here\n", stream)
					return exitCodeError(exitNotFound)
				}
				return nil
			}
			for _, d := range dirs {
				lock := filepath.Join(d, "spine.lock")
				if b, err := os.ReadFile(lock); err == nil {
					for _, f := range strings.Fields(string(b)) {
						if pid, _ := strconv.Atoi(f); pid > 0 && processAlive(pid) {
							if syscall.Kill(pid, syscall.SIGTERM) == nil {
								fmt.Fprintf(env.stdout, "stopped node pid %d\n", pid)
								stopped++
							}
						}
					}
					_ = os.Remove(lock)
				}
			}
			forgetRunDirs(env, dirs)
			if stopped == 0 {
				nothingRuns(env, dirs, cmd.Flags().Changed("data"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&stream, "stream", "", "stop only this stream's watcher")
	cmd.Flags().BoolVar(&all, "all", false, "stop every watcher on this machine, not only this project's")
	cmd.Flags().StringVar(&data, "data", "data", "the project's data dir (its watcher record and local cluster lock); without it, ./data and every --data spine run was given in this directory")
	return cmd
}

// nothingRuns says that spine stop found nothing to stop, where it looked,
// and what else runs on this machine.
func nothingRuns(env *cliEnv, dirs []string, dataGiven bool) {
	where := strings.Join(dirs, ", ")
	fmt.Fprintf(env.stdout, "nothing started by spine run is running under %s\n", where)
	if !dataGiven {
		fmt.Fprintf(env.stdout, "(spine run given --data in another directory? 'spine stop --data DIR' stops what it started)\n")
	}
	if ws := runningWatchers(); len(ws) > 0 {
		var names []string
		for _, w := range ws {
			names = append(names, fmt.Sprintf("%s (pid %d)", w.Stream, w.PID))
		}
		fmt.Fprintf(env.stdout, "watchers running on this machine: %s; spine stop --stream NAME stops one, spine stop --all every one\n", strings.Join(names, ", "))
	}
}

// pruneWatchers rewrites data's record of started watchers with only those
// still running, and removes it when none is.
func pruneWatchers(data string) error {
	path := watchersFile(data)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	keep := projectWatchers(data)
	if len(keep) == 0 {
		return os.Remove(path)
	}
	var b strings.Builder
	for _, w := range keep {
		fmt.Fprintf(&b, "%d %s\n", w.PID, w.Stream)
	}
	return durable.WriteFile(path, []byte(b.String()), 0o644)
}

// runsFile is the per-user record of the data dirs spine run used, one
// "DIR<TAB>DATA" line each (absolute paths): $XDG_STATE_HOME/spine/runs,
// else ~/.local/state/spine/runs; "" when neither is set.
func runsFile(env *cliEnv) string {
	if d := env.getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "spine", "runs")
	}
	if h := env.getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "spine", "runs")
	}
	return ""
}

type runDir struct{ cwd, data string }

func readRuns(path string) []runDir {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []runDir
	for _, l := range strings.Split(string(b), "\n") {
		if cwd, data, ok := strings.Cut(l, "\t"); ok && cwd != "" && data != "" {
			out = append(out, runDir{cwd, data})
		}
	}
	return out
}

func writeRuns(path string, runs []runDir) error {
	if len(runs) == 0 {
		err := os.Remove(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "%s\t%s\n", r.cwd, r.data)
	}
	return durable.WriteFile(path, []byte(b.String()), 0o600)
}

// rememberRunDir records that spine run, in the current directory, used
// data (so that a plain spine stop there finds what it started). Only a
// data dir other than ./data needs it.
func rememberRunDir(env *cliEnv, data string) error {
	path := runsFile(env)
	cwd, err := os.Getwd()
	if path == "" || err != nil {
		return err
	}
	abs, err := filepath.Abs(data)
	if err != nil || abs == filepath.Join(cwd, "data") {
		return err
	}
	runs := readRuns(path)
	for _, r := range runs {
		if r.cwd == cwd && r.data == abs {
			return nil
		}
	}
	return writeRuns(path, append(runs, runDir{cwd, abs}))
}

// runDirs is where spine stop run in the current directory looks: data
// and every data dir spine run used here, as spine run named them.
func runDirs(env *cliEnv, data string) []string {
	dirs := []string{data}
	cwd, err := os.Getwd()
	path := runsFile(env)
	if err != nil || path == "" {
		return dirs
	}
	abs, _ := filepath.Abs(data)
	for _, r := range readRuns(path) {
		if r.cwd == cwd && r.data != abs {
			dirs = append(dirs, r.data)
		}
	}
	return dirs
}

// forgetRunDirs drops from the per-user record the data dirs of dirs used
// from the current directory in which nothing spine run started is left.
func forgetRunDirs(env *cliEnv, dirs []string) {
	path := runsFile(env)
	cwd, err := os.Getwd()
	if path == "" || err != nil {
		return
	}
	done := map[string]bool{}
	for _, d := range dirs {
		abs, _ := filepath.Abs(d)
		_, lockErr := os.Stat(filepath.Join(d, "spine.lock"))
		_, wErr := os.Stat(watchersFile(d))
		done[abs] = lockErr != nil && wErr != nil
	}
	runs := readRuns(path)
	var keep []runDir
	for _, r := range runs {
		if r.cwd != cwd || !done[r.data] {
			keep = append(keep, r)
		}
	}
	if len(keep) != len(runs) {
		_ = writeRuns(path, keep)
	}
}

// lockFreed waits up to d for w's lock to no longer name it (the watcher
// removes it as it exits; a killed one leaves it, naming a dead pid).
func lockFreed(w watcher, d time.Duration) bool {
	lock := "/tmp/spine-" + w.Stream + ".lock"
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile(lock)
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(w.PID) || !processAlive(w.PID) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
