// Package durable writes files that survive a crash whole: the bytes are
// on disk before the file takes its name, and the name is on disk before
// the write returns.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, of mode perm, so that a crash at any
// point leaves the old file or the new one, never a part, and concurrent
// writers the whole of one of theirs: through a temporary file of its own
// in the same directory, fsync'ed, renamed over path, and the directory
// fsync'ed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing to remove after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs dir: the names created, renamed or removed in it are on
// disk once it returns.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
