// Package crashfs is a FUSE file system for power-loss tests, in the manner
// of LazyFS: a passthrough over a backing directory that holds every file's
// written data in memory until the file is fsynced, so that a simulated
// power cut ([FS.Crash]) keeps exactly the bytes that were fsynced.
//
// What it keeps and what it drops:
//
//   - File data (write, pwrite, and the size changes of truncate, ftruncate,
//     O_TRUNC and fallocate) is held in memory per file (per inode: every
//     handle on a file shares it) as a page cache would: reads, including
//     through mmap, see it at once. fsync or fdatasync of any handle on the
//     file (or [FS.Sync]) applies the file's held data to the backing file
//     and fsyncs the backing file. [FS.Crash] drops everything held.
//   - Metadata operations (create, mkdir, mknod, symlink, link, rename,
//     unlink, rmdir, chmod, chown, utimes) go straight to the backing
//     directory and are durable at once, with or without an fsync of the
//     directory. This makes the model more durable than a real disk for
//     metadata, never less for data: a file created and never fsynced
//     survives a crash with the size it had at its last fsync (zero if
//     none), as on ext4 with data=ordered after the creating transaction
//     committed; a rename is never undone.
//   - An fsync either happens completely before a crash or not at all: a
//     crash never tears the write-back of one fsync (the application's
//     fsync had not returned in that case anyway). An fsync whose caller
//     is killed before it is applied (see [WithSyncDelay]) applies nothing.
//   - Unsynced writes are dropped all together: a crash never keeps some of
//     them (a real page cache may have written some back, in any order,
//     before the power went). The model checks that what was fsynced
//     survives, not how a program copes with an arbitrary subset of its
//     unsynced writes surviving (LazyFS's torn and reordered writes).
//   - fsync of a directory succeeds and has nothing to apply; sync(2) and
//     syncfs(2) do not reach a FUSE file system, [FS.Sync] is the harness's
//     sync.
//
// [FS.Crash] forgets the kernel's page cache of the mount as well, by
// unmounting and mounting again: it is called once every process using the
// mount is dead (SIGKILLed), and a busy mount makes it fail.
//
// [FS.SetIgnoreSync] makes fsync a lie: it answers success and applies
// nothing, like a disk whose write cache ignores flushes; a control run uses
// it to show that a power-loss test catches the loss.
//
// The backing directory must lie on one file system (held data is keyed by
// the backing inode number). Mounting needs /dev/fuse and the right to mount
// (root, or CAP_SYS_ADMIN): the mount is made directly (no fusermount).
package crashfs

import (
	"errors"
	"time"
)

// ErrUnavailable marks a mount that failed because FUSE cannot be used here
// (no /dev/fuse, no permission to mount). Tests skip on it.
var ErrUnavailable = errors.New("crashfs: FUSE is not available")

// Option configures Mount.
type Option func(*options)

type options struct {
	backingFsync bool
	debug        bool
	syncDelay    time.Duration
}

// WithoutBackingFsync skips the fsync of the backing file when an fsync is
// applied (the bytes are still written to it). The model is unchanged: only
// a real crash of the test machine could tell the difference. Faster on a
// slow disk.
func WithoutBackingFsync() Option { return func(o *options) { o.backingFsync = false } }

// WithSyncDelay makes every fsync take at least d before it is applied,
// like a slow disk: written bytes stay unsynced for longer, so a crash is
// more likely to find some. An fsync whose caller is killed meanwhile (the
// kernel interrupts the request) is abandoned and applies nothing, as a
// flush cut short by the power going.
func WithSyncDelay(d time.Duration) Option { return func(o *options) { o.syncDelay = d } }

// WithDebug logs every FUSE request (go-fuse's debug output) to stderr.
func WithDebug() Option { return func(o *options) { o.debug = true } }

// Stats are the counters of an FS, for reports.
type Stats struct {
	Syncs        int64 // fsyncs applied
	IgnoredSyncs int64 // fsyncs answered without applying (SetIgnoreSync)
	SyncedBytes  int64 // bytes written to backing files by applied fsyncs
	HeldBytes    int64 // bytes written (or truncated, allocated) and not synced now
	HeldFiles    int   // files with something held now
	Crashes      int   // Crash calls
	// DroppedBytes and DroppedFiles are what the last Crash dropped.
	DroppedBytes int64
	DroppedFiles int
}
