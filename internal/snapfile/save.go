package snapfile

import (
	"errors"
	"io"
	"os"
)

// A Saver writes an archive as it arrives into a file and checks it on the
// way, as Read does, so a backup is read once: the bytes are written to the
// file and handed to a checker in one pass, not written and then read back.
// The file's dirty pages are sent to disk every writebackChunk bytes while
// the archive arrives (Linux; writeback_linux.go), so Close's fsync waits
// only for the last of them.
type Saver struct {
	f       *os.File
	pw      *io.PipeWriter
	checked chan checkResult
	n       int64 // bytes written to f
	flushed int64 // bytes whose writeback has started
	err     error // the first failed Write's
	fileErr bool  // and it was the file's, not the check's
}

type checkResult struct {
	meta *Meta
	err  error
}

// writebackChunk is how many written bytes start their writeback at once.
const writebackChunk = 8 << 20

// NewSaver returns a Saver writing to f (at its current offset, which
// should be 0 of an empty file).
func NewSaver(f *os.File) *Saver {
	pr, pw := io.Pipe()
	s := &Saver{f: f, pw: pw, checked: make(chan checkResult, 1)}
	go func() {
		meta, err := Read(pr, io.Discard)
		if err == nil {
			// Read stops at the archive's end marker; what a writer padded
			// after it is read and dropped.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(err) // a failed check fails the next Write
		s.checked <- checkResult{meta, err}
	}()
	return s
}

// Write writes p to the file and to the checker.
func (s *Saver) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.f.Write(p)
	s.n += int64(n)
	if err != nil {
		s.err, s.fileErr = err, true
		return n, err
	}
	if _, err := s.pw.Write(p); err != nil {
		s.err = err
		return n, err
	}
	if s.n-s.flushed >= writebackChunk {
		startWriteback(s.f, s.flushed, s.n-s.flushed)
		s.flushed = s.n
	}
	return n, nil
}

// Close ends the archive and returns its meta once every checksum matched
// and the file is durable (fsync'ed; the file stays open, for the caller
// to close). abort, when set, is why the archive was not received whole:
// the check is then stopped and abort returned.
func (s *Saver) Close(abort error) (*Meta, int64, error) {
	s.pw.CloseWithError(abort)
	r := <-s.checked
	switch {
	case s.fileErr:
		return nil, s.n, s.err
	case abort != nil:
		return nil, s.n, abort
	case r.err != nil:
		return nil, s.n, r.err
	}
	if err := s.f.Sync(); err != nil {
		return nil, s.n, err
	}
	if r.meta == nil {
		return nil, s.n, errors.New("snapfile: archive checked without its meta")
	}
	return r.meta, s.n, nil
}
