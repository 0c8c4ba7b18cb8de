package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster/clusterinfo"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/snapfile"
)

// Backups (GET and PUT /v1/snapshot, head): the leader takes or installs
// them; any other node passes the request to the leader as a stream, since
// a snapshot may be far larger than a request body the API holds in memory.

// snapshotter is what the backup routes need of the cluster (*cluster.Node).
type snapshotter interface {
	SaveSnapshot(ctx context.Context) (*clusterinfo.SnapshotMeta, io.ReadCloser, error)
	RestoreSnapshot(r io.Reader, size int64, index uint64, timeout time.Duration) (uint64, error)
}

func (s *Server) snapshotter() (snapshotter, error) {
	sn, ok := s.cluster.(snapshotter)
	if !ok {
		return nil, errorf(http.StatusNotImplemented, api.CodeInternal, "this node cannot take or restore snapshots")
	}
	return sn, nil
}

// noDeadlines lifts the server's read and write timeouts for one transfer.
func noDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

func (s *Server) handleSnapshotSave(w http.ResponseWriter, r *http.Request, c *call) error {
	sn, err := s.snapshotter()
	if err != nil {
		return err
	}
	if !s.cluster.IsLeader() {
		return s.proxyToLeader(w, r)
	}
	meta, rc, err := sn.SaveSnapshot(r.Context())
	if errors.Is(err, clusterinfo.ErrNotLeader) {
		return s.proxyToLeader(w, r)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	noDeadlines(w)
	h := w.Header()
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="spine-%d.snap"`, meta.Index))
	h.Set(api.HeaderIndex, strconv.FormatUint(meta.Index, 10))
	info := snapfile.Meta{Index: meta.Index, Term: meta.Term, Size: meta.Size, RaftVersion: meta.Version,
		TakenAt: time.Now().UTC(), NodeID: s.cluster.ID()}
	if err := snapfile.Write(w, info, rc); err != nil {
		// The answer has begun: the archive ends without its checksums,
		// which every reader refuses.
		s.logger.Warn("snapshot download cut short", "error", err)
		return nil
	}
	s.logger.Info("snapshot saved for a backup", "index", meta.Index, "bytes", meta.Size)
	return nil
}

func (s *Server) handleSnapshotRestore(w http.ResponseWriter, r *http.Request, c *call) error {
	sn, err := s.snapshotter()
	if err != nil {
		return err
	}
	if !s.cluster.IsLeader() {
		return s.proxyToLeader(w, r)
	}
	noDeadlines(w)
	// The archive is checked whole before anything changes: its checksums,
	// then that its state restores (a state machine that fails to restore
	// a snapshot raft installed stops the node).
	tmp, err := os.CreateTemp(s.cfg.SnapshotDir, "restore-*.state")
	if err != nil {
		return fmt.Errorf("snapshot restore: temporary file: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	body := &countingBody{r: r.Body}
	meta, err := snapfile.Read(body, tmp)
	if err != nil {
		if body.err != nil {
			var mbe *http.MaxBytesError
			if errors.As(body.err, &mbe) {
				return body.err
			}
			s.logger.Debug("snapshot upload not read", "error", body.err)
			return bodyReadError(r, body.n, body.err)
		}
		if errors.Is(err, snapfile.ErrCorrupt) {
			return badRequest("%v", err)
		}
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sum, err := fsm.SummarizeSnapshot(io.NopCloser(tmp))
	if err != nil {
		return badRequest("the snapshot's checksums match but its state does not restore: %v", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	idx, err := sn.RestoreSnapshot(tmp, meta.Size, max(meta.Index, sum.Index), 30*time.Second)
	if errors.Is(err, clusterinfo.ErrNotLeader) {
		return errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "leadership changed before the restore began; nothing was restored, send it again")
	}
	if errors.Is(err, clusterinfo.ErrOutcomeUnknown) {
		return errorf(http.StatusServiceUnavailable, api.CodeOutcomeUnknown, "the leader installed the snapshot but lost leadership before "+
			"the other nodes confirmed it, so the cluster may or may not hold the restored state: read it (GET /v1/state) before restoring again")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.SnapshotRestored{Restored: true, Index: idx,
		Snapshot: api.SnapshotInfo{Index: meta.Index, Term: meta.Term, Size: meta.Size, TakenAt: meta.TakenAt, NodeID: meta.NodeID},
		Contents: ContentsOf(sum)})
	return nil
}

// ContentsOf is the API's view of a state summary.
func ContentsOf(sum fsm.Summary) api.SnapshotContents {
	out := api.SnapshotContents{Index: sum.Index, Jobs: map[string]int{}, Streams: sum.Streams, Sessions: sum.Sessions,
		Blobs: sum.Blobs, Gateways: sum.Gateways, Workers: sum.Workers, FeedEvents: sum.FeedEvents,
		Registry: sum.Registry, StateHash: sum.StateHash}
	for st, n := range sum.Jobs {
		out.Jobs[string(st)] = n
	}
	return out
}

// proxyToLeader streams the request to the leader and its answer back. A
// request that was already passed on once is not passed again.
func (s *Server) proxyToLeader(w http.ResponseWriter, r *http.Request) error {
	id, addr := s.cluster.Leader()
	if id == "" || addr == "" || id == s.cluster.ID() || r.Header.Get(api.HeaderForwardedBy) != "" {
		return &apiError{Status: http.StatusServiceUnavailable, Code: api.CodeNoLeader,
			Message: "no leader is available (election in progress or quorum lost); retry shortly", Leader: addr}
	}
	target, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("leader address %q: %w", addr, err)
	}
	noDeadlines(w)
	s.metrics.forwarded.Inc()
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(api.HeaderForwardedBy, s.cluster.ID())
		},
		Transport: s.fwd.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: api.CodeOutcomeUnknown,
				Message: "the leader could not be reached or stopped answering: " + err.Error(), Leader: addr})
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(api.HeaderNode, s.cluster.ID())
			return nil
		},
	}
	p.ServeHTTP(w, r)
	return nil
}
