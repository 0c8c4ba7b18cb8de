package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// verifyWAL checks every segment of the raft-wal log in dir before the log
// is opened. raft-wal writes each fsync'ed batch followed by a commit frame
// holding the CRC-32C of the batch's bytes, but it checks that CRC only for
// the tail segment's last batch (a torn write after a crash); a byte that
// rots in an older batch would be read back, replayed and sent to peers as
// if it were the entry written. So every batch of every segment is checked
// here, and a node whose log fails refuses to start, naming the file:
// its log can no longer be trusted, and the cure is a dead disk's: remove
// the node from the configuration, empty its data directory and add it
// again (docs/operations.md).
//
// The last batch of the newest segment is left to raft-wal: a mismatch
// there is what a crash during its write leaves, and raft-wal drops it.
//
// Segment layout (raft-wal v0.4 segment/format.go): a 32-byte file header
// (magic 0x58eb6b0d), then frames, each an 8-byte header (type; 3 zero
// bytes; length, or the CRC for a commit frame) and, for entry and index
// frames, the payload padded to 8 bytes. A zero header ends the written
// part. A batch's CRC covers the bytes from the end of the previous commit
// frame (from the file header for the first) to its commit frame.
func verifyWAL(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return err
	}
	sort.Strings(names) // by base index: the newest (the tail) last
	for i, name := range names {
		if err := verifySegment(name, i == len(names)-1); err != nil {
			return fmt.Errorf("%w: raft log file %s: %v; this node's log cannot be trusted: remove it from the cluster (spine cluster remove), empty its data directory and add it again, as for a dead disk (docs/operations.md)", ErrCorruptStore, name, err)
		}
	}
	return nil
}

const (
	walFileHeader  = 32
	walMagic       = 0x58eb6b0d
	walFrameHeader = 8
	walEntry       = 1
	walIndex       = 2
	walCommit      = 3
	walMaxFrame    = 64 << 20
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

func verifySegment(path string, tail bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	head := make([]byte, walFileHeader)
	if _, err := io.ReadFull(r, head); err != nil {
		if tail && errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil // a tail segment created but never written
		}
		return fmt.Errorf("file header: %v", err)
	}
	if binary.LittleEndian.Uint32(head[0:4]) != walMagic {
		if tail && allZero(head) {
			return nil
		}
		return fmt.Errorf("bad magic in the file header")
	}
	crc := crc32.Update(0, walCRC, head)
	var (
		offset   int64 = walFileHeader
		failedAt int64 = -1
	)
	hdr := make([]byte, walFrameHeader)
	buf := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			break // the end of the file
		}
		typ := hdr[0]
		if typ == 0 && allZero(hdr) {
			break // the end of what was written
		}
		if failedAt >= 0 {
			// A batch failed its CRC and more was written after it: not a
			// torn last write but a damaged one.
			return fmt.Errorf("the batch ending at offset %d does not match its CRC", failedAt)
		}
		switch typ {
		case walCommit:
			want := binary.LittleEndian.Uint32(hdr[4:8])
			if crc != want {
				failedAt = offset
				if !tail {
					return fmt.Errorf("the batch ending at offset %d does not match its CRC", offset)
				}
			}
			crc = 0
		case walEntry, walIndex:
			n := int64(binary.LittleEndian.Uint32(hdr[4:8]))
			if n > walMaxFrame {
				if tail {
					return nil // garbage after the last commit of the tail: raft-wal's to drop
				}
				return fmt.Errorf("a frame at offset %d claims %d bytes", offset, n)
			}
			crc = crc32.Update(crc, walCRC, hdr)
			left := n + int64((walFrameHeader-n%walFrameHeader)%walFrameHeader)
			for left > 0 {
				m := min(left, int64(len(buf)))
				if _, err := io.ReadFull(r, buf[:m]); err != nil {
					if tail {
						return nil // cut short after the last commit
					}
					return fmt.Errorf("a frame at offset %d is cut short", offset)
				}
				crc = crc32.Update(crc, walCRC, buf[:m])
				left -= m
			}
			offset += n + int64((walFrameHeader-n%walFrameHeader)%walFrameHeader)
		default:
			if tail {
				// Past what can be parsed: raft-wal's own read of the tail
				// refuses it if it is not an unfinished last write.
				return nil
			}
			return fmt.Errorf("an unknown frame type %d at offset %d", typ, offset)
		}
		offset += walFrameHeader
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
