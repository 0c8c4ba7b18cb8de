//go:build !linux

package main

import "time"

// applyTimerSlack is Linux-only (prctl PR_SET_TIMERSLACK); elsewhere the
// process keeps the operating system's timer behaviour.
func applyTimerSlack(time.Duration) error { return nil }

// timerSlackNow is unknown off Linux.
func timerSlackNow() time.Duration { return -1 }
