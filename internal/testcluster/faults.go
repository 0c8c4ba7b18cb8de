package testcluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

func (c *Cluster) signal(n *Node, sig syscall.Signal, wait time.Duration) error {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.paused = false
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	// A stopped process acts on SIGTERM only once it runs again: wake a
	// paused node first, so that nothing is left stopped.
	if paused {
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("%s (pid %d) did not exit within %v of %v", n.ID, cmd.Process.Pid, wait, sig)
	}
}

// Pause stops the node's process with SIGSTOP: it keeps its sockets and
// state but answers nothing (a long GC pause, a frozen VM). Resume wakes it;
// Kill, Terminate and Stop wake it too, so no process is left stopped.
func (c *Cluster) Pause(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return fmt.Errorf("pause %s: not started", n.ID)
	}
	select {
	case <-n.exited:
		return fmt.Errorf("pause %s: not running", n.ID)
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", n.ID, err)
	}
	n.paused = true
	c.logf("SIGSTOP %s pid %d", n.ID, n.cmd.Process.Pid)
	return nil
}

// Resume wakes a node stopped by Pause (SIGCONT). Resuming a node that is
// not paused does nothing.
func (c *Cluster) Resume(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.paused {
		return nil
	}
	n.paused = false
	select {
	case <-n.exited:
		return nil
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("resume %s: %w", n.ID, err)
	}
	c.logf("SIGCONT %s pid %d", n.ID, n.cmd.Process.Pid)
	return nil
}

// Paused reports whether the node is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Kill SIGKILLs the node's process and waits for it to be gone.
func (c *Cluster) Kill(n *Node) error {
	c.logf("SIGKILL %s", n.ID)
	return c.signal(n, syscall.SIGKILL, 10*time.Second)
}

// Terminate stops the node gracefully (SIGTERM), SIGKILLing it after 10s.
func (c *Cluster) Terminate(n *Node) error {
	if err := c.signal(n, syscall.SIGTERM, 10*time.Second); err != nil {
		return c.Kill(n)
	}
	return nil
}

// Restart starts a stopped node again from its data dir.
func (c *Cluster) Restart(n *Node) error {
	if n.Running() {
		return fmt.Errorf("%s is running", n.ID)
	}
	return c.launch(n)
}

// RestartWith starts a stopped node again from its data dir, running
// binary from now on (a rolling upgrade's step).
func (c *Cluster) RestartWith(n *Node, binary string) error {
	n.mu.Lock()
	n.binary = binary
	n.mu.Unlock()
	return c.Restart(n)
}
