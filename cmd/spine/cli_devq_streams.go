package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/client"
)

func sessionCreate(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	desc := fs.String("description", "", "what the session is for")
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.SessionCreate(ctx, &client.SessionCreateParams{Name: pos[0], Description: *desc})
		}, sessionsTable)
	}
}

func sessionList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.SessionList(ctx)
		}, sessionsTable)
	}
}

func sessionEnd(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.SessionEnd(ctx, pos[0])
		}, sessionsTable)
	}
}

// oneOrMany is v as a list: a verb's answer is one item or a list of them.
func oneOrMany[T any](v any) []*T {
	switch x := v.(type) {
	case *T:
		return []*T{x}
	case []*T:
		return x
	}
	return nil
}

func sessionsTable(w io.Writer, v any) {
	list := oneOrMany[client.Session](v)
	fmt.Fprintln(w, "NAME\tSTATUS\tSTARTED\tENDED\tSTREAMS\tDESCRIPTION")
	for _, s := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Status, fmtTime(s.StartedAt), fmtTime(s.EndedAt),
			dash(strings.Join(s.Streams, ",")), dash(s.Description))
	}
}

func streamCreate(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.StreamCreateParams
	fs.StringVar(&p.Session, "session", "", "the session the stream belongs to (required)")
	fs.StringVar(&p.Instructions, "instructions", "", "the stream's mini-spec: goals, context, done-when")
	file := fs.String("instructions-file", "", "read the instructions from this file ('-': stdin)")
	c.nargs(1, 1)
	return func(pos []string) int {
		p.Name = pos[0]
		if p.Session == "" {
			return c.usageError("--session is required")
		}
		if *file != "" {
			if p.Instructions != "" {
				return c.usageError("give --instructions or --instructions-file, not both")
			}
			b, err := readFileArg(env, *file)
			if err != nil {
				return c.usageError(err.Error())
			}
			p.Instructions = string(b)
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.StreamCreate(ctx, &p)
		}, streamsTable)
	}
}

func streamList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	session := fs.String("session", "", "only the streams of this session")
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.StreamList(ctx, *session)
		}, streamsTable)
	}
}

func streamShow(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.StreamGet(ctx, pos[0])
		}, func(w io.Writer, v any) {
			s := v.(*client.Stream)
			fmt.Fprintf(w, "STREAM\t%s\nSESSION\t%s\nSTATUS\t%s\nQUEUED\t%d\nRUNNING\t%d\n\n%s\n", s.Name, s.Session, s.Status,
				s.Queued, s.Running, s.Instructions)
		})
	}
}

func streamEnd(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.StreamEnd(ctx, pos[0])
		}, streamsTable)
	}
}

func streamsTable(w io.Writer, v any) {
	list := oneOrMany[client.Stream](v)
	fmt.Fprintln(w, "NAME\tSESSION\tSTATUS\tQUEUED\tRUNNING\tINSTRUCTIONS")
	for _, s := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", s.Name, s.Session, s.Status, s.Queued, s.Running,
			dash(oneLine(s.Instructions, 60)))
	}
}

func streamStats(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			if len(pos) == 1 {
				return cl.Stream(ctx, pos[0])
			}
			list, err := cl.Streams(ctx)
			out := make([]*client.StreamInfo, len(list))
			for i := range list {
				out[i] = &list[i]
			}
			return out, err
		}, streamInfoTable)
	}
}

func streamPause(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	reason := fs.String("reason", "", "why, shown with the stream")
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.StreamPause(ctx, pos[0], *reason)
		}, streamInfoTable)
	}
}

func streamResume(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.StreamResume(ctx, pos[0])
		}, streamInfoTable)
	}
}

func streamDefaults(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	key := fs.String("concurrency-key", "", "the key of jobs created without one: at most the limit of them run at once")
	limit := fs.Int("concurrency-limit", 0, "the limit of jobs created with a key but none (1 to 10000; default 1)")
	schemaArg := fs.String("result-schema", "", "the result contract of jobs created without one: "+resultSchemaUsage)
	rate := rateFlags(fs)
	clearAll := fs.Bool("clear", false, "clear the stream's defaults")
	c.nargs(1, 1)
	return func(pos []string) int {
		rl, err := rate.rate()
		switch {
		case err != nil:
			return c.usageError(err.Error())
		case *clearAll && (*key != "" || *limit != 0 || *schemaArg != "" || rl != nil):
			return c.usageError("--clear takes no --concurrency-key, --concurrency-limit, --result-schema or --rate-*")
		case !*clearAll && *key == "" && *limit == 0 && *schemaArg == "" && rl == nil:
			return c.usageError("give --concurrency-key, --concurrency-limit, --result-schema, --rate-key (with --rate-limit and --rate-period) or several (they replace the defaults in force), or --clear")
		}
		schema, err := readSchemaArg(env, *schemaArg)
		if err != nil {
			return c.usageError(err.Error())
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			if *clearAll {
				return cl.StreamDefaultsClear(ctx, pos[0])
			}
			return cl.StreamDefaultsSet(ctx, pos[0], client.StreamDefaults{ConcurrencyKey: *key, ConcurrencyLimit: *limit, ResultSchema: schema, RateLimit: rl})
		}, streamInfoTable)
	}
}

// defaultsText says what a stream's job defaults are, or "-".
func defaultsText(d *client.StreamDefaults) string {
	if d == nil {
		return "-"
	}
	var parts []string
	if d.ConcurrencyKey != "" {
		parts = append(parts, "key "+d.ConcurrencyKey)
	}
	if d.ConcurrencyLimit > 0 || d.ConcurrencyKey != "" {
		parts = append(parts, fmt.Sprintf("limit %d", max(d.ConcurrencyLimit, 1)))
	}
	if len(d.ResultSchema) > 0 {
		parts = append(parts, "result schema "+schemaText(d.ResultSchema))
	}
	if d.RateLimit != nil {
		parts = append(parts, "rate "+rateText(d.RateLimit))
	}
	return strings.Join(parts, ", ")
}

func streamInfoTable(w io.Writer, v any) {
	fmt.Fprintln(w, "NAME\tQUEUED\tRATE-LIMITED\tRUNNING\tDONE\tFAILED\tDEAD\tCANCELLED\tOLDEST WAIT\tPAUSED\tDEFAULTS\tNO LIVE WORKER FOR")
	for _, s := range oneOrMany[client.StreamInfo](v) {
		wait := "-"
		if s.Queued > 0 {
			wait = (time.Duration(s.OldestQueuedSeconds) * time.Second).String()
		}
		paused := "no"
		if p := s.Pause; p != nil {
			paused = "since " + fmtTime(p.PausedAt) + " by " + p.PausedBy
			if p.Reason != "" {
				paused += ": " + p.Reason
			}
		}
		unmatched := "-"
		if len(s.Unmatched) > 0 {
			var parts []string
			for _, u := range s.Unmatched {
				parts = append(parts, fmt.Sprintf("%d needing %s", u.Jobs, strings.Join(u.Requires, "+")))
			}
			unmatched = strings.Join(parts, "; ")
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.Queued, s.RateLimited, s.Running, s.Done, s.Failed, s.Dead, s.Cancelled,
			wait, paused, defaultsText(s.Defaults), unmatched)
	}
}
