package crashfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is go-fuse's loopback node with file data routed through the held
// state: opens return a handle on it, attributes carry its size, truncates
// are held, and removing a file's last name forgets what was held for it.
// Every other operation (mkdir, rename, unlink, ...) is the loopback's and
// reaches the backing directory at once.
type node struct {
	fs.LoopbackNode
	cfs *FS
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
)

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, e := n.LoopbackNode.Lookup(ctx, name, out)
	if e == 0 {
		n.cfs.patchAttr(&out.Attr)
	}
	return ch, e
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, e := n.LoopbackNode.Link(ctx, target, name, out)
	if e == 0 {
		n.cfs.patchAttr(&out.Attr)
	}
	return ch, e
}

// wrap makes a handle of a loopback file; trunc holds a truncate to 0 (the
// O_TRUNC the backing open was not given).
func (n *node) wrap(fh fs.FileHandle, trunc bool) (*handle, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, syscall.EIO
	}
	fd, ok := lf.PassthroughFd()
	if !ok {
		lf.Release(context.Background())
		return nil, syscall.EBADF
	}
	s, err := n.cfs.acquire(fd)
	if err != nil {
		lf.Release(context.Background())
		return nil, errno(err)
	}
	if s != nil && trunc {
		s.truncate(0)
	}
	return &handle{lf: lf, state: s, cfs: n.cfs}, 0
}

func writable(flags uint32) bool { return flags&syscall.O_ACCMODE != syscall.O_RDONLY }

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	trunc := flags&syscall.O_TRUNC != 0 && writable(flags)
	fh, _, e := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	if e != 0 {
		return nil, 0, e
	}
	h, e := n.wrap(fh, trunc)
	if e != 0 {
		return nil, 0, e
	}
	// No FOPEN_KEEP_CACHE: each open drops the kernel's cached pages of
	// the file, which then come from Read (the held state) again.
	return h, 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	trunc := flags&syscall.O_TRUNC != 0
	ch, fh, _, e := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	h, e := n.wrap(fh, trunc)
	if e != 0 {
		return nil, nil, 0, e
	}
	if h.state != nil {
		setSize(&out.Attr, h.state.currentSize())
	}
	return ch, h, 0, 0
}

func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, _, e := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	h, e := n.wrap(fh, false)
	if e != 0 {
		return nil, nil, 0, e
	}
	return ch, h, 0, 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	e := n.LoopbackNode.Getattr(ctx, nil, out)
	if e == 0 {
		n.cfs.patchAttr(&out.Attr)
	}
	return e
}

func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		e := h.lf.Statx(ctx, flags, mask, out)
		if e == 0 && h.state != nil {
			out.Size = uint64(h.state.currentSize())
			out.Blocks = (out.Size + 511) / 512
		}
		return e
	}
	e := n.LoopbackNode.Statx(ctx, nil, flags, mask, out)
	if e == 0 && uint32(out.Mode)&syscall.S_IFMT == syscall.S_IFREG {
		if size, ok := n.cfs.sizeOf(out.Ino); ok {
			out.Size = uint64(size)
			out.Blocks = (out.Size + 511) / 512
		}
	}
	return e
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var inner fs.FileHandle
	var s *fileState
	if h, ok := f.(*handle); ok {
		inner, s = h.lf, h.state
	}
	if size, ok := in.GetSize(); ok {
		if s == nil && inner == nil {
			// truncate(2) by path: hold a reference while the truncate
			// is recorded, so that the state stays in the map.
			var err error
			if s, err = n.cfs.acquirePath(n.backingPath()); err != nil {
				return errno(err)
			}
			if s != nil {
				defer n.cfs.release(s)
			}
		}
		if s != nil {
			s.truncate(int64(size))
			in2 := *in
			in2.Valid &^= fuse.FATTR_SIZE
			in = &in2
		}
	}
	e := n.LoopbackNode.Setattr(ctx, inner, in, out)
	if e != 0 {
		return e
	}
	if s != nil {
		setSize(&out.Attr, s.currentSize())
	} else {
		n.cfs.patchAttr(&out.Attr)
	}
	return 0
}

// lastLink is the inode number of the regular file at p if p is its only
// name.
func lastLink(p string) (uint64, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return 0, false
	}
	return st.Ino, st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Nlink <= 1
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ino, last := lastLink(filepath.Join(n.backingPath(), name))
	e := n.LoopbackNode.Unlink(ctx, name)
	if e == 0 && last {
		n.cfs.forget(ino)
	}
	return e
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var victim uint64
	var replaces bool
	if np, ok := newParent.(*node); ok && flags&fs.RENAME_EXCHANGE == 0 {
		victim, replaces = lastLink(filepath.Join(np.backingPath(), newName))
		if src, ok := lastLink(filepath.Join(n.backingPath(), name)); ok && src == victim {
			replaces = false
		}
	}
	e := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if e == 0 && replaces {
		n.cfs.forget(victim)
	}
	return e
}

// CopyFileRange is refused so that the kernel falls back to reads and
// writes, which go through the held state.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle,
	offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// handle is an open file. For a regular file its data goes through the
// held state; anything else (a fifo, a device) is passed through.
type handle struct {
	lf    *fs.LoopbackFile
	state *fileState // nil: not a regular file
	cfs   *FS
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.state == nil {
		return h.lf.Read(ctx, buf, off)
	}
	n, err := h.state.read(buf, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.state == nil {
		return h.lf.Write(ctx, data, off)
	}
	if err := h.state.write(data, off); err != nil {
		return 0, errno(err)
	}
	return uint32(len(data)), 0
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.state == nil {
		return h.lf.Fsync(ctx, flags)
	}
	return h.cfs.syncState(ctx, h.state)
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.lf.Flush(ctx) }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	e := h.lf.Release(ctx)
	if h.state != nil {
		h.cfs.release(h.state)
	}
	return e
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	e := h.lf.Getattr(ctx, out)
	if e == 0 && h.state != nil {
		setSize(&out.Attr, h.state.currentSize())
	}
	return e
}

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if h.state == nil {
		return h.lf.Allocate(ctx, off, size, mode)
	}
	return h.state.allocate(int64(off), int64(size), mode)
}

// Lseek answers SEEK_DATA and SEEK_HOLE as for a file without holes.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	const seekData, seekHole = 3, 4
	if h.state == nil || (whence != seekData && whence != seekHole) {
		return h.lf.Lseek(ctx, off, whence)
	}
	size := uint64(h.state.currentSize())
	if off >= size {
		return 0, syscall.ENXIO
	}
	if whence == seekData {
		return off, 0
	}
	return size, 0
}
