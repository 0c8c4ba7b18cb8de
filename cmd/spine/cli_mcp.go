package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/mcpserver"
)

// spine mcp: the MCP server of package mcpserver over stdio, for an MCP
// client (Claude Code, an IDE) that starts it as a subprocess. Its tools
// call the cluster through a client of every node, so a node that dies
// costs a retry on another, not the session.

func mcpCommand(env *cliEnv, g *clientFlags) *cobra.Command {
	cmd := verbCommand(env, g, verb{name: "mcp", summary: "Serve the MCP tools of the token's role over stdio, for an AI agent's MCP client", setup: mcpServe})
	cmd.GroupID = "queue"
	cmd.Long = `Serve Spine's MCP server over stdin and stdout, for an MCP client that starts it
as a subprocess (Claude Code: claude mcp add spine -- spine mcp --addr … --token …).

Its tools are those of the token's role: a claw's token gets list_streams, peek,
claim, heartbeat, complete, fail, release, comment, get_job and held_jobs; a head
token gets enqueue, list_jobs, get_job, redrive, requeue, cancel, comment,
list_streams, peek and cluster_status. The role is found from the token at start
(--role skips that). The server keeps each claimed job's lease: the agent names
only the job. Resources: spine://skill.md and spine://streams/{name}/instructions.

It learns every node's address from the first one that answers, so the client
moves to another node when one dies. Nothing but MCP is written to stdout; errors
go to stderr. See docs/mcp.md.`
	return cmd
}

func mcpServe(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	role := fs.String("role", "", "the tools to offer, head or claw (default: found from the token)")
	worker := fs.String("worker-id", "", "the worker id of claims that name none (default mcp- and 8 random hex digits)")
	c.nargs(0, 0)
	return func(_ []string) int {
		if *role != "" && *role != string(mcpserver.RoleHead) && *role != string(mcpserver.RoleClaw) {
			return c.usageError(fmt.Sprintf("--role must be head or claw, not %q", *role))
		}
		cl, err := c.client()
		if err != nil {
			return c.usageError(err.Error())
		}
		ctx := env.ctx
		if cl, err = c.withEveryNode(ctx, cl); err != nil {
			return c.usageError(err.Error())
		}
		r := mcpserver.Role(*role)
		if r == "" {
			if r, err = mcpserver.RoleOf(ctx, cl); err != nil {
				fmt.Fprintf(env.stderr, "spine mcp: cannot tell the token's role (give --role to skip this): ")
				return c.fail(err)
			}
		}
		srv, err := mcpserver.New(mcpserver.Config{Backend: cl, Role: r, WorkerID: *worker, Version: currentVersion()})
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(env.stderr, "spine mcp: serving the %s tools over stdio, on %s\n", r, strings.Join(cl.Addrs(), ", "))
		err = srv.Run(ctx, &answerAllTransport{inner: &mcp.IOTransport{Reader: io.NopCloser(env.stdin), Writer: nopWriteCloser{env.stdout}}})
		switch {
		case err == nil, errors.Is(err, io.EOF), ctx.Err() != nil:
			// The client closed stdin, or a signal ended the session.
			return exitOK
		}
		return c.fail(err)
	}
}

// withEveryNode returns a client of cl's nodes and every other node the
// cluster lists (GET /cluster/nodes), so that it fails over to them; cl
// itself if no node answers the question.
func (c *command) withEveryNode(ctx context.Context, cl *client.Client) (*client.Client, error) {
	nodes, err := cl.ClusterNodes(ctx)
	if err != nil {
		fmt.Fprintf(c.env.stderr, "spine mcp: could not list the cluster's nodes (%v); using %s\n", err, strings.Join(cl.Addrs(), ", "))
		return cl, nil
	}
	addrs := cl.Addrs()
	added := false
	for _, n := range nodes.Nodes {
		a := strings.TrimRight(n.HTTPAddr, "/")
		if a != "" && !slices.Contains(addrs, a) {
			addrs, added = append(addrs, a), true
		}
	}
	if !added {
		return cl, nil
	}
	c.g.addrs = addrs
	return c.client()
}

// nopWriteCloser keeps the session from closing the command's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// answerAllTransport answers every request read before the end of stdin.
// A client may write its requests and close its stdin at once (a pipe:
// printf '…' | spine mcp); the SDK, told of the end of input, cancels the
// requests in flight and writes no more answers. So the end of input is
// held back from the SDK until every request read has had its answer
// written: then the session ends as it does when a client closes its stdin
// after its answers. (The wrapper hides the SDK's unexported hook that
// tells its stdio connection the negotiated protocol version, used only to
// refuse JSON-RPC batches from 2025-06-18 clients: those are served.)
type answerAllTransport struct{ inner mcp.Transport }

func (t *answerAllTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	a := &answerAllConn{Connection: c, pending: map[jsonrpc.ID]bool{}, closed: make(chan struct{}), answered: make(chan struct{}, 1)}
	return a, nil
}

// answerAllConn keeps the ids of the calls (requests with an id) it has
// read and not yet seen answered; a Read that meets the end of input waits
// until none is left (or the connection is closed, or its context ends)
// before returning it. A set, not a count: a call whose id is already in
// flight is refused by the SDK without an answer of its own.
type answerAllConn struct {
	mcp.Connection
	mu        sync.Mutex
	pending   map[jsonrpc.ID]bool
	answered  chan struct{} // a token after each answer
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *answerAllConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
			c.mu.Lock()
			c.pending[r.ID] = true
			c.mu.Unlock()
		}
		return msg, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	// The end of input (or a read error, which ends the session as well).
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return nil, err
		}
		select {
		case <-c.answered:
		case <-c.closed:
			return nil, err
		case <-ctx.Done():
			return nil, err
		}
	}
}

func (c *answerAllConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if r, ok := msg.(*jsonrpc.Response); ok {
		// Written or not, this call is over: a failed write ends the session.
		c.mu.Lock()
		delete(c.pending, r.ID)
		c.mu.Unlock()
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
	return err
}

func (c *answerAllConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}
