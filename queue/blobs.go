package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/spine-queue/spine/fsm"
)

// blobChunkBytes keeps every blob log entry far below the size that would
// delay Raft heartbeats.
const blobChunkBytes = 256 << 10

// PutBlob stores data under its SHA-256 (hex), in chunk entries and a
// commit entry. Storing bytes already stored answers the stored blob
// (created false).
func (s *Service) PutBlob(ctx context.Context, data []byte, contentType string) (b *fsm.Blob, created bool, index uint64, err error) {
	if int64(len(data)) > s.cfg.MaxBlobBytes {
		return nil, false, 0, &TooLargeError{Message: fmt.Sprintf("blob is larger than the limit of %d bytes", s.cfg.MaxBlobBytes)}
	}
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:])
	if b, err := s.state.Read().Blob(id); err == nil {
		return b, false, s.cluster.AppliedIndex(), nil
	}
	chunks := 0
	for off := 0; off < len(data) || (off == 0 && len(data) == 0); off += blobChunkBytes {
		end := min(off+blobChunkBytes, len(data))
		if _, _, err := s.Propose(ctx, fsm.CmdBlobChunk, &fsm.BlobChunkCommand{BlobID: id, Seq: chunks, Data: data[off:end]}); err != nil {
			return nil, false, 0, err
		}
		chunks++
		if len(data) == 0 {
			break
		}
	}
	res, index, err := s.Propose(ctx, fsm.CmdBlobCommit, &fsm.BlobCommitCommand{Now: s.now(), BlobID: id,
		Size: int64(len(data)), ContentType: contentType, Chunks: chunks})
	if err != nil {
		return nil, false, index, err
	}
	return res.Blob, !res.Duplicate, index, nil
}

// Blob reads a stored blob from this node's state. Blobs are immutable and
// content-addressed, so any node's copy is the copy. chunks streams its
// bytes, in order, from the same view.
func (s *Service) Blob(id string) (b *fsm.Blob, chunks func(fn func([]byte) error) error, err error) {
	rd := s.state.Read()
	b, err = rd.Blob(id)
	if err != nil {
		return nil, nil, err
	}
	return b, func(fn func([]byte) error) error { return rd.BlobChunks(id, fn) }, nil
}
