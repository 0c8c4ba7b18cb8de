//go:build !linux

package timerslack

import "time"

// Apply is Linux-only (prctl PR_SET_TIMERSLACK); elsewhere the
// process keeps the operating system's timer behaviour.
func Apply(time.Duration) error { return nil }

// Now is unknown off Linux.
func Now() time.Duration { return -1 }
