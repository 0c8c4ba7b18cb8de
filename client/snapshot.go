package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
)

// snapshotTimeout bounds one snapshot transfer.
const snapshotTimeout = time.Hour

// SnapshotSave asks the cluster for a backup: a snapshot the leader takes
// of every committed entry, as an archive (meta, state, SHA-256 sums; see
// internal/snapfile), written to w as it arrives. It returns the bytes
// written. Any node may be asked: a follower passes the request to the
// leader.
func (c *Client) SnapshotSave(ctx context.Context, w io.Writer) (int64, error) {
	resp, _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/snapshot", write: true, minTimeout: snapshotTimeout})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("client: snapshot download: %w", err)
	}
	return n, nil
}

// SnapshotRestore replaces the whole cluster's state with a backup's: open
// gives the archive (size bytes), anew for each try. The leader checks the
// archive's checksums and that its state restores before it installs it.
func (c *Client) SnapshotRestore(ctx context.Context, open func() (io.ReadCloser, error), size int64) (*api.SnapshotRestored, error) {
	req := &request{method: http.MethodPut, path: "/v1/snapshot", write: true, open: open, size: size,
		contentType: "application/x-tar", minTimeout: snapshotTimeout}
	resp, _, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.SnapshotRestored
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("client: snapshot restore answer: %w", err)
	}
	return &out, nil
}
