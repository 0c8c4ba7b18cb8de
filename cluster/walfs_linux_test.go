//go:build linux

package cluster

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestZeroAheadOnlyWhereItHelps: segments are zeroed ahead on ext4 and XFS,
// and left to raft-wal elsewhere (tmpfs here: an fsync there is free).
func TestZeroAheadOnlyWhereItHelps(t *testing.T) {
	wrapped := func(dir string) bool {
		t.Helper()
		f, err := newZeroAheadFS(dir).Create(dir, "seg", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, ok := f.(*zeroAheadFile)
		return ok
	}
	fsType := func(dir string) int64 {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Type)
	}

	checked := 0
	if shm, err := os.MkdirTemp("/dev/shm", "spine-walfs-"); err == nil {
		defer os.RemoveAll(shm)
		if fsType(shm) == unix.TMPFS_MAGIC {
			if wrapped(shm) {
				t.Error("segments on tmpfs are zeroed ahead; they should be left to raft-wal")
			}
			checked++
		}
	}
	if dir := t.TempDir(); fsType(dir) == unix.EXT4_SUPER_MAGIC {
		if !wrapped(dir) {
			t.Error("segments on ext4 are not zeroed ahead")
		}
		checked++
	}
	if checked == 0 {
		t.Skip("neither a tmpfs /dev/shm nor an ext4 temporary directory here")
	}
}
