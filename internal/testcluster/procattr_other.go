//go:build !linux

package testcluster

import "syscall"

// NodeProcAttr: only Linux has a parent-death signal. Elsewhere the nodes are
// stopped by Stop (by pid) and outlive the starter only if it is killed first.
func NodeProcAttr() *syscall.SysProcAttr { return nil }
