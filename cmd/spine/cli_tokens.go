package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/client"
)

// Named tokens (docs/api.md, "Named tokens"): one for each agent.

var tokenVerbs = []verb{
	{"create", "NAME --role ROLE [--stream S]... [--worker-id ID] [--expires-in DURATION] [--note TEXT]",
		"Create a named token (head) and print its secret, shown this once. ROLE: head, left_claw, right_claw or operator (read-only).", tokenCreate},
	{"list", "", "List the named tokens (never their secrets).", tokenList},
	{"revoke", "NAME", "Revoke a named token (head): every node refuses it at once and ends its open long polls, event streams and MCP sessions.", tokenRevoke},
	{"whoami", "", "Show who this client's token makes it: role, token name, scopes, bound worker id.", tokenWhoAmI},
}

func addTokenCommands(env *cliEnv, g *clientFlags, root *cobra.Command) {
	cmd := group(env, g, "token", "Create, list and revoke named tokens (one for each agent)", "queue", tokenVerbs)
	root.AddCommand(cmd)
}

func tokenCreate(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.TokenCreateParams
	fs.StringVar(&p.Role, "role", "", "head, left_claw, right_claw or operator (read-only) (required)")
	fs.StringSliceVar(&p.Streams, "stream", nil, "a stream the token is scoped to (repeat or comma-separate; none: every stream)")
	fs.StringVar(&p.WorkerID, "worker-id", "", "the worker id a claw token is bound to")
	expires := fs.Duration("expires-in", 0, "how long the token is accepted (e.g. 720h; default: until revoked)")
	fs.StringVar(&p.Note, "note", "", "what the token is for (at most 1024 bytes)")
	c.nargs(1, 1)
	return func(pos []string) int {
		p.Name = pos[0]
		if p.Role == "" {
			return c.usageError("--role is required")
		}
		if *expires < 0 {
			return c.usageError("--expires-in must be positive")
		}
		if *expires > 0 {
			p.ExpiresInSeconds = int64((*expires + time.Second - 1) / time.Second)
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TokenCreate(ctx, &p)
		}, func(w io.Writer, v any) {
			t := v.(*client.TokenCreated)
			tokensTable(w, &t.Token)
			fmt.Fprintf(w, "\nsecret (shown once; give it to the agent as SPINE_TOKEN):\n%s\n", t.Secret)
		})
	}
}

func tokenList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			list, err := cl.Tokens(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]*client.Token, len(list))
			for i := range list {
				out[i] = &list[i]
			}
			return out, nil
		}, tokensTable)
	}
}

func tokenRevoke(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TokenRevoke(ctx, pos[0])
		}, tokensTable)
	}
}

func tokenWhoAmI(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.WhoAmI(ctx)
		}, func(w io.Writer, v any) {
			me := v.(*client.WhoAmI)
			fmt.Fprintln(w, "ROLE\tTOKEN\tSTREAMS\tWORKER\tEXPIRES")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", me.Role, dash(me.Token), dash(strings.Join(me.Streams, ",")), dash(me.WorkerID), fmtTime(me.ExpiresAt))
		})
	}
}

func tokensTable(w io.Writer, v any) {
	fmt.Fprintln(w, "NAME\tROLE\tSTREAMS\tWORKER\tEXPIRES\tCREATED\tNOTE")
	for _, t := range oneOrMany[client.Token](v) {
		exp := fmtTime(t.ExpiresAt)
		if t.Expired {
			exp += " (expired)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, dash(strings.Join(t.Streams, ",")), dash(t.WorkerID),
			exp, fmtTime(t.CreatedAt), dash(t.Note))
	}
}
