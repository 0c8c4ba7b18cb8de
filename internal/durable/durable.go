// Package durable writes files that survive a crash whole: the bytes are
// on disk before the file takes its name, and the name is on disk before
// the write returns.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data (mode 0600), so that a crash at any
// point leaves the old file or the new one, never a part: through a
// temporary file in the same directory, fsync'ed, renamed over path, and
// the directory fsync'ed.
func WriteFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing to remove after the rename
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
