//go:build linux

package testcluster

import "syscall"

// NodeProcAttr makes a node die with the process that started it (a test or
// `spine-bench --local`), even if that process is killed before its cleanup.
func NodeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
