//go:build linux

// Package timerslack gives a process the Linux timer slack it asks for, on
// every one of its threads (see Apply). A node and the benchmark that shares
// its machine both use it.
package timerslack

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reexecMarker is set in the environment of the image that Apply
// re-executes, so a kernel that does not keep the slack cannot loop us.
const reexecMarker = "SPINE_INTERNAL_TIMER_SLACK_REEXEC"

// Apply gives every thread of this process the timer slack want:
// how late the kernel may fire a timed sleep to batch it with other wake-ups.
//
// Why: the Go runtime's sysmon thread naps 20 µs at a time while the process
// makes blocking syscalls (an fsync'ed Raft append, a loopback send), and a
// spinning scheduler thread naps 3 µs before stealing work. On a node that
// fsyncs every commit that is thousands of wake-ups and context switches a
// second, none of them useful: with 5 ms of slack the same cluster carries
// 20-40% more jobs per second at about 30% less CPU per job, with lower tail
// latency at both light and heavy load (docs/performance.md). Timers the
// node relies on (Raft's 50-500 ms, lease and long-poll deadlines) do not
// notice a few milliseconds.
//
// The slack is a per-thread value that new threads copy from the thread
// that creates them, and Go starts sysmon before any of our code runs. So
// the only way to reach every thread from inside the process is to set it
// on this thread and re-execute the binary (same pid, argv, environment and
// open descriptors): the new image's threads all descend from this one. It
// is called before the node opens anything. When the slack already matches
// (after the re-exec, or when systemd's TimerSlackNSec= set it) it returns
// at once. want == 0 leaves the inherited slack alone.
//
// It returns only when no re-exec was needed or the re-exec failed.
func Apply(want time.Duration) error {
	if want <= 0 {
		return nil
	}
	reexeced := os.Getenv(reexecMarker) != ""
	os.Unsetenv(reexecMarker)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := current()
	if err != nil {
		return err
	}
	if cur == want {
		return nil
	}
	if reexeced {
		return fmt.Errorf("timer slack is %v after re-executing with %v; left as is", cur, want)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(want.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_TIMERSLACK): %w", err)
	}
	env := append(os.Environ(), reexecMarker+"=1")
	err = syscall.Exec(execPath(), os.Args, env)
	// Still here: the exec failed. Put this thread back as it was.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur.Nanoseconds()), 0, 0, 0)
	return fmt.Errorf("re-execute with timer slack %v: %w", want, err)
}

// execPath is the file to re-execute: the path of this very binary. The
// kernel names a process after the file it executes, so re-executing
// /proc/self/exe would show every node as "exe" in ps, top and pkill. If the
// path no longer holds this binary (replaced or deleted since start), it is
// /proc/self/exe, which always does.
func execPath() string {
	const self = "/proc/self/exe"
	p, err := os.Executable()
	if err != nil {
		return self
	}
	onDisk, err1 := os.Stat(p)
	running, err2 := os.Stat(self)
	if err1 != nil || err2 != nil || !os.SameFile(onDisk, running) {
		return self
	}
	return p
}

// current is the calling thread's timer slack. Every thread of a
// process that Apply re-executed has the same one.
func current() (time.Duration, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("prctl(PR_GET_TIMERSLACK): %w", err)
	}
	return time.Duration(v), nil
}

// Now reports the timer slack of the thread that asks, for /health.
func Now() time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := current()
	if err != nil {
		return -1
	}
	return d
}
