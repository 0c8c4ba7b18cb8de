package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// recoveryFigs is what the largest size measured of backups and failures.
// Times are seconds.
type recoveryFigs struct {
	Queued int `json:"queued"`
	// SaveSeconds is `spine snapshot save FILE` (download, fsync, check);
	// TransferSeconds a raw GET /v1/snapshot read to its end.
	SaveSeconds     float64 `json:"snapshot_save_s"`
	SnapshotBytes   int64   `json:"snapshot_bytes"`
	TransferSeconds float64 `json:"snapshot_transfer_s"`
	TransferBytes   int64   `json:"snapshot_transfer_bytes"`
	// RestoreSeconds is `spine snapshot restore FILE` until it answered;
	// RestoreSyncSeconds until a leader's commit index was applied on
	// every node after it.
	RestoreSeconds     float64 `json:"snapshot_restore_s"`
	RestoreSyncSeconds float64 `json:"snapshot_restore_all_nodes_s"`
	RestoreError       string  `json:"snapshot_restore_error,omitempty"`
	QueuedAfterRestore int     `json:"queued_after_restore"`
	// A follower killed (SIGKILL) and started again: until it answers
	// /health, and until it has applied the leader's commit index.
	Follower            string  `json:"follower"`
	FollowerUpSeconds   float64 `json:"follower_up_s"`
	FollowerSyncSeconds float64 `json:"follower_in_sync_s"`
	// The leader killed: until a create through another node succeeds;
	// then the old leader started again, until it is in sync.
	Leader               string  `json:"leader"`
	LeaderKillSeconds    float64 `json:"leader_kill_unavailable_s"`
	NewLeader            string  `json:"new_leader"`
	OldLeaderSyncSeconds float64 `json:"old_leader_in_sync_s"`
	// Every node killed and started again: until a create succeeds, and
	// until every node is in sync.
	FullRestartWriteSeconds float64 `json:"full_restart_first_write_s"`
	FullRestartSyncSeconds  float64 `json:"full_restart_in_sync_s"`
	QueuedAfter             int     `json:"queued_after"`
}

// recovery measures, in order: snapshot save and transfer, a restore of
// that snapshot (every node then holds a snapshot of the whole state), a
// follower's restart, a leader kill and a full restart.
func (s *scaleRun) recovery(ctx context.Context, queued int) (*recoveryFigs, error) {
	r := &recoveryFigs{Queued: queued}
	c := s.lc.c
	l, err := s.leader(ctx, 30*time.Second)
	if err != nil {
		return r, err
	}
	file := filepath.Join(s.lc.dir, "scale.snap")
	t0 := time.Now()
	if _, err := s.cli(ctx, "snapshot", "save", file, "--addr", c.Nodes[l].URL); err != nil {
		return r, err
	}
	r.SaveSeconds = round3(time.Since(t0).Seconds())
	if st, err := os.Stat(file); err == nil {
		r.SnapshotBytes = st.Size()
	}
	s.printf("[recovery] spine snapshot save: %.2fs, %.1f MB\n", r.SaveSeconds, float64(r.SnapshotBytes)/1e6)

	if r.TransferSeconds, r.TransferBytes, err = s.rawSnapshot(ctx, l); err != nil {
		return r, err
	}
	s.printf("[recovery] GET /v1/snapshot to its end: %.2fs, %.1f MB\n", r.TransferSeconds, float64(r.TransferBytes)/1e6)

	// One try: a refused restore is reported, not sent again. The cluster
	// must then still come back to one leader and nodes in sync.
	t0 = time.Now()
	out, err := s.cli(ctx, "snapshot", "restore", file, "--addr", c.Nodes[l].URL)
	r.RestoreSeconds = round3(time.Since(t0).Seconds())
	var restored struct {
		Index uint64 `json:"index"`
	}
	if err == nil {
		if err = json.Unmarshal(out, &restored); err == nil && restored.Index == 0 {
			err = fmt.Errorf("no index in the answer %.300s", out)
		}
	}
	if err != nil {
		r.RestoreError = err.Error()
		s.printf("[recovery] spine snapshot restore failed after %.2fs: %v\n", r.RestoreSeconds, err)
		if !s.lc.keep {
			s.printf("    (--keep keeps the nodes' logs)\n")
		}
	}
	if _, err := s.inSync(ctx, 3*time.Minute); err != nil {
		return r, fmt.Errorf("after the restore: %w", err)
	}
	r.RestoreSyncSeconds = round3(time.Since(t0).Seconds())
	if q, err := s.queuedAnywhere(ctx); err == nil {
		r.QueuedAfterRestore = q
	}
	s.printf("[recovery] spine snapshot restore: answered after %.2fs, every node in sync with a leader after %.2fs, %s queued\n",
		r.RestoreSeconds, r.RestoreSyncSeconds, thousands(r.QueuedAfterRestore))

	if l, err = s.leader(ctx, 30*time.Second); err != nil {
		return r, err
	}
	f := c.Nodes[(l+1)%len(c.Nodes)]
	if len(c.Nodes) > 1 {
		r.Follower = f.ID
		if err := c.Kill(f); err != nil {
			return r, err
		}
		t0 = time.Now()
		if err := c.Restart(f); err != nil {
			return r, err
		}
		up, err := s.upAndInSync(ctx, (l+1)%len(c.Nodes), t0)
		r.FollowerUpSeconds, r.FollowerSyncSeconds = round3(up.Seconds()), round3(time.Since(t0).Seconds())
		if err != nil {
			return r, fmt.Errorf("follower %s after its restart: %w", f.ID, err)
		}
		s.printf("[recovery] follower %s killed and started: answers after %.2fs, in sync after %.2fs\n", f.ID, r.FollowerUpSeconds, r.FollowerSyncSeconds)

		old := c.Nodes[l]
		r.Leader = old.ID
		if err := c.Kill(old); err != nil {
			return r, err
		}
		t0 = time.Now()
		n, err := s.firstWrite(ctx, time.Minute)
		r.LeaderKillSeconds = round3(time.Since(t0).Seconds())
		if err != nil {
			return r, fmt.Errorf("after the leader's kill: %w", err)
		}
		if nl, err := s.leader(ctx, 10*time.Second); err == nil {
			r.NewLeader = c.Nodes[nl].ID
		}
		s.printf("[recovery] leader %s killed: a create succeeded through %s after %.2fs (new leader %s)\n", old.ID, c.Nodes[n].ID, r.LeaderKillSeconds, r.NewLeader)
		t0 = time.Now()
		if err := c.Restart(old); err != nil {
			return r, err
		}
		_, err = s.upAndInSync(ctx, l, t0)
		r.OldLeaderSyncSeconds = round3(time.Since(t0).Seconds())
		if err != nil {
			return r, fmt.Errorf("old leader %s after its restart: %w", old.ID, err)
		}
		s.printf("[recovery] old leader %s started again: in sync after %.2fs\n", old.ID, r.OldLeaderSyncSeconds)
	}

	for _, n := range c.Nodes {
		if err := c.Kill(n); err != nil {
			return r, err
		}
	}
	t0 = time.Now()
	for _, n := range c.Nodes {
		if err := c.Restart(n); err != nil {
			return r, err
		}
	}
	if _, err := s.firstWrite(ctx, 3*time.Minute); err != nil {
		return r, fmt.Errorf("after the full restart: %w", err)
	}
	r.FullRestartWriteSeconds = round3(time.Since(t0).Seconds())
	if _, err := s.inSync(ctx, 3*time.Minute); err != nil {
		return r, fmt.Errorf("after the full restart: %w", err)
	}
	r.FullRestartSyncSeconds = round3(time.Since(t0).Seconds())
	s.printf("[recovery] every node killed and started: first create after %.2fs, all in sync after %.2fs\n", r.FullRestartWriteSeconds, r.FullRestartSyncSeconds)
	r.QueuedAfter, err = s.queuedAnywhere(ctx)
	return r, err
}

// queuedAnywhere is jobs.queued of the leader's GET /v1/state, the leader
// waited for.
func (s *scaleRun) queuedAnywhere(ctx context.Context) (int, error) {
	l, err := s.leader(ctx, 30*time.Second)
	if err != nil {
		return 0, err
	}
	return s.queued(ctx, l)
}

// cli runs the node binary's CLI against the local cluster as head and
// returns its standard output.
func (s *scaleRun) cli(ctx context.Context, args ...string) ([]byte, error) {
	args = append(args, "--token", testcluster.HeadToken, "--timeout", "5m", "--retry-for", "0", "-o", "json")
	cmd := exec.CommandContext(ctx, s.binary, args...)
	cmd.Env = append(os.Environ(), "SPINE_ADDRS=", "SPINE_TOKEN=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String() + " " + stdout.String())
		return nil, fmt.Errorf("spine %s %s: %v: %s", args[0], args[1], err, msg)
	}
	return stdout.Bytes(), nil
}

// rawSnapshot reads GET /v1/snapshot of node to its end and discards it.
func (s *scaleRun) rawSnapshot(ctx context.Context, node int) (float64, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.lc.c.Nodes[node].URL+"/v1/snapshot", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", scaleHead)
	hc := &http.Client{Timeout: 5 * time.Minute}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return 0, 0, fmt.Errorf("GET /v1/snapshot: status %d: %s", resp.StatusCode, b)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, n, fmt.Errorf("GET /v1/snapshot: %w", err)
	}
	return round3(time.Since(t0).Seconds()), n, nil
}

// upAndInSync waits until node answers /health and the cluster is in sync;
// it returns when the node first answered (from t0).
func (s *scaleRun) upAndInSync(ctx context.Context, node int, t0 time.Time) (time.Duration, error) {
	var up time.Duration
	for i := 0; i < 100000 && time.Since(t0) < 3*time.Minute; i++ {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.health(hctx, node)
		cancel()
		if err == nil {
			up = time.Since(t0)
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
	if up == 0 {
		return 0, fmt.Errorf("%s does not answer /health", s.lc.c.Nodes[node].ID)
	}
	_, err := s.inSync(ctx, 3*time.Minute)
	return up, err
}

// firstWrite tries a create through each running node in turn, each with a
// one-second timeout, until one succeeds; it returns that node's index.
func (s *scaleRun) firstWrite(ctx context.Context, max time.Duration) (int, error) {
	t0 := time.Now()
	var last error
	for i := 0; i < 100000 && time.Since(t0) < max; i++ {
		for n, node := range s.lc.c.Nodes {
			if !node.Running() {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := s.createOne(wctx, n)
			cancel()
			if err == nil {
				return n, nil
			}
			last = err
		}
		sleepCtx(ctx, 20*time.Millisecond)
		if err := ctx.Err(); err != nil {
			return -1, err
		}
	}
	return -1, fmt.Errorf("no create succeeded within %v: %v", max, last)
}
