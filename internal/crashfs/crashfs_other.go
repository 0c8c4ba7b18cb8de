//go:build !linux

package crashfs

import "fmt"

// FS is a mounted crash-simulating file system (Linux only).
type FS struct{}

// Mount fails with ErrUnavailable: crashfs serves FUSE on Linux only.
func Mount(mountpoint, backingDir string, opts ...Option) (*FS, error) {
	return nil, fmt.Errorf("%w: crashfs runs on Linux only", ErrUnavailable)
}

// Mountpoint is where the FS is mounted.
func (f *FS) Mountpoint() string { return "" }

// BackingDir is the directory holding the durable state.
func (f *FS) BackingDir() string { return "" }

// Crash simulates a power cut.
func (f *FS) Crash() error { return ErrUnavailable }

// SetIgnoreSync makes fsync a lie.
func (f *FS) SetIgnoreSync(on bool) {}

// Sync applies everything held.
func (f *FS) Sync() error { return ErrUnavailable }

// Unmount unmounts the FS.
func (f *FS) Unmount() error { return nil }

// Close is Unmount.
func (f *FS) Close() error { return nil }

// Stats returns the counters.
func (f *FS) Stats() Stats { return Stats{} }
