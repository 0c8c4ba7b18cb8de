// Package snapfile reads and writes Spine's backup files: a tar archive of
// meta.json (what the snapshot is), state.bin (the state machine's snapshot,
// as raft stores it) and SHA256SUMS (the SHA-256 of both, last, so a writer
// streams the archive in one pass). A reader checks every checksum before it
// trusts a byte, and refuses an archive with anything missing, extra or
// altered.
package snapfile

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"
)

// Format is the archive format this package writes and reads.
const Format = 1

const (
	metaName  = "meta.json"
	stateName = "state.bin"
	sumsName  = "SHA256SUMS"
)

// Meta describes a snapshot.
type Meta struct {
	Format int `json:"format"`
	// Index and Term are those of the last log entry the state holds, on
	// the cluster it was taken from.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Size is state.bin's length in bytes.
	Size int64 `json:"size"`
	// RaftVersion is raft's snapshot version of state.bin.
	RaftVersion int `json:"raft_version"`
	// TakenAt is when the leader took it; NodeID which leader.
	TakenAt time.Time `json:"taken_at"`
	NodeID  string    `json:"node_id"`
}

// ErrCorrupt wraps every refusal of an archive.
var ErrCorrupt = errors.New("not a valid Spine snapshot")

func corrupt(format string, a ...interface{}) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
}

// Write writes the archive of meta and state (exactly meta.Size bytes) to w.
func Write(w io.Writer, meta Meta, state io.Reader) error {
	meta.Format = Format
	mb, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	hdr := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: meta.TakenAt, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(metaName, int64(len(mb)))); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	metaSum := sha256.Sum256(mb)
	if err := tw.WriteHeader(hdr(stateName, meta.Size)); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), state)
	if err != nil {
		return err
	}
	if n != meta.Size {
		return fmt.Errorf("snapshot state is %d bytes, its meta says %d", n, meta.Size)
	}
	sums := fmt.Sprintf("%x  %s\n%x  %s\n", metaSum, metaName, h.Sum(nil), stateName)
	if err := tw.WriteHeader(hdr(sumsName, int64(len(sums)))); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, sums); err != nil {
		return err
	}
	return tw.Close()
}

// Read reads an archive from r: it copies state.bin into state as it
// reads, and returns the meta once every checksum matched. On an error,
// what was copied into state must be discarded.
func Read(r io.Reader, state io.Writer) (*Meta, error) {
	tr := tar.NewReader(bufio.NewReaderSize(r, 1<<20))
	var (
		meta     *Meta
		metaSum  []byte
		stateSum []byte
		stateLen int64
		sums     map[string]string
	)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt("%v", err)
		}
		switch h.Name {
		case metaName:
			if meta != nil {
				return nil, corrupt("%s appears twice", metaName)
			}
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return nil, corrupt("%s: %v", metaName, err)
			}
			meta = &Meta{}
			if err := json.Unmarshal(b, meta); err != nil {
				return nil, corrupt("%s: %v", metaName, err)
			}
			s := sha256.Sum256(b)
			metaSum = s[:]
		case stateName:
			if meta == nil || stateSum != nil {
				return nil, corrupt("%s out of place", stateName)
			}
			var hs hash.Hash = sha256.New()
			n, err := io.Copy(io.MultiWriter(state, hs), tr)
			if err != nil {
				return nil, corrupt("%s: %v", stateName, err)
			}
			stateSum, stateLen = hs.Sum(nil), n
		case sumsName:
			b, err := io.ReadAll(io.LimitReader(tr, 64<<10))
			if err != nil {
				return nil, corrupt("%s: %v", sumsName, err)
			}
			sums = map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				sum, name, ok := strings.Cut(line, "  ")
				if !ok {
					return nil, corrupt("%s: bad line %q", sumsName, line)
				}
				sums[name] = sum
			}
		default:
			return nil, corrupt("unexpected file %q", h.Name)
		}
	}
	switch {
	case meta == nil:
		return nil, corrupt("no %s", metaName)
	case stateSum == nil:
		return nil, corrupt("no %s", stateName)
	case sums == nil:
		return nil, corrupt("no %s (the archive is cut short)", sumsName)
	case meta.Format != Format:
		return nil, corrupt("format %d; this build reads format %d", meta.Format, Format)
	case sums[metaName] != hex.EncodeToString(metaSum):
		return nil, corrupt("%s does not match its checksum", metaName)
	case sums[stateName] != hex.EncodeToString(stateSum):
		return nil, corrupt("%s does not match its checksum", stateName)
	case stateLen != meta.Size:
		return nil, corrupt("%s is %d bytes, its meta says %d", stateName, stateLen, meta.Size)
	}
	return meta, nil
}
