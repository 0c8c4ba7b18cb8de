package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"github.com/spine-queue/spine/client"
)

// rateFlagSet is the --rate-* flags of a create or a stream's defaults.
type rateFlagSet struct {
	fs     *pflag.FlagSet
	key    *string
	limit  *int
	period *time.Duration
	burst  *int
}

func rateFlags(fs *pflag.FlagSet) *rateFlagSet {
	return &rateFlagSet{fs: fs,
		key:    fs.String("rate-key", "", "rate-limit the claims of this key's jobs, cluster-wide (with --rate-limit and --rate-period)"),
		limit:  fs.Int("rate-limit", 0, "with --rate-key: at most this many claims per --rate-period (1 to 1000000)"),
		period: fs.Duration("rate-period", 0, "with --rate-key: the period of --rate-limit (1ms to 168h, e.g. 1s, 1m)"),
		burst:  fs.Int("rate-burst", 0, "with --rate-key: claims allowed at once (default: --rate-limit)"),
	}
}

// rate is the rate the flags give, nil for none.
func (r *rateFlagSet) rate() (*client.RateLimit, error) {
	if *r.key == "" {
		if r.fs.Changed("rate-limit") || r.fs.Changed("rate-period") || r.fs.Changed("rate-burst") {
			return nil, errors.New("--rate-limit, --rate-period and --rate-burst need --rate-key")
		}
		return nil, nil
	}
	if *r.limit <= 0 || *r.period <= 0 {
		return nil, errors.New("--rate-key needs --rate-limit (at least 1) and --rate-period (e.g. 1s)")
	}
	return &client.RateLimit{Key: *r.key, Limit: *r.limit, PeriodSeconds: r.period.Seconds(), Burst: *r.burst}, nil
}

// rateText says what a rate is: "KEY: N per PERIOD, burst B".
func rateText(r *client.RateLimit) string {
	burst := r.Burst
	if burst == 0 {
		burst = r.Limit
	}
	return fmt.Sprintf("%s: %d per %s, burst %d", r.Key, r.Limit, time.Duration(r.PeriodSeconds*float64(time.Second)), burst)
}

func streamRates(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			list, err := cl.Rates(ctx)
			out := make([]*client.RateInfo, len(list))
			for i := range list {
				out[i] = &list[i]
			}
			return out, err
		}, rateTable)
	}
}

func rateTable(w io.Writer, v any) {
	fmt.Fprintln(w, "KEY\tRATE\tTOKENS\tNEXT\tWAITING")
	for _, r := range oneOrMany[client.RateInfo](v) {
		next := "-"
		if !r.NextAt.IsZero() {
			next = fmtTime(r.NextAt)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", r.Key, rateText(&r.RateLimit), strconv.Itoa(r.Tokens), next, r.Waiting)
	}
}
