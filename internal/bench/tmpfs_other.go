//go:build !linux

package bench

// onTmpfs reports whether dir is on a tmpfs; only Linux is told.
func onTmpfs(string) bool { return false }
