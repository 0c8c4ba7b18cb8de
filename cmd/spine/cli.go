package main

// The command line, on cobra: spine serve, and the client verbs (jobs,
// blobs, cluster, the developer queue) built on client/. Every verb runs
// against a cliEnv, so tests drive it with buffers and an httptest server
// instead of os.Stdout and a cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spine-queue/spine/client"
)

// defaultAddr is the node the CLI talks to when neither --addr nor
// SPINE_ADDRS says otherwise.
const defaultAddr = "http://127.0.0.1:36725"

// localTokensFile is where make run (scripts/run-cluster.sh) and spine run
// keep a local cluster's dev tokens, relative to the directory they ran in.
const localTokensFile = "data/tokens.env"

// cliEnv is everything a CLI verb touches outside its arguments.
type cliEnv struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// tokensFile is read for its HEAD_TOKEN when neither --token nor
	// SPINE_TOKEN gives a token and it exists; "" reads nothing.
	tokensFile string
}

// osEnv runs a verb against the process's streams and environment; the
// context ends on SIGINT/SIGTERM.
func osEnv() (*cliEnv, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return &cliEnv{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		tokensFile: localTokensFile}, stop
}

// token returns the bearer token of a client verb and where it came from:
// --token, else SPINE_TOKEN, else the HEAD_TOKEN of the local cluster's
// tokens file (./data/tokens.env) when that file exists. A flag or the
// environment always wins over the file; none of the three gives "".
func (env *cliEnv) token(flag string) (token, from string) {
	switch {
	case flag != "":
		return flag, "--token"
	case env.getenv("SPINE_TOKEN") != "":
		return env.getenv("SPINE_TOKEN"), "SPINE_TOKEN"
	case env.tokensFile != "":
		if t := headToken(env.tokensFile); t != "" {
			return t, "HEAD_TOKEN of " + env.tokensFile
		}
	}
	return "", ""
}

// verb is one CLI subcommand such as "jobs create". setup defines its
// flags on fs and returns the run that gets its positional arguments;
// setup states their count with c.nargs.
type verb struct {
	name    string
	args    string // positional arguments, for the usage line
	summary string
	setup   func(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int
}

// command is one verb's invocation: the client flags every verb shares,
// its positional-argument bounds and its cobra command.
type command struct {
	env       *cliEnv
	g         *clientFlags
	cmd       *cobra.Command
	min, max  int
	tokenFrom string // where client() found the token ("": none)
}

// nargs sets how many positional arguments the verb takes.
func (c *command) nargs(min, max int) { c.min, c.max = min, max }

// clientFlags are the flags of every client verb (persistent on the root).
type clientFlags struct {
	addrs    []string
	token    string
	output   string
	timeout  time.Duration
	retryFor time.Duration
	caCert   string
}

// register defines the client flags on pf.
func (g *clientFlags) register(pf *pflag.FlagSet) {
	pf.StringSliceVar(&g.addrs, "addr", nil, "node base URL; repeatable or comma-separated (env SPINE_ADDRS, default "+defaultAddr+")")
	pf.StringVar(&g.token, "token", "", "bearer token (env SPINE_TOKEN; default: HEAD_TOKEN from ./"+localTokensFile+" when that file exists, as make run writes it)")
	pf.StringVarP(&g.output, "output", "o", "json", "output format: json or table")
	pf.DurationVar(&g.timeout, "timeout", 15*time.Second, "timeout of each request")
	pf.DurationVar(&g.retryFor, "retry-for", 10*time.Second, "keep retrying this long while the cluster is unavailable (0: one try)")
	pf.StringVar(&g.caCert, "ca-cert", "", "trust this CA certificate (PEM) for https:// nodes, such as the cluster CA spine tls made (env SPINE_CA_CERT; default the system's roots)")
}

// exitCodeError carries a verb's exit code out of cobra.
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// usageError is a bad invocation cobra or a verb found: exit 2, with the
// command's usage.
type usageError struct {
	cmd *cobra.Command
	msg string
}

func (e *usageError) Error() string { return e.msg }

// runCLI runs the client and server commands with args against env and
// returns the exit code.
func runCLI(env *cliEnv, args []string) int {
	root := newRoot(env)
	root.SetArgs(args)
	root.SetIn(env.stdin)
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	cmd, err := root.ExecuteContextC(env.ctx)
	var code exitCodeError
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &ue):
		cmd = ue.cmd
	}
	// cobra's own refusals (unknown command or flag, bad flag value,
	// argument count) and the verbs' usage errors.
	fmt.Fprintf(env.stderr, "spine: %v\n\n", err)
	if cmd != nil {
		fmt.Fprint(env.stderr, cmd.UsageString())
	}
	return exitUsage
}

// newRoot builds the command tree.
func newRoot(env *cliEnv) *cobra.Command {
	g := &clientFlags{}
	root := &cobra.Command{
		Use:   "spine",
		Short: "Spine: a replicated job queue for AI-agent workers",
		Long: `Spine: a replicated job queue for AI-agent workers.

One binary: "spine serve" runs a node; every other command is a client of a
cluster: --addr or SPINE_ADDRS names its nodes (default ` + defaultAddr + `),
--token or SPINE_TOKEN the bearer token (default: HEAD_TOKEN from
./` + localTokensFile + ` when that file exists, as "make run" writes it),
--ca-cert or SPINE_CA_CERT the CA to trust for https:// nodes (spine tls).
A command marked (head) needs a head token, one marked (claws) a claw's.
Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict, 5 unavailable,
6 unauthorized or forbidden.`,
		Version:       currentVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.output != "json" && g.output != "table" {
				return &usageError{cmd, fmt.Sprintf("--output must be json or table, not %q", g.output)}
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{cmd, err.Error()} })
	g.register(root.PersistentFlags())

	root.AddGroup(&cobra.Group{ID: "server", Title: "Server:"}, &cobra.Group{ID: "queue", Title: "Jobs and the cluster:"})
	serve := &cobra.Command{
		Use:                "serve [flags]",
		Short:              "Start one node (flags and environment: spine serve --help)",
		GroupID:            "server",
		DisableFlagParsing: true, // its flags fall back to environment variables: parseServe
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := runServe(args); code != exitOK {
				return exitCodeError(code)
			}
			return nil
		},
	}
	root.AddCommand(serve)
	for _, grp := range []struct {
		name, short string
		verbs       []verb
	}{
		{"jobs", "Create, list, claim and finish jobs (v0 API)", jobVerbs},
		{"blobs", "Store and read blobs", blobVerbs},
		{"cluster", "Inspect and change the cluster's membership", clusterVerbs},
		{"snapshot", "Back up and restore the cluster's state", snapshotVerbs},
		{"keyring", "Rotate the gossip encryption keys of every node", keyringVerbs},
		{"schedule", "Recurring schedules: a job made on a cron expression or an interval (head)", scheduleVerbs},
	} {
		root.AddCommand(group(env, g, grp.name, grp.short, "queue", grp.verbs))
	}
	root.AddCommand(mcpCommand(env, g))
	root.AddCommand(versionCommand(env))
	root.AddCommand(tlsCommand(env))
	root.AddCommand(&cobra.Command{
		Use: "bench", Hidden: true, Short: "Moved: the benchmark is spine-bench (make bench)",
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(env.stderr, "spine: the benchmark is its own command: spine-bench (make bench builds and runs it)")
			return exitCodeError(exitUsage)
		},
		DisableFlagParsing: true,
	})
	addDevqCommands(env, g, root)
	addControlPlaneCommands(env, g, root)
	addTokenCommands(env, g, root)
	addExamples(root)
	return root
}

// group is a command whose subcommands are verbs.
func group(env *cliEnv, g *clientFlags, name, short, id string, verbs []verb) *cobra.Command {
	grp := &cobra.Command{
		Use:     name + " <command>",
		Short:   short,
		GroupID: id,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{cmd, name + ": missing command"}
			}
			return &usageError{cmd, fmt.Sprintf("%s: unknown command %q", name, args[0])}
		},
	}
	for _, v := range verbs {
		grp.AddCommand(verbCommand(env, g, v))
	}
	return grp
}

// verbCommand builds the cobra command of a verb.
func verbCommand(env *cliEnv, g *clientFlags, v verb) *cobra.Command {
	cmd := &cobra.Command{Use: strings.TrimSpace(v.name + " " + v.args), Short: v.summary}
	c := &command{env: env, g: g, cmd: cmd}
	run := v.setup(env, c, cmd.Flags())
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) < c.min || len(args) > c.max {
			want := fmt.Sprintf("%d", c.min)
			if c.max != c.min {
				want = fmt.Sprintf("%d to %d", c.min, c.max)
			}
			return &usageError{cmd, fmt.Sprintf("want %s argument(s), got %d", want, len(args))}
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if code := run(args); code != exitOK {
			return exitCodeError(code)
		}
		return nil
	}
	return cmd
}

// usageError prints msg and the command's usage and returns exit code 2.
func (c *command) usageError(msg string) int {
	fmt.Fprintf(c.env.stderr, "spine: %s\n\n", msg)
	fmt.Fprint(c.env.stderr, c.cmd.UsageString())
	return exitUsage
}

// client builds the API client from the flags and the environment.
func (c *command) client() (*client.Client, error) {
	addrs := c.g.addrs
	if len(addrs) == 0 {
		addrs = splitCSV(c.env.getenv("SPINE_ADDRS"))
	}
	if len(addrs) == 0 {
		addrs = []string{defaultAddr}
	}
	token, from := c.env.token(c.g.token)
	c.tokenFrom = from
	retry := client.RetryPolicy{MaxAttempts: 8, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second, MaxElapsed: c.g.retryFor}
	if c.g.retryFor <= 0 {
		retry = client.RetryPolicy{MaxAttempts: 1}
	}
	return client.New(addrs, append(c.g.tlsOptions(c.env), client.WithToken(token), client.WithTimeout(c.g.timeout), client.WithRetry(retry))...)
}

// tlsOptions are the client options of --ca-cert, else SPINE_CA_CERT.
func (g *clientFlags) tlsOptions(env *cliEnv) []client.Option {
	path := g.caCert
	if path == "" {
		path = env.getenv("SPINE_CA_CERT")
	}
	if path == "" {
		return nil
	}
	return []client.Option{client.WithCACertFile(path)}
}

// do runs fn with a client and prints its answer with table (used for
// --output table). It maps errors to exit codes.
func (c *command) do(fn func(ctx context.Context, cl *client.Client) (any, error), table func(io.Writer, any)) int {
	cl, err := c.client()
	if err != nil {
		return c.usageError(err.Error())
	}
	v, err := fn(c.env.ctx, cl)
	if err != nil {
		return c.fail(err)
	}
	if err := c.print(v, table); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func (c *command) print(v any, table func(io.Writer, any)) error {
	if c.g.output == "table" && table != nil {
		tw := tabwriter.NewWriter(c.env.stdout, 0, 4, 2, ' ', 0)
		table(tw, v)
		return tw.Flush()
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.env.stdout, "%s\n", b)
	return err
}

// fail prints err as "spine: <message>" and returns its exit code. A
// refused token is followed by where the token came from.
func (c *command) fail(err error) int {
	fmt.Fprintf(c.env.stderr, "spine: %v\n", err)
	code := exitCode(err)
	if code == exitAuth {
		switch c.tokenFrom {
		case "":
			fmt.Fprintf(c.env.stderr, "spine: no token was given: use --token or SPINE_TOKEN (or run from the directory of make run, whose ./%s has one)\n", localTokensFile)
		default:
			fmt.Fprintf(c.env.stderr, "spine: (the token came from %s)\n", c.tokenFrom)
		}
	}
	return code
}

// exitCode maps an error of the client to the CLI's exit codes.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrNotOwner), errors.Is(err, client.ErrTargetMismatch):
		return exitConflict
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return exitAuth
	case errors.Is(err, client.ErrNoLeader), errors.Is(err, client.ErrOutcomeUnknown):
		return exitUnavailable
	case errors.Is(err, client.ErrBadRequest):
		return exitUsage
	case errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		if apiErr.Status == 502 || apiErr.Status == 503 || apiErr.Status == 504 {
			return exitUnavailable
		}
		return exitError
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) {
		return exitUnavailable
	}
	return exitError
}

func splitCSV(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readJSONArg returns inline JSON, or the content of path ("-": stdin),
// checked to be valid JSON. Both empty gives nil.
func readJSONArg(env *cliEnv, what, inline, path string) (json.RawMessage, error) {
	if inline != "" && path != "" {
		return nil, fmt.Errorf("give --%s or --%s-file, not both", what, what)
	}
	var b []byte
	switch {
	case inline == "-" || path == "-":
		var err error
		if b, err = io.ReadAll(env.stdin); err != nil {
			return nil, fmt.Errorf("read %s from stdin: %w", what, err)
		}
	case path != "":
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	case inline != "":
		b = []byte(inline)
	default:
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s is not valid JSON", what)
	}
	return json.RawMessage(strings.TrimSpace(string(b))), nil
}

// fmtTime formats t for tables ("-" when absent).
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// compact shortens raw JSON to one line of at most n characters.
func compact(raw json.RawMessage, n int) string {
	if len(raw) == 0 {
		return "-"
	}
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}
