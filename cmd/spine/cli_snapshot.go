package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/httpapi"
	"github.com/spine-queue/spine/internal/durable"
	"github.com/spine-queue/spine/internal/snapfile"
)

var snapshotVerbs = []verb{
	{"save", "FILE", "Back up the cluster: a point-in-time snapshot from the leader, written to FILE once its checksums match (head).", snapshotSave},
	{"inspect", "FILE", "Check a backup's checksums, read its state and show its index, term and contents (reads FILE only).", snapshotInspect},
	{"restore", "FILE", "Replace the running cluster's whole state with a backup's (head).", snapshotRestore},
}

// snapshotReport is what save and inspect print: the contents only when
// the state was read.
type snapshotReport struct {
	File     string                `json:"file"`
	Bytes    int64                 `json:"bytes"`
	Snapshot api.SnapshotInfo      `json:"snapshot"`
	Contents *api.SnapshotContents `json:"contents,omitempty"`
}

func reportOf(path string, size int64, meta *snapfile.Meta) *snapshotReport {
	return &snapshotReport{File: path, Bytes: size,
		Snapshot: api.SnapshotInfo{Index: meta.Index, Term: meta.Term, Size: meta.Size, TakenAt: meta.TakenAt, NodeID: meta.NodeID}}
}

// checkFile checks the archive at path as every reader does (what it holds,
// its checksums and sizes: snapfile.Read), reading it once, in constant
// memory; the state itself is not decoded.
func checkFile(path string) (*snapshotReport, error) { return readArchive(path, io.Discard) }

// readArchive checks the archive at path and writes its state to state.
func readArchive(path string, state io.Writer) (*snapshotReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	meta, err := snapfile.Read(f, state)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reportOf(path, st.Size(), meta), nil
}

// inspectFile checks the archive at path and summarizes its state, which
// it restores (in memory, as a node would). The state is unpacked into a
// temporary file next to it while it is read.
func inspectFile(path string) (*snapshotReport, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".spine-inspect-*")
	if err != nil {
		tmp, err = os.CreateTemp("", "spine-inspect-*")
		if err != nil {
			return nil, err
		}
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	rep, err := readArchive(path, tmp)
	if err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	sum, err := fsm.SummarizeSnapshot(io.NopCloser(tmp))
	if err != nil {
		return nil, fmt.Errorf("%s: the checksums match but the state does not read: %w", path, err)
	}
	contents := httpapi.ContentsOf(sum)
	rep.Contents = &contents
	return rep, nil
}

func snapshotSave(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	inspect := fs.Bool("inspect", false, "also read the state, as spine snapshot inspect does, and show its contents (slower; memory the size of the state)")
	return func(pos []string) int {
		path := pos[0]
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			// Download next to the target, checked as it arrives and made
			// durable, then rename: FILE is never a partial or unchecked
			// backup. The check is the archive's checksums (the state read
			// as well with --inspect).
			tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
			if err != nil {
				return nil, err
			}
			defer os.Remove(tmp.Name())
			sv := snapfile.NewSaver(tmp)
			_, err = cl.SnapshotSave(ctx, sv)
			meta, size, err := sv.Close(err)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if errors.Is(err, snapfile.ErrCorrupt) {
				return nil, fmt.Errorf("the snapshot received does not check: %w", err)
			}
			if err != nil {
				return nil, err
			}
			rep := reportOf(tmp.Name(), size, meta)
			if *inspect {
				if rep, err = inspectFile(tmp.Name()); err != nil {
					return nil, fmt.Errorf("the snapshot received does not check: %w", err)
				}
			}
			if err := os.Rename(tmp.Name(), path); err != nil {
				return nil, err
			}
			if err := durable.SyncDir(filepath.Dir(path)); err != nil {
				return nil, fmt.Errorf("%s: saved, but its directory did not sync: %w", path, err)
			}
			rep.File = path
			return rep, nil
		}, snapshotTable)
	}
}

func snapshotInspect(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		rep, err := inspectFile(pos[0])
		if err != nil {
			return c.fail(err)
		}
		if err := c.print(rep, snapshotTable); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
}

func snapshotRestore(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		path := pos[0]
		// Its checksums are checked here first: a damaged file is refused
		// before it is sent. The leader reads the state itself (it restores
		// it into a scratch state machine before installing it).
		if _, err := checkFile(path); err != nil {
			return c.fail(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return c.fail(err)
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.SnapshotRestore(ctx, func() (io.ReadCloser, error) { return os.Open(path) }, st.Size())
		}, restoredTable)
	}
}

func snapshotTable(w io.Writer, v any) {
	r, ok := v.(*snapshotReport)
	if !ok {
		return
	}
	fmt.Fprintf(w, "FILE\t%s\nBYTES\t%d\nINDEX\t%d\nTERM\t%d\nTAKEN\t%s on %s\n", r.File, r.Bytes, r.Snapshot.Index,
		r.Snapshot.Term, r.Snapshot.TakenAt.Format("2006-01-02T15:04:05Z07:00"), r.Snapshot.NodeID)
	if r.Contents == nil {
		fmt.Fprintf(w, "CHECKED\tchecksums (spine snapshot inspect %s reads the state)\n", r.File)
		return
	}
	contentsTable(w, *r.Contents)
}

func restoredTable(w io.Writer, v any) {
	r, ok := v.(*api.SnapshotRestored)
	if !ok {
		return
	}
	fmt.Fprintf(w, "RESTORED\tsnapshot of index %d (term %d, taken %s on %s)\nINDEX NOW\t%d\n", r.Snapshot.Index, r.Snapshot.Term,
		r.Snapshot.TakenAt.Format("2006-01-02T15:04:05Z07:00"), r.Snapshot.NodeID, r.Index)
	contentsTable(w, r.Contents)
}

func contentsTable(w io.Writer, c api.SnapshotContents) {
	states := make([]string, 0, len(c.Jobs))
	for s := range c.Jobs {
		states = append(states, s)
	}
	sort.Strings(states)
	for _, s := range states {
		fmt.Fprintf(w, "JOBS %s\t%d\n", s, c.Jobs[s])
	}
	fmt.Fprintf(w, "STREAMS\t%d\nSESSIONS\t%d\nBLOBS\t%d\nGATEWAYS\t%d\nWORKERS\t%d\nFEED EVENTS\t%d\nREGISTRY\t%v\n",
		c.Streams, c.Sessions, c.Blobs, c.Gateways, c.Workers, c.FeedEvents, c.Registry)
	if c.StateHash != "" {
		fmt.Fprintf(w, "STATE HASH\t%s\n", c.StateHash)
	}
}
