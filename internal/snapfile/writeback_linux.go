//go:build linux

package snapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the n bytes at off of f
// to disk, without waiting for them (sync_file_range SYNC_FILE_RANGE_WRITE).
// It promises nothing: an error is the final fsync's to report.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
