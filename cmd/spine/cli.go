package main

// The client half of the binary: spine jobs|blobs|cluster, built on client/.
// Each verb parses its own flag.FlagSet and runs against a cliEnv, so tests
// drive it with buffers and an httptest server instead of os.Stdout and a
// cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/spine-queue/spine/client"
)

// defaultAddr is the node the CLI talks to when neither --addr nor
// SPINE_ADDRS says otherwise.
const defaultAddr = "http://127.0.0.1:36725"

// cliEnv is everything a CLI verb touches outside its arguments.
type cliEnv struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// osEnv runs a verb against the process's streams and environment; the
// context ends on SIGINT/SIGTERM.
func osEnv() (*cliEnv, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return &cliEnv{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, stop
}

func runJobs(args []string) int {
	env, stop := osEnv()
	defer stop()
	return dispatch(env, "jobs", jobVerbs, args)
}

func runBlobs(args []string) int {
	env, stop := osEnv()
	defer stop()
	return dispatch(env, "blobs", blobVerbs, args)
}

func runCluster(args []string) int {
	env, stop := osEnv()
	defer stop()
	return dispatch(env, "cluster", clusterVerbs, args)
}

// verb is one CLI subcommand such as "jobs create".
type verb struct {
	name    string
	args    string // positional arguments, for the usage line
	summary string
	run     func(env *cliEnv, cmd *command, args []string) int
}

// dispatch picks the verb named by args[0] from verbs.
func dispatch(env *cliEnv, group string, verbs []verb, args []string) int {
	groupUsage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: spine %s <command> [flags]\n\nCommands:\n", group)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, v := range verbs {
			fmt.Fprintf(tw, "  %s %s\t%s\n", v.name, v.args, v.summary)
		}
		tw.Flush()
		fmt.Fprintf(w, "\nRun 'spine %s <command> --help' for the flags of a command.\n", group)
	}
	if len(args) == 0 {
		fmt.Fprintf(env.stderr, "spine: %s: missing command\n\n", group)
		groupUsage(env.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		groupUsage(env.stdout)
		return exitOK
	}
	for _, v := range verbs {
		if v.name == args[0] {
			return v.run(env, newCommand(env, group, v), args[1:])
		}
	}
	fmt.Fprintf(env.stderr, "spine: %s: unknown command %q\n\n", group, args[0])
	groupUsage(env.stderr)
	return exitUsage
}

// command is one invocation of a verb: its flag set and the client flags
// every verb shares.
type command struct {
	env     *cliEnv
	fs      *flag.FlagSet
	usage   string // "spine jobs get ID"
	summary string

	addrs    addrList
	token    string
	output   string
	timeout  time.Duration
	retryFor time.Duration
}

func newCommand(env *cliEnv, group string, v verb) *command {
	c := &command{env: env, summary: v.summary}
	c.usage = strings.TrimSpace(fmt.Sprintf("spine %s %s %s", group, v.name, v.args))
	c.fs = flag.NewFlagSet("spine "+group+" "+v.name, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	c.fs.Usage = func() {}
	c.fs.Var(&c.addrs, "addr", "node base URL; repeatable or comma-separated (env SPINE_ADDRS, default "+defaultAddr+")")
	c.fs.StringVar(&c.token, "token", "", "bearer token (env SPINE_TOKEN)")
	c.fs.StringVar(&c.output, "output", "json", "output format: json or table")
	c.fs.DurationVar(&c.timeout, "timeout", 15*time.Second, "timeout of each request")
	c.fs.DurationVar(&c.retryFor, "retry-for", 10*time.Second, "keep retrying this long while the cluster is unavailable (0: one try)")
	return c
}

// printUsage writes the complete usage of the command to w.
func (c *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nFlags:\n", c.usage, c.summary)
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
}

// parse parses args (flags may follow positional arguments) and checks
// that between min and max positional arguments remain. It returns the
// positional arguments, or ok false with the exit code to return.
func (c *command) parse(args []string, min, max int) (pos []string, code int, ok bool) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printUsage(c.env.stdout)
				return nil, exitOK, false
			}
			return nil, c.usageError(err.Error()), false
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || len(pos) > max {
		want := fmt.Sprintf("%d", min)
		if max != min {
			want = fmt.Sprintf("%d to %d", min, max)
		}
		return nil, c.usageError(fmt.Sprintf("want %s argument(s), got %d", want, len(pos))), false
	}
	if c.output != "json" && c.output != "table" {
		return nil, c.usageError(fmt.Sprintf("--output must be json or table, not %q", c.output)), false
	}
	return pos, exitOK, true
}

func (c *command) usageError(msg string) int {
	fmt.Fprintf(c.env.stderr, "spine: %s\n\n", msg)
	c.printUsage(c.env.stderr)
	return exitUsage
}

// client builds the API client from the flags and the environment.
func (c *command) client() (*client.Client, error) {
	addrs := []string(c.addrs)
	if len(addrs) == 0 {
		addrs = splitCSV(c.env.getenv("SPINE_ADDRS"))
	}
	if len(addrs) == 0 {
		addrs = []string{defaultAddr}
	}
	token := c.token
	if token == "" {
		token = c.env.getenv("SPINE_TOKEN")
	}
	retry := client.RetryPolicy{MaxAttempts: 8, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second, MaxElapsed: c.retryFor}
	if c.retryFor <= 0 {
		retry = client.RetryPolicy{MaxAttempts: 1}
	}
	return client.New(addrs, client.WithToken(token), client.WithTimeout(c.timeout), client.WithRetry(retry))
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
	if c.output == "table" && table != nil {
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

// fail prints err as "spine: <message>" and returns its exit code.
func (c *command) fail(err error) int {
	fmt.Fprintf(c.env.stderr, "spine: %v\n", err)
	return exitCode(err)
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

// addrList is a repeatable, comma-separated flag value.
type addrList []string

func (a *addrList) String() string { return strings.Join(*a, ",") }

func (a *addrList) Set(v string) error {
	parts := splitCSV(v)
	if len(parts) == 0 {
		return errors.New("empty address")
	}
	*a = append(*a, parts...)
	return nil
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

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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
