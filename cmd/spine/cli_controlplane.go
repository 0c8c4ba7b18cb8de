package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// The control plane's registry verbs (docs/controlplane.md).

var gatewayVerbs = []verb{
	{"register", "ID --address URL", "Register a gateway at --address with --capacity, or update it.", gatewayRegister},
	{"list", "", "List the registered gateways.", gatewayList},
	{"show", "ID", "Show a gateway.", gatewayShow},
	{"deregister", "ID", "Remove a gateway and its workers.", gatewayDeregister},
	{"heartbeat", "ID", "Tell the cluster the gateway is alive (gossiped, no log entry).", gatewayHeartbeat},
}

var workerVerbs = []verb{
	{"register", "ID --gateway GATEWAY", "Register a worker of --gateway with --capacity and capabilities, or update it.", workerRegister},
	{"list", "", "List the registered workers (--gateway: of one).", workerList},
	{"show", "ID", "Show a worker.", workerShow},
	{"deregister", "ID", "Remove a worker.", workerDeregister},
	{"heartbeat", "ID", "Tell the cluster the worker is alive (gossiped, no log entry).", workerHeartbeat},
}

var controlVerbs = []verb{
	{"route", "JOB_ID", "Route a queued job to the least loaded healthy gateway that meets --capability and --label (head).", routeJob},
	eventsVerb,
}

func addControlPlaneCommands(env *cliEnv, g *clientFlags, root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: "control", Title: "Control plane (docs/controlplane.md):"})
	for _, v := range controlVerbs {
		c := verbCommand(env, g, v)
		c.GroupID = "control"
		root.AddCommand(c)
	}
	root.AddCommand(group(env, g, "gateway", "Register, list and remove gateways", "control", gatewayVerbs))
	root.AddCommand(group(env, g, "worker", "Register, list and remove workers of gateways", "control", workerVerbs))
}

// metaFlag collects repeated --meta KEY=VALUE flags.
func metaFlag(fs *pflag.FlagSet) func() (map[string]string, error) {
	pairs := fs.StringArray("meta", nil, "metadata KEY=VALUE (repeatable)")
	return func() (map[string]string, error) {
		if len(*pairs) == 0 {
			return nil, nil
		}
		m := map[string]string{}
		for _, p := range *pairs {
			k, v, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--meta %q: want KEY=VALUE", p)
			}
			m[k] = v
		}
		return m, nil
	}
}

func gatewayRegister(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.GatewayRegisterParams
	fs.StringVar(&p.Address, "address", "", "the gateway's URL, e.g. http://10.0.0.7:7000 (required); a push gateway's routed tasks are POSTed to it")
	fs.IntVar(&p.Capacity, "capacity", 1, "how many tasks it runs at once")
	fs.StringVar(&p.Delivery, "delivery", "", "how routed tasks reach it: push (POSTed to --address) or pull (its workers claim them; the default for a new gateway)")
	fs.StringVar(&p.Role, "role", "", "push: the claw role its tasks are leased to (left_claw or right_claw); it calls back with that role's token")
	fs.StringVar(&p.Secret, "secret", "", "push: the key deliveries are signed with (16-256 bytes; default: generated and printed once)")
	meta := metaFlag(fs)
	c.nargs(1, 1)
	return func(pos []string) int {
		p.ID = pos[0]
		if p.Address == "" {
			return c.usageError("--address is required")
		}
		m, err := meta()
		if err != nil {
			return c.usageError(err.Error())
		}
		p.Metadata = m
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.GatewayRegister(ctx, &p)
		}, gatewaysTable)
	}
}

func gatewayList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.GatewayList(ctx)
		}, gatewaysTable)
	}
}

func gatewayShow(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.GatewayGet(ctx, pos[0])
		}, gatewaysTable)
	}
}

func gatewayDeregister(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.GatewayDeregister(ctx, pos[0])
		}, func(w io.Writer, v any) {
			d := v.(*client.GatewayDeregistered)
			gatewaysTable(w, d.Gateway)
			if len(d.Workers) > 0 {
				fmt.Fprintln(w)
				workersTable(w, d.Workers)
			}
		})
	}
}

func gatewaysTable(w io.Writer, v any) {
	fmt.Fprintln(w, "ID\tADDRESS\tDELIVERY\tCAPACITY\tHEALTH\tLAST SEEN\tWORKERS\tMETADATA")
	var secrets []string
	for _, g := range oneOrMany[client.Gateway](v) {
		delivery := g.Delivery
		if g.Role != "" {
			delivery += " (" + g.Role + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", g.ID, g.Address, dash(delivery), g.Capacity, g.Health, fmtTime(g.LastSeen),
			dash(strings.Join(g.Workers, ",")), dash(fmtLabels(g.Metadata)))
		if g.Secret != "" {
			secrets = append(secrets, g.ID+": "+g.Secret)
		}
	}
	for _, s := range secrets {
		// Shown once, by the registration that set it.
		fmt.Fprintf(w, "\nsigning secret of %s (shown once; give it to the gateway to check Spine-Signature)\n", s)
	}
}

func workerRegister(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.WorkerRegisterParams
	fs.StringVar(&p.Gateway, "gateway", "", "the gateway it runs behind (required)")
	fs.IntVar(&p.Capacity, "capacity", 1, "how many tasks it runs at once")
	fs.StringSliceVar(&p.Capabilities, "capability", nil, "a capability (repeatable, or comma-separated), e.g. gpu")
	meta := metaFlag(fs)
	c.nargs(1, 1)
	return func(pos []string) int {
		p.ID = pos[0]
		if p.Gateway == "" {
			return c.usageError("--gateway is required")
		}
		m, err := meta()
		if err != nil {
			return c.usageError(err.Error())
		}
		p.Metadata = m
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.WorkerRegister(ctx, &p)
		}, workersTable)
	}
}

func workerList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	gw := fs.String("gateway", "", "only the workers of this gateway")
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.WorkerList(ctx, *gw)
		}, workersTable)
	}
}

func workerShow(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.WorkerGet(ctx, pos[0])
		}, workersTable)
	}
}

func workerDeregister(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.WorkerDeregister(ctx, pos[0])
		}, workersTable)
	}
}

func workersTable(w io.Writer, v any) {
	fmt.Fprintln(w, "ID\tGATEWAY\tCAPACITY\tHEALTH\tLAST SEEN\tCAPABILITIES\tMETADATA")
	for _, wk := range oneOrMany[client.RegisteredWorker](v) {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", wk.ID, wk.Gateway, wk.Capacity, wk.Health, fmtTime(wk.LastSeen),
			dash(strings.Join(wk.Capabilities, ",")), dash(fmtLabels(wk.Metadata)))
	}
}

// fmtLabels prints a string map as k=v pairs in key order.
func fmtLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

func gatewayHeartbeat(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.GatewayHeartbeat(ctx, pos[0])
		}, heartbeatTable)
	}
}

func workerHeartbeat(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.RegisteredWorkerHeartbeat(ctx, pos[0])
		}, heartbeatTable)
	}
}

func heartbeatTable(w io.Writer, v any) {
	a := v.(*client.HeartbeatAnswer)
	fmt.Fprintln(w, "ID\tHEALTH\tLAST SEEN")
	fmt.Fprintf(w, "%s\t%s\t%s\n", a.ID, a.Health, fmtTime(a.LastSeen))
}

func routeJob(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p api.RouteRequest
	fs.StringSliceVar(&p.Capabilities, "capability", nil, "a capability a worker of the gateway must have (repeatable, or comma-separated)")
	labels := fs.StringArray("label", nil, "KEY=VALUE the gateway's metadata must hold (repeatable)")
	fs.StringVar(&p.IdempotencyKey, "idempotency-key", "", "repeated with this key while the job is routed, the route answers the first one")
	c.nargs(1, 1)
	return func(pos []string) int {
		p.JobID = pos[0]
		for _, l := range *labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return c.usageError(fmt.Sprintf("--label %q: want KEY=VALUE", l))
			}
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[k] = v
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.Route(ctx, &p)
		}, func(w io.Writer, v any) {
			a := v.(*api.RouteAnswer)
			fmt.Fprintln(w, "JOB\tGATEWAY\tADDRESS")
			fmt.Fprintf(w, "%s\t%s\t%s\n", a.Job.ID, a.Gateway.ID, a.Gateway.Address)
		})
	}
}
