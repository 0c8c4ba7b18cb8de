package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/cluster"
)

var clusterVerbs = []verb{
	{"status", "", "Show the cluster's members (alive or not), its leader and Raft state (head).", clusterStatus},
	{"join", "--node-id ID --raft-addr HOST:PORT", "Add a node as a voter (head). Idempotent.", clusterJoin},
	{"remove", "--node-id ID", "Remove a node (head). Idempotent.", clusterRemove},
	{"transfer-leader", "", "Hand leadership to another voter (head); prints the status once the new leader is known.", clusterTransferLeader},
}

var blobVerbs = []verb{
	{"put", "PATH|-", "Store a file (or stdin) as a blob; prints its id.", blobsPut},
	{"get", "ID", "Write a blob's bytes to stdout or --out.", blobsGet},
}

func clusterStatus(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.ClusterStatus(ctx)
		}, clusterTable)
	}
}

func clusterJoin(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var m client.Member
	fs.StringVar(&m.NodeID, "node-id", "", "id of the joining node (required)")
	fs.StringVar(&m.RaftAddr, "raft-addr", "", "its Raft address host:port (required)")
	fs.StringVar(&m.HTTPAddr, "http-addr", "", "its HTTP base URL")
	fs.StringVar(&m.GossipAddr, "gossip-addr", "", "its gossip address host:port")
	gossipKey := fs.String("gossip-key", "", "the cluster's gossip key (base64), when gossip is encrypted: proves the node may join (env SPINE_GOSSIP_KEY)")
	c.nargs(0, 0)
	return func(_ []string) int {
		if m.NodeID == "" || m.RaftAddr == "" {
			return c.usageError("--node-id and --raft-addr are required")
		}
		if *gossipKey == "" {
			*gossipKey = env.getenv("SPINE_GOSSIP_KEY")
		}
		if *gossipKey != "" {
			k, err := cluster.ParseGossipKey(*gossipKey)
			if err != nil {
				return c.usageError(err.Error())
			}
			m.GossipProof = cluster.JoinProof(k, m.NodeID)
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			st, err := cl.ClusterJoin(ctx, m)
			if errors.Is(err, client.ErrForbidden) && strings.Contains(err.Error(), "gossip_proof") {
				// The API names its field; the CLI says which flag makes it.
				err = fmt.Errorf("%w\nGive the cluster's gossip key with --gossip-key (or env SPINE_GOSSIP_KEY), and start the node with it", err)
			}
			return st, err
		}, clusterTable)
	}
}

func clusterRemove(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	id := fs.String("node-id", "", "id of the node to remove (required)")
	c.nargs(0, 0)
	return func(_ []string) int {
		if *id == "" {
			return c.usageError("--node-id is required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.ClusterRemove(ctx, *id)
		}, clusterTable)
	}
}

func clusterTransferLeader(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	to := fs.String("to", "", "node id to hand leadership to (default: the voter Raft picks)")
	wait := fs.Duration("wait", 10*time.Second, "wait up to this long for the new leader to be known before printing the status (0: print the old leader's answer at once)")
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			var old string
			if before, err := cl.ClusterStatus(ctx); err == nil {
				old = before.Leader.ID
			}
			st, err := cl.ClusterTransferLeader(ctx, *to)
			if err != nil || *wait <= 0 {
				return st, err
			}
			return awaitNewLeader(ctx, cl, st, old, *to, *wait, env.stderr), nil
		}, clusterTable)
	}
}

// awaitNewLeader polls the cluster's status until it names the leader a
// transfer from old (to to, when given) made, for at most wait, and
// returns the latest status. The old leader answers a transfer before the
// election it started is over, so its answer names no leader.
func awaitNewLeader(ctx context.Context, cl *client.Client, st *client.ClusterStatus, old, to string, wait time.Duration, stderr io.Writer) *client.ClusterStatus {
	done := func(st *client.ClusterStatus) bool {
		id := st.Leader.ID
		switch {
		case id == "":
			return false
		case to != "":
			return id == to
		default:
			return id != old || old == ""
		}
	}
	deadline := time.Now().Add(wait)
	for !done(st) {
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "spine: note: no new leader known after %v; this is the latest status\n", wait)
			return st
		}
		select {
		case <-ctx.Done():
			return st
		case <-time.After(100 * time.Millisecond):
		}
		if next, err := cl.ClusterStatus(ctx); err == nil {
			st = next
		}
	}
	return st
}

// clusterTable prints the Raft state and one row per member.
func clusterTable(w io.Writer, v any) {
	st := v.(*client.ClusterStatus)
	fmt.Fprintf(w, "LEADER\t%s\t%s\n", dash(st.Leader.ID), dash(st.Leader.HTTPAddr))
	fmt.Fprintf(w, "NODE\t%s\t%s\n", dash(st.NodeID), dash(st.State))
	fmt.Fprintf(w, "TERM\t%d\n", st.Term)
	fmt.Fprintf(w, "INDEX\tcommit %d\tapplied %d\n", st.CommitIndex, st.AppliedIndex)
	fmt.Fprintf(w, "STATE HASH\t%s\tchecked %d\tmismatches %d\n", hashCell(st.HashIndex, st.StateHash), st.HashChecks, st.HashMismatches)
	fmt.Fprintf(w, "LEVEL\t%d\n", st.Level)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ID\tSUFFRAGE\tALIVE\tLEADER\tRAFT\tHTTP\tGOSSIP\tSTATE HASH\tLEVEL")
	for _, n := range st.Nodes {
		leader := ""
		if n.ID == st.Leader.ID {
			leader = "*"
		}
		level := "-"
		if n.SupportedLevel != nil {
			level = fmt.Sprintf("up to %d", *n.SupportedLevel)
		}
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, dash(n.Suffrage), n.Alive, leader,
			dash(n.RaftAddr), dash(n.HTTPAddr), dash(n.GossipAddr), hashCell(n.HashIndex, n.StateHash), level)
	}
}

// hashCell shows a state hash as "@index prefix": enough to see at a glance
// whether two nodes at the same index agree.
func hashCell(index uint64, hash string) string {
	if hash == "" {
		return "-"
	}
	return fmt.Sprintf("@%d %.12s", index, hash)
}

func blobsPut(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	name := fs.String("name", "", "file name sent with the blob (decides the content type; default: the path's base name)")
	c.nargs(1, 1)
	return func(pos []string) int {
		var r io.Reader = env.stdin
		if pos[0] != "-" {
			f, err := os.Open(pos[0])
			if err != nil {
				return c.fail(err)
			}
			defer f.Close()
			r = f
			if *name == "" {
				*name = filepath.Base(pos[0])
			}
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.BlobPut(ctx, *name, r)
		}, func(w io.Writer, v any) {
			b := v.(*client.Blob)
			fmt.Fprintln(w, "ID\tSIZE\tCONTENT TYPE")
			fmt.Fprintf(w, "%s\t%d\t%s\n", b.ID, b.Size, b.ContentType)
		})
	}
}

func blobsGet(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	out := fs.String("out", "", "write to this file instead of stdout")
	c.nargs(1, 1)
	return func(pos []string) int {
		cl, err := c.client()
		if err != nil {
			return c.usageError(err.Error())
		}
		rc, _, err := cl.BlobGet(env.ctx, pos[0])
		if err != nil {
			return c.fail(err)
		}
		defer rc.Close()
		w := env.stdout
		if *out != "" {
			f, err := os.Create(*out)
			if err != nil {
				return c.fail(err)
			}
			defer f.Close()
			w = f
		}
		if _, err := io.Copy(w, rc); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
}
