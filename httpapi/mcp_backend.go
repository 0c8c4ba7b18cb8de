package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/mcpserver"
	"github.com/spine-queue/spine/queue"
)

// mcpBackend is the backend of a /mcp session's tools (mcpserver.Backend):
// the queue operations of this node's service, called directly with the
// role the session's token was authenticated as, under the same rules as
// the API's routes (each operation checks the route table's permission for
// its route, and runs the code its route runs). Like the routes, it runs a
// write on the leader: on a follower the call is sent to the leader (with
// the Go client, under the caller's token) as a follower forwards any API
// request; a read is answered here when the queue may answer it here
// (queue.Service.Read), else by the leader.
type mcpBackend struct {
	s *Server
	// caller is the session's (its token's); role the role whose view it
	// reads (queue.Caller.ViewRole).
	caller queue.Caller
	role   string
	token  string
	// self is this node's address as the session reached it; req a copy
	// of the request that opened the session (the skill file names the
	// node it is read from).
	self string
	req  *http.Request

	mu sync.Mutex
	// leader reaches the leader at leaderAddr under the caller's token.
	leader     *client.Client
	leaderAddr string
}

var _ mcpserver.Backend = (*mcpBackend)(nil)

// op is one call of a tool: where it runs and what it is allowed as.
type op struct {
	// route is the API route the operation is ("POST /jobs"): its
	// permission in the route table applies.
	route string
	// jobID is the job the call concerns: a refusal does not show a job
	// the caller may not read (queue.Service.ForCaller).
	jobID string
	// here runs the operation on this node. On a follower it runs only if
	// tryHere is set, and hands the call to the leader by returning
	// queue.ErrNotLeader or queue.ErrNeedLeader.
	here    func(ctx context.Context) error
	tryHere bool
	// leader runs the operation on the leader, through c.
	leader func(ctx context.Context, c *client.Client) error
	// write: the call may change the queue (a lost answer leaves its
	// outcome unknown).
	write bool
}

// read is an op that reads at the API's default consistency: here when
// the queue may answer here, else on the leader.
func (b *mcpBackend) read(route, jobID string, fn func() error, leader func(ctx context.Context, c *client.Client) error) op {
	return op{route: route, jobID: jobID, tryHere: true, leader: leader,
		here: func(ctx context.Context) error {
			_, err := b.s.queue.Read(ctx, queue.ReadDefault, func(uint64, bool) error { return fn() })
			return err
		}}
}

// write is an op that changes the queue, on the leader.
func write(route, jobID string, here func(ctx context.Context) error, leader func(ctx context.Context, c *client.Client) error) op {
	return op{route: route, jobID: jobID, here: here, leader: leader, write: true}
}

// mcpLeaderWait is how long a tool call waits for a leader to take it
// (an election, a leader that just stepped down): as long as the Go client
// retries an API request the cluster refused for want of one.
const mcpLeaderWait = 30 * time.Second

// run runs o where the API would: on this node when it leads (or o may be
// answered here), else on the leader. While no leader takes it (none is
// known, the one known is unreachable or no longer leads: nothing was
// applied) it waits for one, up to mcpLeaderWait. Its error is the API's
// (a *client.APIError), or the context's.
func (b *mcpBackend) run(ctx context.Context, o op) error {
	s := b.s
	if !s.permitsRoute(b.caller, o.route) {
		return b.refusal("", forbidden(b.caller, o.route))
	}
	hold, cancel := context.WithTimeout(ctx, mcpLeaderWait)
	defer cancel()
	addr := ""
	for {
		if s.cluster.IsLeader() || o.tryHere {
			err := o.here(ctx)
			if !errors.Is(err, queue.ErrNeedLeader) && !noLeader(err) {
				return b.refusal(o.jobID, err)
			}
			o.tryHere = false
		}
		var id string
		id, addr = s.cluster.Leader()
		if id != "" && addr != "" && id != s.cluster.ID() {
			c, err := b.leaderClient(addr)
			if err != nil {
				return b.refusal(o.jobID, err)
			}
			s.metrics.forwarded.Inc()
			err = o.leader(ctx, c)
			if !unapplied(err) {
				return b.fromLeader(id, err, o.write)
			}
			// The leader could not be reached, or had just lost
			// leadership and did nothing with the call: send it to the
			// next leader, as forward does.
			s.logger.Debug("mcp: leader did not take the call, waiting for a new one", "leader", id, "error", err)
		}
		select {
		case <-s.cluster.LeaderCh():
		case <-time.After(100 * time.Millisecond):
		case <-hold.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return b.refusal("", &apiError{Status: http.StatusServiceUnavailable, Code: api.CodeNoLeader,
				Message: "no leader is available (election in progress or quorum lost); retry shortly", Leader: addr})
		}
	}
}

// leaderClient is a client of the leader at addr under the caller's token,
// over the connections this node forwards requests on.
func (b *mcpBackend) leaderClient(addr string) (*client.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.leader == nil || b.leaderAddr != addr {
		// One try: run decides, as forward does, whether a call goes to
		// the leader again.
		c, err := client.New([]string{addr}, client.WithToken(b.token), client.WithHTTPClient(b.s.fwd),
			client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			return nil, err
		}
		b.leader, b.leaderAddr = c, addr
	}
	return b.leader, nil
}

// noLeader reports whether err is the API's no_leader: this node does not
// lead (now), and did nothing with the call.
func noLeader(err error) bool {
	return err != nil && classify(err).Code == api.CodeNoLeader
}

// unapplied reports whether err, the error of a call sent to the leader,
// proves the call was not applied: it was never sent, or the node it
// reached was no longer the leader (no_leader). Sending it again cannot
// apply it twice.
func unapplied(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Code == api.CodeNoLeader
	}
	return err != nil && notSent(err)
}

// fromLeader is the error of a call the leader id was sent: its answer's,
// or, when no answer came, what the API answers then (forward).
func (b *mcpBackend) fromLeader(id string, err error, write bool) error {
	var ae *client.APIError
	switch {
	case err == nil, errors.As(err, &ae), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case notSent(err) || !write:
		return b.refusal("", errorf(http.StatusServiceUnavailable, api.CodeNoLeader, "leader %s did not answer: %v", id, err))
	}
	return b.refusal("", errorf(http.StatusServiceUnavailable, api.CodeOutcomeUnknown,
		"sent to leader %s, but its answer was lost (%v); the write may or may not have happened", id, err))
}

// refusal is err as the API answers it (a *client.APIError), keeping from
// the caller a job it may not read; nil and the context's errors stay as
// they are.
func (b *mcpBackend) refusal(jobID string, err error) error {
	var ce *client.APIError
	if err == nil || errors.As(err, &ce) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	ae := classify(b.s.queue.ForCaller(b.caller, jobID, err))
	return b.apiError(ae, err)
}

// apiError is ae as a client sees it; err, what it stands for, is logged
// when it is a bug (writeError).
func (b *mcpBackend) apiError(ae *apiError, err error) *client.APIError {
	if ae.Status == http.StatusServiceUnavailable && ae.Leader == "" {
		_, ae.Leader = b.s.cluster.Leader()
	}
	if ae.Status >= 500 && ae.Status != http.StatusServiceUnavailable {
		b.s.logger.Error("mcp tool call failed", "error", err)
	}
	return &client.APIError{Status: ae.Status, Code: ae.Code, Message: ae.Message, Leader: ae.Leader, Job: ae.Job,
		Streams: ae.Streams, From: ae.From, To: ae.To, Mismatches: ae.Mismatches}
}

// workerRefusal is the refusal of a worker call, as the worker contract's
// routes answer it (workerRefused).
func (b *mcpBackend) workerRefusal(jobID string, err error) error {
	if ae := b.s.workerRefused(b.caller, jobID, err); ae != nil {
		return b.apiError(ae, err)
	}
	return err
}

// Addrs names this node, the one the session reached.
func (b *mcpBackend) Addrs() []string { return []string{b.self} }

func (b *mcpBackend) SkillMD(ctx context.Context) ([]byte, error) {
	var out skillBuffer
	err := b.s.handleSkill(&out, b.req.WithContext(ctx), nil)
	return out.body, err
}

// skillBuffer keeps the skill file the route would serve.
type skillBuffer struct {
	header http.Header
	body   []byte
}

func (w *skillBuffer) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *skillBuffer) Write(p []byte) (int, error) { w.body = append(w.body, p...); return len(p), nil }
func (w *skillBuffer) WriteHeader(int)             {}

func (b *mcpBackend) ClusterStatus(ctx context.Context) (*api.ClusterStatus, error) {
	if !b.s.permitsRoute(b.caller, "GET /cluster/status") {
		return nil, b.refusal("", forbidden(b.caller, "GET /cluster/status"))
	}
	// A node answers with its own view, as the route does.
	st, err := b.s.cluster.Status(ctx)
	if err != nil {
		return nil, b.refusal("", err)
	}
	out := viewStatus(st)
	out.Level = b.s.queue.Local().Level()
	return &out, nil
}

func (b *mcpBackend) Streams(ctx context.Context) ([]api.StreamInfo, error) {
	var out []api.StreamInfo
	err := b.run(ctx, b.read("GET /streams", "", func() error {
		out = b.s.streamInfos(b.caller).Streams
		return nil
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.Streams(ctx)
		return err
	}))
	return out, err
}

func (b *mcpBackend) Stream(ctx context.Context, name string) (*api.StreamInfo, error) {
	var out *api.StreamInfo
	err := b.run(ctx, b.read("GET /streams/{name}", "", func() (err error) {
		out, err = b.s.streamInfo(b.caller, name)
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.Stream(ctx, name)
		return err
	}))
	return out, err
}

// job reads job id as the caller sees it, into v.
func (b *mcpBackend) job(ctx context.Context, route, id string, view func(*fsm.Job), leader func(ctx context.Context, c *client.Client) error) error {
	return b.run(ctx, b.read(route, id, func() error {
		j, err := b.s.queue.Job(b.caller, id)
		if err == nil {
			view(j)
		}
		return err
	}, leader))
}

func (b *mcpBackend) JobGet(ctx context.Context, id string) (*api.Job, error) {
	var out *api.Job
	err := b.job(ctx, "GET /jobs/{id}", id, func(j *fsm.Job) { out = viewJob(j) }, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.JobGet(ctx, id)
		return err
	})
	return out, err
}

func (b *mcpBackend) JobEvents(ctx context.Context, id string) ([]*api.JobEvent, error) {
	var out []*api.JobEvent
	err := b.job(ctx, "GET /jobs/{id}/events", id, func(j *fsm.Job) { out = viewEvents(j).Events }, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.JobEvents(ctx, id)
		return err
	})
	return out, err
}

func (b *mcpBackend) JobAttempts(ctx context.Context, id string) ([]*api.JobAttempt, error) {
	var out []*api.JobAttempt
	err := b.job(ctx, "GET /jobs/{id}/attempts", id, func(j *fsm.Job) { out = viewAttempts(j).Attempts }, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.JobAttempts(ctx, id)
		return err
	})
	return out, err
}

func (b *mcpBackend) JobList(ctx context.Context, p *client.JobListParams) (*api.JobList, error) {
	if p == nil {
		p = &client.JobListParams{}
	}
	q := map[string][]string{}
	for k, v := range map[string]string{"status": string(p.Status), "stream": p.Stream, "target": p.Target, "cursor": p.Cursor, "schedule": p.Schedule} {
		if v != "" {
			q[k] = []string{v}
		}
	}
	if p.Limit > 0 {
		q["limit"] = []string{strconv.Itoa(p.Limit)}
	}
	var out *api.JobList
	err := b.run(ctx, b.read("GET /jobs", "", func() error {
		f, err := listQuery(q)
		if err != nil {
			return err
		}
		jobs, next, err := b.s.queue.List(b.caller, f)
		if err == nil {
			l := viewList(jobs, next)
			out = &l
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.JobList(ctx, p)
		return err
	}))
	return out, err
}
