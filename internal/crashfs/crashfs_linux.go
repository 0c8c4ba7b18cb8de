package crashfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted crash-simulating file system.
type FS struct {
	mountpoint string
	backing    string
	opts       options

	// opMu serialises Crash, Unmount and remounts.
	opMu sync.Mutex

	mu      sync.Mutex // guards states and server
	states  map[uint64]*fileState
	server  *fuse.Server
	mounted bool

	ignoreSync   atomic.Bool
	waitingSyncs atomic.Int64 // fsyncs in their WithSyncDelay wait
	syncs        atomic.Int64
	ignoredSyncs atomic.Int64
	syncedBytes  atomic.Int64

	statMu           sync.Mutex
	crashes          int
	lastDroppedBytes int64
	lastDroppedFiles int
}

// Mount mounts a crash-simulating passthrough of backingDir at mountpoint
// (both are created if missing) and serves it from this process until
// Unmount.
func Mount(mountpoint, backingDir string, opts ...Option) (*FS, error) {
	o := options{backingFsync: true}
	for _, fn := range opts {
		fn(&o)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	bd, err := filepath.Abs(backingDir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{mp, bd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	f := &FS{mountpoint: mp, backing: bd, opts: o, states: map[uint64]*fileState{}}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Mountpoint is where the FS is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// BackingDir is the directory holding the durable state.
func (f *FS) BackingDir() string { return f.backing }

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return err
	}
	root := &fs.LoopbackRoot{Path: f.backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, parent *fs.Inode, name string, st *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, cfs: f}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	timeout := time.Second
	server, err := fs.Mount(f.mountpoint, root.RootNode, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			AllowOther:        true,
			FsName:            "crashfs:" + f.backing,
			Name:              "crashfs",
			Debug:             f.opts.debug,
			DisableXAttrs:     true,
		},
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
	})
	if err != nil {
		if isUnavailable(err) {
			return fmt.Errorf("%w: mount %s: %v", ErrUnavailable, f.mountpoint, err)
		}
		return fmt.Errorf("crashfs: mount %s: %w", f.mountpoint, err)
	}
	f.mu.Lock()
	f.server, f.mounted = server, true
	f.mu.Unlock()
	return nil
}

// isUnavailable: the mount failed for want of FUSE or of the right to
// mount (go-fuse's direct mount returns the syscall's errno).
func isUnavailable(err error) bool {
	for _, e := range []error{syscall.EPERM, syscall.EACCES, syscall.ENODEV, syscall.ENOENT, syscall.ENXIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unmount unmounts the kernel mount and waits for the server to stop. It
// retries while the mount is busy (a killed process's files are closed
// asynchronously) for up to 10 s, then detaches it lazily and reports the
// failure.
func (f *FS) unmount() error {
	f.mu.Lock()
	server, mounted := f.server, f.mounted
	f.mu.Unlock()
	if !mounted {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for {
		if err = server.Unmount(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Unmount(f.mountpoint, syscall.MNT_DETACH)
			err = fmt.Errorf("crashfs: unmount %s: %w (detached lazily)", f.mountpoint, err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.mu.Lock()
	f.mounted = false
	f.mu.Unlock()
	return err
}

// dropAll forgets every held byte and closes every backing file.
func (f *FS) dropAll() (bytes int64, files int) {
	f.mu.Lock()
	states := f.states
	f.states = map[uint64]*fileState{}
	f.mu.Unlock()
	for _, s := range states {
		if n := s.drop(); n > 0 {
			bytes += n
			files++
		}
	}
	return bytes, files
}

// Crash simulates a power cut: every byte not fsynced is dropped, and the
// kernel's page cache for the mount is forgotten (the FS is unmounted and
// mounted again, so mmap readers see only the durable bytes afterwards).
// Call it only when no process has a file or directory of the mount open
// (kill them first): the unmount waits up to 10 s for the mount to be
// released and fails otherwise.
func (f *FS) Crash() error {
	f.opMu.Lock()
	defer f.opMu.Unlock()
	if err := f.unmount(); err != nil {
		return err
	}
	bytes, files := f.dropAll()
	f.statMu.Lock()
	f.crashes++
	f.lastDroppedBytes, f.lastDroppedFiles = bytes, files
	f.statMu.Unlock()
	return f.mount()
}

// SetIgnoreSync, while on, makes fsync answer success without applying
// anything (a disk that lies about flushing). What was written stays held
// (readable) until a crash drops it, or until an fsync after it is
// switched off again applies it.
func (f *FS) SetIgnoreSync(on bool) { f.ignoreSync.Store(on) }

// Sync applies everything held to the backing files, as sync(2) does
// (nothing while SetIgnoreSync is on).
func (f *FS) Sync() error {
	f.mu.Lock()
	states := make([]*fileState, 0, len(f.states))
	for _, s := range f.states {
		states = append(states, s)
	}
	f.mu.Unlock()
	var errs []error
	for _, s := range states {
		if err := f.syncState(context.Background(), s); err != 0 {
			errs = append(errs, fmt.Errorf("crashfs: sync inode %d: %w", s.key, err))
		}
	}
	return errors.Join(errs...)
}

// Unmount unmounts the FS. Whatever is held and not synced is discarded,
// as by Crash (call Sync first for a clean shutdown). It is safe to call
// more than once.
func (f *FS) Unmount() error {
	f.opMu.Lock()
	defer f.opMu.Unlock()
	err := f.unmount()
	f.dropAll()
	return err
}

// Close is Unmount.
func (f *FS) Close() error { return f.Unmount() }

// Stats returns the counters.
func (f *FS) Stats() Stats {
	st := Stats{Syncs: f.syncs.Load(), IgnoredSyncs: f.ignoredSyncs.Load(), SyncedBytes: f.syncedBytes.Load()}
	f.mu.Lock()
	for _, s := range f.states {
		s.mu.Lock()
		if s.dirty() {
			st.HeldBytes += s.pending
			st.HeldFiles++
		}
		s.mu.Unlock()
	}
	f.mu.Unlock()
	f.statMu.Lock()
	st.Crashes, st.DroppedBytes, st.DroppedFiles = f.crashes, f.lastDroppedBytes, f.lastDroppedFiles
	f.statMu.Unlock()
	return st
}

// syncState applies s (an fsync of its file). An fsync whose caller was
// interrupted (killed) before it was applied applies nothing.
func (f *FS) syncState(ctx context.Context, s *fileState) syscall.Errno {
	if d := f.opts.syncDelay; d > 0 {
		f.waitingSyncs.Add(1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
			f.waitingSyncs.Add(-1)
		case <-ctx.Done():
			t.Stop()
			f.waitingSyncs.Add(-1)
			return syscall.EINTR
		}
	}
	if ctx.Err() != nil {
		return syscall.EINTR
	}
	if f.ignoreSync.Load() {
		f.ignoredSyncs.Add(1)
		return 0
	}
	n, err := s.apply(f.opts.backingFsync)
	f.syncedBytes.Add(n)
	f.syncs.Add(1)
	return errno(err)
}

// acquire returns the state of the regular file open as fd (making it if
// needed) with a reference taken for a handle, or nil for anything else.
func (f *FS) acquire(fd int) (*fileState, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil
	}
	return f.stateFor(st.Ino, fmt.Sprintf("/proc/self/fd/%d", fd))
}

// acquirePath is acquire for the regular file at backing path p.
func (f *FS) acquirePath(p string) (*fileState, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil
	}
	return f.stateFor(st.Ino, p)
}

// stateFor returns the live state of inode ino with a reference taken,
// making it by opening path (which names that inode) if there is none.
// The reference is taken under the same lock as the lookup, so a release
// cannot close the state in between.
func (f *FS) stateFor(ino uint64, path string) (*fileState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.states[ino]; ok {
		s.refs++
		return s, nil
	}
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if fd, err = os.OpenFile(path, os.O_RDONLY, 0); err != nil {
			return nil, err
		}
	}
	s, err := newFileState(ino, fd)
	if err != nil {
		fd.Close()
		return nil, err
	}
	s.refs = 1
	f.states[ino] = s
	return s, nil
}

// release drops a handle's reference. A state nobody holds open that has
// nothing held, or whose file is gone, is closed and forgotten.
func (f *FS) release(s *fileState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	s.mu.Lock()
	dirty := s.dirty()
	s.mu.Unlock()
	if dirty && !s.gone {
		return
	}
	if f.states[s.key] == s {
		delete(f.states, s.key)
	}
	s.drop()
}

// forget is called when the last name of inode ino was removed: its held
// data can never be reached again by name.
func (f *FS) forget(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.states[ino]
	if !ok {
		return
	}
	delete(f.states, ino)
	s.gone = true
	if s.refs == 0 {
		s.drop()
	}
}

// sizeOf is the logical size of inode ino if something is held for it.
func (f *FS) sizeOf(ino uint64) (int64, bool) {
	f.mu.Lock()
	s, ok := f.states[ino]
	f.mu.Unlock()
	if !ok {
		return 0, false
	}
	return s.currentSize(), true
}

// patchAttr puts the logical size into attributes read from the backing
// file.
func (f *FS) patchAttr(a *fuse.Attr) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	if size, ok := f.sizeOf(a.Ino); ok {
		setSize(a, size)
	}
}

func setSize(a *fuse.Attr, size int64) {
	a.Size = uint64(size)
	a.Blocks = (a.Size + 511) / 512
}
