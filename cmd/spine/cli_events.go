package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/client"
)

// spine events: follow the cluster's event feed (GET /v1/events).

var eventsVerb = verb{"events", "", "Follow the cluster's event feed: one JSON line per event, across node failures (Ctrl-C stops).", followEvents}

func followEvents(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.EventsParams
	fs.Uint64Var(&p.After, "after", 0, "start after this event seq (the last one you saw)")
	fs.BoolVar(&p.FromOldest, "from-oldest", false, "start with the oldest event the feed holds (default: only new events)")
	fs.StringSliceVar(&p.Kinds, "kind", nil, "only these kinds: job, gateway, worker (repeatable, or comma-separated)")
	fs.StringVar(&p.Stream, "stream", "", "only job events of this stream")
	fs.StringVar(&p.Job, "job", "", "only events of this job")
	limit := fs.Int("limit", 0, "stop after this many events (0: follow until interrupted)")
	c.nargs(0, 0)
	return func(pos []string) int {
		cl, err := c.client()
		if err != nil {
			return c.usageError(err.Error())
		}
		if c.g.output != "json" {
			return c.usageError("spine events writes JSON lines only (-o json)")
		}
		for _, k := range p.Kinds {
			if k != "job" && k != "gateway" && k != "worker" {
				return c.usageError(fmt.Sprintf("--kind %q: want job, gateway or worker", k))
			}
		}
		p.OnGap = func(g client.EventGap) {
			fmt.Fprintf(env.stderr, "spine: events %d to %d are no longer in the feed; going on from %d\n", g.After+1, g.Oldest-1, g.Oldest)
		}
		enc := json.NewEncoder(env.stdout)
		n := 0
		errEnough := errors.New("enough")
		err = cl.Events(env.ctx, &p, func(e *client.Event) error {
			if err := enc.Encode(e); err != nil {
				return err
			}
			n++
			if *limit > 0 && n >= *limit {
				return errEnough
			}
			return nil
		})
		switch {
		case errors.Is(err, errEnough), errors.Is(err, context.Canceled) && env.ctx.Err() != nil:
			return 0
		case err != nil:
			return c.fail(err)
		}
		return 0
	}
}
