package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/cluster"
)

// The gossip keyring is each node's own: these verbs reach every member of
// the cluster in turn (from cluster status) and report per node. A
// rotation: install the new key, use it, then remove the old one, each on
// every node before the next step.
var keyringVerbs = []verb{
	{"generate", "", "Print a new random gossip key (base64, 32 bytes) for --gossip-key (reads nothing).", keyringGenerate},
	{"list", "", "Show every node's gossip keys by fingerprint, the primary first (head).", keyringList},
	{"install", "KEY", "Add KEY to every node's keyring: accepted on receipt, not yet used to send (head).", keyringOp("install")},
	{"use", "KEY", "Make KEY, installed everywhere, the key every node sends with (head).", keyringOp("use")},
	{"remove", "KEY", "Remove KEY, no longer used to send, from every node's keyring (head).", keyringOp("remove")},
}

func keyringGenerate(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		fmt.Fprintln(env.stdout, cluster.GenerateGossipKey())
		return exitOK
	}
}

// keyringReport is what list and the changes print: each node's answer, or
// why it could not be reached.
type keyringReport struct {
	Nodes []keyringNode `json:"nodes"`
}

type keyringNode struct {
	api.KeyringAnswer
	URL   string `json:"url"`
	Error string `json:"error,omitempty"`
}

func keyringList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int { return keyringEach(c, "", "") }
}

func keyringOp(op string) func(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	return func(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
		c.nargs(1, 1)
		return func(pos []string) int {
			if _, err := cluster.ParseGossipKey(pos[0]); err != nil {
				return c.usageError(err.Error())
			}
			return keyringEach(c, op, pos[0])
		}
	}
}

// keyringEach runs op (list when "") on every member; it fails if any node
// did not take it.
func keyringEach(c *command, op, key string) int {
	cl, err := c.client()
	if err != nil {
		return c.usageError(err.Error())
	}
	st, err := cl.ClusterStatus(c.env.ctx)
	if err != nil {
		return c.fail(err)
	}
	rep := keyringReport{}
	failed := 0
	for _, n := range st.Nodes {
		kn := keyringNode{URL: n.HTTPAddr}
		kn.NodeID = n.ID
		if n.HTTPAddr == "" {
			kn.Error = "its HTTP address is unknown"
		} else if err := keyringCall(c.env.ctx, cl, n.HTTPAddr, op, key, &kn.KeyringAnswer); err != nil {
			kn.Error = err.Error()
		}
		if kn.Error != "" {
			failed++
		}
		rep.Nodes = append(rep.Nodes, kn)
	}
	if err := c.print(&rep, keyringTable); err != nil {
		return c.fail(err)
	}
	if failed > 0 {
		fmt.Fprintf(c.env.stderr, "spine: %d of %d nodes did not answer; run it again once they are up (each step is idempotent)\n", failed, len(st.Nodes))
		return exitError
	}
	return exitOK
}

func keyringCall(ctx context.Context, cl *client.Client, base, op, key string, out *api.KeyringAnswer) error {
	if op == "" {
		return cl.KeyringGet(ctx, base, out)
	}
	return cl.KeyringChange(ctx, base, op, key, out)
}

func keyringTable(w io.Writer, v any) {
	rep, ok := v.(*keyringReport)
	if !ok {
		return
	}
	fmt.Fprintln(w, "NODE\tENCRYPTED\tKEYS (primary*)\tERROR")
	for _, n := range rep.Nodes {
		var keys []string
		for _, k := range n.Keys {
			s := k.Fingerprint
			if k.Primary {
				s += "*"
			}
			keys = append(keys, s)
		}
		fmt.Fprintf(w, "%s\t%v\t%s\t%s\n", n.NodeID, n.Encrypted, strings.Join(keys, " "), n.Error)
	}
}
