package crashfs

import (
	"io"
	"os"
	"sort"
	"sync"
	"syscall"
)

// pageSize is the granularity at which unsynced writes are held: a write
// into a page not yet held copies the page's durable bytes first, as a page
// cache does.
const pageSize = 4096

// fileState is the volatile state of one backing file (one inode): what a
// page cache holds for it that has not reached the disk yet.
//
// Invariants: base <= size; every byte of a held page at or past size is
// zero. The file's current content is, for each byte at position p < size:
// the held page's byte if p's page is held, else the backing file's byte if
// p < base, else zero.
type fileState struct {
	key uint64

	mu sync.Mutex
	// fd is the backing file, opened read-write (or read-only when that is
	// refused) for as long as the state lives.
	fd *os.File
	// size is the file's current (logical) size.
	size int64
	// base is how much of the backing file is still the file's content:
	// the backing size when the state was made, lowered by every truncate
	// since the last applied sync.
	base int64
	// pages are the unsynced pages, by page number.
	pages map[int64][]byte
	// sizeChanged: size or base differs from the backing file's size.
	sizeChanged bool
	// pending counts the bytes written (and truncated away or allocated)
	// since the last applied sync; it is what a crash drops.
	pending int64
	// refs counts the open handles on the state.
	refs int
	// gone: the file was unlinked (its last name removed); the state
	// is no longer in the FS's map.
	gone bool
	// closed: fd was closed (crash or unmount); the state is dead.
	closed bool
}

func newFileState(key uint64, fd *os.File) (*fileState, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &st); err != nil {
		return nil, err
	}
	return &fileState{key: key, fd: fd, size: st.Size, base: st.Size}, nil
}

// dirty reports whether anything is held that the backing file lacks.
// Callers hold s.mu.
func (s *fileState) dirty() bool { return len(s.pages) > 0 || s.sizeChanged }

// readBase fills dst with the durable content at off: backing bytes below
// base, zeros past it. Callers hold s.mu.
func (s *fileState) readBase(dst []byte, off int64) error {
	valid := s.base - off
	if valid < 0 {
		valid = 0
	}
	if valid > int64(len(dst)) {
		valid = int64(len(dst))
	}
	n := 0
	for int64(n) < valid {
		m, err := s.fd.ReadAt(dst[n:valid], off+int64(n))
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	clear(dst[n:])
	return nil
}

// page returns the held page pg, making it from the durable content if it
// is not held yet. Callers hold s.mu.
func (s *fileState) page(pg int64) ([]byte, error) {
	if p, ok := s.pages[pg]; ok {
		return p, nil
	}
	p := make([]byte, pageSize)
	if err := s.readBase(p, pg*pageSize); err != nil {
		return nil, err
	}
	// Bytes at or past size are zero (the backing file may hold stale
	// bytes there only below base, and base <= size).
	if s.pages == nil {
		s.pages = map[int64][]byte{}
	}
	s.pages[pg] = p
	return p, nil
}

// read reads the file's current content at off into buf, returning how
// many bytes it filled (0 at or past the end).
func (s *fileState) read(buf []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if off >= s.size {
		return 0, nil
	}
	n := int64(len(buf))
	if off+n > s.size {
		n = s.size - off
	}
	if len(s.pages) == 0 {
		return int(n), s.readBase(buf[:n], off)
	}
	// Runs of pages not held are read from the backing file in one call.
	runStart := int64(-1)
	flush := func(end int64) error {
		if runStart < 0 {
			return nil
		}
		err := s.readBase(buf[runStart-off:end-off], runStart)
		runStart = -1
		return err
	}
	for pos := off; pos < off+n; {
		pg, po := pos/pageSize, pos%pageSize
		chunk := int64(pageSize) - po
		if pos+chunk > off+n {
			chunk = off + n - pos
		}
		if p, ok := s.pages[pg]; ok {
			if err := flush(pos); err != nil {
				return 0, err
			}
			copy(buf[pos-off:pos-off+chunk], p[po:po+chunk])
		} else if runStart < 0 {
			runStart = pos
		}
		pos += chunk
	}
	if err := flush(off + n); err != nil {
		return 0, err
	}
	return int(n), nil
}

// write holds data at off.
func (s *fileState) write(data []byte, off int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pos := off; pos < off+int64(len(data)); {
		pg, po := pos/pageSize, pos%pageSize
		chunk := int64(pageSize) - po
		if rest := off + int64(len(data)) - pos; chunk > rest {
			chunk = rest
		}
		p, err := s.page(pg)
		if err != nil {
			return err
		}
		copy(p[po:po+chunk], data[pos-off:pos-off+chunk])
		pos += chunk
	}
	if end := off + int64(len(data)); end > s.size {
		s.size = end
		s.sizeChanged = true
	}
	s.pending += int64(len(data))
	return nil
}

// truncate sets the size to size, as ftruncate does, held until a sync.
func (s *fileState) truncate(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncateLocked(size)
}

func (s *fileState) truncateLocked(size int64) {
	if size == s.size {
		return
	}
	if size < s.size {
		s.pending += s.size - size
		for pg, p := range s.pages {
			switch {
			case pg*pageSize >= size:
				delete(s.pages, pg)
			case (pg+1)*pageSize > size:
				clear(p[size-pg*pageSize:])
			}
		}
		if size < s.base {
			s.base = size
		}
	} else {
		s.pending += size - s.size
	}
	s.size = size
	s.sizeChanged = true
}

// allocate is fallocate(2): mode 0 extends the size (the new range reads
// as zeros), FALLOC_FL_KEEP_SIZE alone changes nothing a reader can see,
// FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE zeros a range. Other modes are
// not supported.
func (s *fileState) allocate(off, length int64, mode uint32) syscall.Errno {
	const (
		keepSize  = 0x01
		punchHole = 0x02
	)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch mode {
	case 0:
		if end := off + length; end > s.size {
			s.truncateLocked(end)
		}
		return 0
	case keepSize:
		return 0
	case punchHole | keepSize:
		end := off + length
		if end > s.size {
			end = s.size
		}
		for pos := off; pos < end; {
			pg, po := pos/pageSize, pos%pageSize
			chunk := int64(pageSize) - po
			if pos+chunk > end {
				chunk = end - pos
			}
			p, err := s.page(pg)
			if err != nil {
				return errno(err)
			}
			clear(p[po : po+chunk])
			s.pending += chunk
			pos += chunk
		}
		return 0
	}
	return syscall.EOPNOTSUPP
}

// apply writes everything held to the backing file and fsyncs it (when
// fsync is true), returning the bytes written. Afterwards nothing is held.
func (s *fileState) apply(fsync bool) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, nil
	}
	var written int64
	if s.dirty() {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(s.fd.Fd()), &st); err != nil {
			return 0, err
		}
		cur := st.Size
		// Cut stale bytes first (a truncate below the backing size), then
		// set the size; the gap reads as zeros.
		if cur > s.base {
			if err := s.fd.Truncate(s.base); err != nil {
				return 0, err
			}
			cur = s.base
		}
		if cur != s.size {
			if err := s.fd.Truncate(s.size); err != nil {
				return 0, err
			}
		}
		pgs := make([]int64, 0, len(s.pages))
		for pg := range s.pages {
			pgs = append(pgs, pg)
		}
		sort.Slice(pgs, func(i, j int) bool { return pgs[i] < pgs[j] })
		for _, pg := range pgs {
			p := s.pages[pg]
			off := pg * pageSize
			n := int64(pageSize)
			if off+n > s.size {
				n = s.size - off
			}
			if n <= 0 {
				continue
			}
			if _, err := s.fd.WriteAt(p[:n], off); err != nil {
				return written, err
			}
			written += n
		}
	}
	if fsync {
		if err := s.fd.Sync(); err != nil {
			return written, err
		}
	}
	s.pages = nil
	s.base = s.size
	s.sizeChanged = false
	s.pending = 0
	return written, nil
}

// drop forgets everything held (a crash) and closes the backing file,
// returning the bytes dropped.
func (s *fileState) drop() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	dropped := int64(0)
	if s.dirty() {
		dropped = s.pending
	}
	s.pages = nil
	s.closed = true
	_ = s.fd.Close()
	return dropped
}

// currentSize is the file's logical size.
func (s *fileState) currentSize() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	if pe, ok := err.(*os.PathError); ok {
		if e, ok := pe.Err.(syscall.Errno); ok {
			return e
		}
	}
	return syscall.EIO
}
