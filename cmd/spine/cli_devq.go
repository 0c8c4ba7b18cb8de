package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/devconfig"
)

// The developer queue's verbs (seed 004 §14, docs/devqueue.md).

var sessionVerbs = []verb{
	{"create", "NAME", "Start a session (head).", sessionCreate},
	{"list", "", "List the sessions.", sessionList},
	{"end", "NAME", "End a session and its streams (head).", sessionEnd},
}

var streamVerbs = []verb{
	{"create", "NAME --session SESSION", "Create a stream in a session, with the instructions every claim hands its worker (head).", streamCreate},
	{"list", "", "List streams, with their queued and running counts.", streamList},
	{"show", "NAME", "Show a stream with its full instructions.", streamShow},
	{"end", "NAME", "End a stream: no new tasks; its queued tasks stay unclaimed (head).", streamEnd},
	{"stats", "[NAME]", "Every stream jobs are in (v0 jobs and tasks alike): jobs per status, the oldest queued job's wait, and whether it is paused.", streamStats},
	{"pause", "NAME [--reason TEXT]", "Pause a stream (head): claims skip it, producers can still add jobs; any stream name, with jobs or not.", streamPause},
	{"resume", "NAME", "Resume a paused stream (head): its queued jobs are claimable again, in their order.", streamResume},
	{"defaults", "NAME [--concurrency-key KEY] [--concurrency-limit N] [--result-schema FILE|JSON] [--rate-key KEY --rate-limit N --rate-period D [--rate-burst N]] | NAME --clear", "Set the defaults of the jobs created in a stream from now on (head): a key for jobs created without one (so at most the limit of them run at once), a limit for jobs created with a key but none, a result contract and a rate limit for jobs created without one.", streamDefaults},
	{"rates", "", "Every rate key in use: its rate, the claims it allows now, when it next allows one, and how many queued jobs it holds back.", streamRates},
}

// devqVerbs are top-level commands.
var devqVerbs = []verb{
	{"enqueue", "TOOL [PAYLOAD] --stream STREAM", "Queue a task of a registered tool in a stream (head); PAYLOAD is JSON ('-': stdin).", devEnqueue},
	{"tasks", "", "List tasks (--status queued|running|succeeded|failed, --stream; --stale: running past their timeout).", devTasks},
	{"task", "ID", "Show a task with its stream's instructions.", devTask},
	{"requeue", "ID", "Clone a failed task under a new id, queued (head).", devRequeue},
	{"peek", "--stream STREAM", "Print the next queued task of --stream as one line of JSON (nothing when none); claims nothing.", devPeek},
	{"claim", "--stream STREAM", "Claim the next task of --stream: one line of JSON with its stream's instructions (nothing when none).", devClaim},
	{"complete", "ID --result JSON", "Complete a claimed task; --result must be a JSON object with a string \"summary\".", devComplete},
	{"fail", "ID --error TEXT", "Fail a claimed task with --error.", devFail},
	{"heartbeat", "ID", "Push a claimed task's stale and auto-fail marks back.", devHeartbeat},
	{"purge", "", "Delete finished tasks older than --older-than (default: the registry's retention) (head).", devPurge},
	{"status", "", "Show active sessions, streams and task counts.", devStatus},
	{"reload", "", "Parse spine.yml, index the scripts of its script_dirs, and put the registry in force (head).", devReload},
}

func addDevqCommands(env *cliEnv, g *clientFlags, root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: "devq", Title: "Developer queue (docs/devqueue.md):"})
	root.AddCommand(setupCommand(env), runCommand(env, g), stopCommand(env))
	root.AddCommand(group(env, g, "session", "Create, list and end sessions", "devq", sessionVerbs))
	root.AddCommand(group(env, g, "stream", "Create, list, end, pause and resume streams, and set their job defaults", "devq", streamVerbs))
	for _, v := range devqVerbs {
		cmd := verbCommand(env, g, v)
		cmd.GroupID = "devq"
		root.AddCommand(cmd)
	}
}

func devEnqueue(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.EnqueueParams
	fs.StringVar(&p.Stream, "stream", "", "the stream to queue the task in (required)")
	fs.Int64Var(&p.Timeout, "timeout", 0, "the task's timeout in seconds (default: the tool's, else its task class's); not the request timeout, which stays 15s here")
	fs.StringVar(&p.IdempotencyKey, "idempotency-key", "", "repeating an enqueue with the same key answers the first task (default: a fresh UUID)")
	c.nargs(1, 2)
	return func(pos []string) int {
		if p.Stream == "" {
			return c.usageError("--stream is required")
		}
		p.ToolName = pos[0]
		if len(pos) == 2 {
			raw, err := readJSONArg(env, "payload", pos[1], "")
			if err != nil {
				return c.usageError(err.Error())
			}
			p.Payload = raw
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.Enqueue(ctx, &p)
		}, taskTable)
	}
}

func devTasks(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.TaskListParams
	fs.StringVar(&p.Status, "status", "", "only tasks in this status: queued, running, succeeded, failed")
	fs.StringVar(&p.Stream, "stream", "", "only tasks of this stream")
	fs.BoolVar(&p.Stale, "stale", false, "only running tasks past their timeout")
	fs.IntVar(&p.Limit, "limit", 0, "page size, 1-1000 (server default 100)")
	fs.StringVar(&p.Cursor, "cursor", "", "next_cursor of the previous page")
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TaskListAll(ctx, &p)
		}, tasksTable)
	}
}

func devTask(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TaskGet(ctx, pos[0])
		}, taskTable)
	}
}

func devRequeue(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	stream := fs.String("stream", "", "queue the clone in this stream instead of the failed task's")
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TaskRequeue(ctx, pos[0], *stream)
		}, taskTable)
	}
}

// printLine writes v as one line of JSON (what a watcher or a worker's
// shell reads), or nothing for nil.
func (c *command) printLine(t *client.Task) error {
	if t == nil {
		return nil
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.env.stdout, "%s\n", b)
	return err
}

func devPeek(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	stream := fs.String("stream", "", "the stream to look at (required)")
	wait := fs.Duration("wait", 0, "wait this long (at most 30s) for a task to be queued; answers the moment one is")
	c.nargs(0, 0)
	return func(_ []string) int {
		if *stream == "" {
			return c.usageError("--stream is required")
		}
		cl, err := c.client()
		if err != nil {
			return c.usageError(err.Error())
		}
		t, err := cl.TaskPeek(env.ctx, *stream, *wait)
		if err != nil {
			return c.fail(err)
		}
		if err := c.printLine(t); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
}

func devClaim(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.TaskClaimParams
	fs.StringVar(&p.Stream, "stream", "", "the stream to claim from (required)")
	fs.StringVar(&p.WorkerID, "worker-id", "", "worker identity recorded with the attempt")
	wait := fs.Duration("wait", 0, "wait this long for a task when there is none (at most 30s)")
	fs.StringVar(&p.ClaimID, "claim-id", "", "key of this claim, to repeat it safely after a lost answer (default: a fresh one)")
	c.nargs(0, 0)
	return func(_ []string) int {
		p.WaitMS = wait.Milliseconds()
		if p.ClaimID == "" {
			// A fresh key per claim: the client repeats it through a leader's
			// death and gets the task it took, not a second one.
			p.ClaimID = newClaimID()
		}
		cl, err := c.client()
		if err != nil {
			return c.usageError(err.Error())
		}
		t, err := cl.TaskClaim(env.ctx, &p)
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeStreamRequired {
			fmt.Fprintln(env.stderr, "Error: --stream is required")
			if len(apiErr.Streams) > 0 {
				fmt.Fprintln(env.stderr, "\nStreams with queued tasks:")
				for _, s := range apiErr.Streams {
					fmt.Fprintf(env.stderr, "  %-20s %d queued\n", s.Name, s.Queued)
				}
			} else {
				fmt.Fprintln(env.stderr, "\nNo stream has queued tasks.")
			}
			fmt.Fprintln(env.stderr, "\nUsage: spine claim --stream=<name>")
			return exitUsage
		}
		if err != nil {
			return c.fail(err)
		}
		if t != nil {
			if err := saveLease(env, t.ID, lease{Token: t.LeaseToken, AttemptID: t.AttemptID}); err != nil {
				fmt.Fprintf(env.stderr, "spine: note: the lease token was not saved (%v); pass --lease-token %s to complete or fail\n", err, t.LeaseToken)
			}
		}
		if err := c.printLine(t); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
}

func devComplete(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.TaskCompleteParams
	result := fs.String("result", "", `the result: a JSON object with a string "summary" (required; '-': stdin)`)
	fs.StringVar(&p.Stdout, "stdout", "", "captured stdout")
	fs.StringVar(&p.Stderr, "stderr", "", "captured stderr")
	fs.StringVar(&p.LeaseToken, "lease-token", "", "the claim's lease token (default: the one spine claim saved under env SPINE_LEASE_DIR, else $XDG_STATE_HOME/spine/leases or ~/.local/state/spine/leases)")
	fs.StringVar(&p.AttemptID, "attempt-id", "", "the claim's attempt id (default: the one spine claim saved with its lease token)")
	c.nargs(1, 1)
	return func(pos []string) int {
		raw, err := readJSONArg(env, "result", *result, "")
		if err != nil {
			return c.usageError(err.Error())
		}
		var r struct {
			Summary *string `json:"summary"`
		}
		if raw == nil || json.Unmarshal(raw, &r) != nil || r.Summary == nil {
			return c.usageError(`--result must be a JSON object with a string "summary", e.g. '{"summary":"migrated 12 users"}'; the task stays running`)
		}
		p.Result = raw
		fillLease(env, pos[0], &p.LeaseToken, &p.AttemptID)
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			t, err := cl.TaskComplete(ctx, pos[0], &p)
			if err == nil {
				finishLease(env, pos[0], p.LeaseToken, p.AttemptID)
			}
			return t, err
		}, taskTable)
	}
}

func devFail(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.TaskFailParams
	fs.StringVar(&p.Error, "error", "", "what went wrong (required)")
	fs.StringVar(&p.Stdout, "stdout", "", "captured stdout")
	fs.StringVar(&p.Stderr, "stderr", "", "captured stderr")
	fs.StringVar(&p.LeaseToken, "lease-token", "", "the claim's lease token (default: the one spine claim saved under env SPINE_LEASE_DIR, else $XDG_STATE_HOME/spine/leases or ~/.local/state/spine/leases)")
	fs.StringVar(&p.AttemptID, "attempt-id", "", "the claim's attempt id (default: the one spine claim saved with its lease token)")
	c.nargs(1, 1)
	return func(pos []string) int {
		if strings.TrimSpace(p.Error) == "" {
			return c.usageError("--error is required")
		}
		fillLease(env, pos[0], &p.LeaseToken, &p.AttemptID)
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			t, err := cl.TaskFail(ctx, pos[0], &p)
			if err == nil {
				finishLease(env, pos[0], p.LeaseToken, p.AttemptID)
			}
			return t, err
		}, taskTable)
	}
}

func devHeartbeat(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.TaskHeartbeatParams
	fs.StringVar(&p.LeaseToken, "lease-token", "", "the claim's lease token (default: the one spine claim saved under env SPINE_LEASE_DIR, else $XDG_STATE_HOME/spine/leases or ~/.local/state/spine/leases)")
	c.nargs(1, 1)
	return func(pos []string) int {
		fillLease(env, pos[0], &p.LeaseToken, &p.AttemptID)
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TaskHeartbeat(ctx, pos[0], &p)
		}, taskTable)
	}
}

func devPurge(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	older := fs.String("older-than", "", "age of the finished tasks to delete: 3d, 12h, 30m, 45s (default: the registry's purge.older_than_days)")
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.TaskPurge(ctx, *older)
		}, nil)
	}
}

// statusOut is spine status: the developer queue's state, each node's
// health as it answers, and the watchers running on this machine.
type statusOut struct {
	*client.DevStatus
	Nodes    []nodeHealth `json:"nodes"`
	Watchers []watcher    `json:"watchers"`
}

type nodeHealth struct {
	Addr   string `json:"addr"`
	NodeID string `json:"node_id,omitempty"`
	Role   string `json:"role,omitempty"`
	Error  string `json:"error,omitempty"`
}

func devStatus(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			st, err := cl.DevStatus(ctx)
			if err != nil {
				return nil, err
			}
			out := &statusOut{DevStatus: st, Nodes: []nodeHealth{}, Watchers: runningWatchers()}
			for _, a := range cl.Addrs() {
				hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				h, err := cl.Health(hctx, a)
				cancel()
				n := nodeHealth{Addr: a}
				if err != nil {
					n.Error = err.Error()
				} else {
					n.NodeID, n.Role = h.NodeID, h.Role
				}
				out.Nodes = append(out.Nodes, n)
			}
			return out, nil
		}, func(w io.Writer, v any) {
			out := v.(*statusOut)
			st := out.DevStatus
			fmt.Fprintf(w, "LEADER\t%s\n", dash(st.Leader))
			for _, n := range out.Nodes {
				if n.Error != "" {
					fmt.Fprintf(w, "NODE\t%s\tdown\t%s\n", n.Addr, n.Error)
				} else {
					fmt.Fprintf(w, "NODE\t%s\t%s\t%s\n", n.Addr, n.NodeID, n.Role)
				}
			}
			fmt.Fprintf(w, "TASKS\tqueued %d\trunning %d\tsucceeded %d\tfailed %d\n", st.Tasks[api.TaskQueued],
				st.Tasks[api.TaskRunning], st.Tasks[api.TaskSucceeded], st.Tasks[api.TaskFailed])
			fmt.Fprintf(w, "TOOLS\t%d\n", st.Tools)
			for _, wt := range out.Watchers {
				fmt.Fprintf(w, "WATCHER\t%s\tpid %d\n", wt.Stream, wt.PID)
			}
			fmt.Fprintln(w)
			sessionsTable(w, st.Sessions)
			fmt.Fprintln(w)
			streamsTable(w, st.Streams)
		})
	}
}

func taskTable(w io.Writer, v any) {
	t := v.(*client.Task)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("ID", t.ID)
	status := t.Status
	if t.Stale {
		status += " (stale)"
	}
	if t.AutoFailed {
		status += " (auto-failed)"
	}
	row("STATUS", status)
	row("STREAM", t.Stream.Name)
	row("TOOL", fmt.Sprintf("%s (%s, timeout %ds)", t.ToolName, t.TaskClass, t.Timeout))
	row("ATTEMPTS", fmt.Sprint(t.Attempts))
	row("PAYLOAD", compact(t.Payload, 100))
	row("CREATED", fmtTime(t.CreatedAt))
	row("STARTED", fmtTime(t.StartedAt))
	row("FINISHED", fmtTime(t.FinishedAt))
	if len(t.Result) > 0 {
		row("RESULT", compact(t.Result, 100))
	}
	if t.Error != "" {
		row("ERROR", t.Error)
	}
	if t.ClonedFrom != "" {
		row("CLONED FROM", t.ClonedFrom)
	}
	if t.Stream.Instructions != "" {
		row("INSTRUCTIONS", oneLine(t.Stream.Instructions, 100))
	}
}

func tasksTable(w io.Writer, v any) {
	res := v.(*client.TaskList)
	fmt.Fprintln(w, "ID\tTOOL\tSTREAM\tSTATUS\tCREATED\tSTARTED\tFINISHED\tDURATION")
	for _, t := range res.Tasks {
		status := t.Status
		switch {
		case t.Stale:
			status += " (stale)"
		case t.AutoFailed:
			status += " (auto-failed)"
		}
		dur := "-"
		if !t.StartedAt.IsZero() {
			end := t.FinishedAt
			if end.IsZero() {
				end = time.Now()
			}
			dur = end.Sub(t.StartedAt).Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.ToolName, t.Stream.Name, status,
			fmtTime(t.CreatedAt), fmtTime(t.StartedAt), fmtTime(t.FinishedAt), dur)
	}
	if res.NextCursor != "" {
		fmt.Fprintf(w, "\nnext page: --cursor %s\n", res.NextCursor)
	}
}

// oneLine shortens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}

// readFileArg reads path ("-": stdin).
func readFileArg(env *cliEnv, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(env.stdin)
	}
	return os.ReadFile(path)
}

func devReload(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	path := fs.String("config", devconfig.FileName, "the project's spine.yml")
	dryRun := fs.Bool("dry-run", false, "parse and index, print the registry, and send nothing")
	c.nargs(0, 0)
	return func(_ []string) int {
		cfg, err := devconfig.Load(*path)
		if err != nil {
			fmt.Fprintf(env.stderr, "spine: %v\nThe registry in force is unchanged.\n", err)
			return exitUsage
		}
		abs, err := filepath.Abs(*path)
		if err != nil {
			return c.fail(err)
		}
		scripts, err := devconfig.IndexScripts(filepath.Dir(abs), cfg.ScriptDirs)
		if err != nil {
			fmt.Fprintf(env.stderr, "spine: script index: %v\nThe registry in force is unchanged.\n", err)
			return exitUsage
		}
		reg := cfg.Registry(scripts)
		if *dryRun {
			if err := c.print(&reg, nil); err != nil {
				return c.fail(err)
			}
			return exitOK
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.RegistrySet(ctx, &reg)
		}, func(w io.Writer, v any) {
			r := v.(*client.Registry)
			fmt.Fprintf(w, "PROJECT\t%s\n", dash(r.Project.Name))
			fmt.Fprintf(w, "SCRIPTS\t%d\tfrom %s\n", len(r.Scripts), dash(strings.Join(r.ScriptDirs, ",")))
			fmt.Fprintf(w, "PURGE\tafter %d days\n\n", r.PurgeOlderThanDays)
			fmt.Fprintln(w, "TOOL\tCLASS\tTIMEOUT\tDESCRIPTION")
			for _, t := range r.Tools {
				fmt.Fprintf(w, "%s\t%s\t%ds\t%s\n", t.Name, t.TaskClass, t.EffectiveTimeout, dash(t.Description))
			}
		})
	}
}

// newClaimID returns a fresh claim key: 22 random URL-safe characters.
func newClaimID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
