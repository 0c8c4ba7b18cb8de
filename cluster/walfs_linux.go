//go:build linux

package cluster

import "golang.org/x/sys/unix"

// hasUnwrittenExtents reports whether dir is on a file system whose
// fallocate leaves extents an append must convert, and that rewrites
// blocks in place: ext4 (whose magic ext2 and ext3 share: without
// fallocate they leave a sparse file, where the zeros also take block
// allocation off the appends) and XFS.
func hasUnwrittenExtents(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC:
		return true
	}
	return false
}
