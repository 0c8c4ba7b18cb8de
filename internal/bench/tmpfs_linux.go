package bench

import "syscall"

// tmpfsMagic is the f_type statfs(2) reports for tmpfs.
const tmpfsMagic = 0x01021994

// onTmpfs reports whether dir is on a tmpfs, where an fsync writes nothing
// to a disk.
func onTmpfs(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == tmpfsMagic
}
