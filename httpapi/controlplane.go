package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The control plane's registry routes (/v1/gateways, /v1/workers,
// docs/controlplane.md). Gateways and workers register themselves with any
// token; a re-registration updates.

func (s *Server) controlPlaneRoutes() {
	s.route("GET", "/v1/gateways", kindRead, allowAll, s.handleGateways)
	s.route("POST", "/v1/gateways", kindWrite, allowHead, s.handleGatewayRegister)
	s.route("GET", "/v1/gateways/{id}", kindRead, allowAll, s.handleGateway)
	s.route("DELETE", "/v1/gateways/{id}", kindWrite, allowHead, s.handleGatewayDeregister)
	s.route("POST", "/v1/gateways/{id}/heartbeat", kindLocalFirst, allowHead, s.handleGatewayHeartbeat)
	s.route("GET", "/v1/workers", kindRead, allowAll, s.handleWorkers)
	s.route("POST", "/v1/workers", kindWrite, allowAll, s.handleWorkerRegister)
	s.route("GET", "/v1/workers/{id}", kindRead, allowAll, s.handleWorker)
	s.route("DELETE", "/v1/workers/{id}", kindWrite, allowAll, s.handleWorkerDeregister)
	s.route("POST", "/v1/workers/{id}/heartbeat", kindLocalFirst, allowAll, s.handleRegisteredWorkerHeartbeat)
}

func (s *Server) viewGateway(g *fsm.Gateway, workers []*fsm.Worker) *api.Gateway {
	v := &api.Gateway{LastSeen: api.Time(s.queue.GatewayLastSeen(g.ID)), ID: g.ID, Address: g.Address, Metadata: labels(g.Metadata), Capacity: g.Capacity, Health: g.Health,
		HealthSince: api.Time(g.HealthAt), RegisteredAt: api.Time(g.RegisteredAt), UpdatedAt: api.Time(g.UpdatedAt), Workers: []string{},
		Delivery: fsm.DeliveryPull, Role: g.Role}
	if g.Pushes() {
		v.Delivery = fsm.DeliveryPush
	}
	for _, w := range workers {
		if w.Gateway == g.ID {
			v.Workers = append(v.Workers, w.ID)
			v.WorkerCapacity += w.Capacity
		}
	}
	return v
}

// DeliveryBody renders the body of the delivery of a leased routed task to
// push gateway g (api.TaskDelivery); nodes lists the cluster's nodes' HTTP
// addresses.
func DeliveryBody(nodes func() []string) func(j *fsm.Job, g *fsm.Gateway) ([]byte, error) {
	return func(j *fsm.Job, g *fsm.Gateway) ([]byte, error) {
		if j.Lease == nil {
			return nil, fmt.Errorf("task %s is not leased", j.ID)
		}
		t := viewControlTask(j)
		t.LeaseToken = j.Lease.Token
		d := api.TaskDelivery{TaskID: j.ID, IdempotencyKey: j.Lease.Token, Gateway: g.ID, Role: j.Lease.Owner, Task: t, Nodes: nodes()}
		if j.Extra().Route != nil {
			d.RouteKey = j.Extra().Route.Key
		}
		return json.Marshal(d)
	}
}

func (s *Server) viewWorker(w *fsm.Worker) *api.Worker {
	caps := w.Capabilities
	if caps == nil {
		caps = []string{}
	}
	return &api.Worker{LastSeen: api.Time(s.queue.WorkerLastSeen(w.ID)), ID: w.ID, Gateway: w.Gateway, Capabilities: caps, Metadata: labels(w.Metadata), Capacity: w.Capacity,
		Health: w.Health, HealthSince: api.Time(w.HealthAt), RegisteredAt: api.Time(w.RegisteredAt), UpdatedAt: api.Time(w.UpdatedAt)}
}

func labels(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// created is 201 for an entry the write at idx made, 200 for an update.
func created(createIndex, idx uint64) int {
	if createIndex == idx {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *Server) handleGateways(w http.ResponseWriter, r *http.Request, c *call) error {
	workers := s.queue.Workers("")
	out := api.GatewayList{Gateways: []*api.Gateway{}}
	for _, g := range s.queue.Gateways() {
		out.Gateways = append(out.Gateways, s.viewGateway(g, workers))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request, c *call) error {
	g, err := s.queue.Gateway(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.viewGateway(g, s.queue.Workers(g.ID)))
	return nil
}

func (s *Server) handleGatewayRegister(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.GatewayRegisterRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	var before string
	if old, _ := s.queue.Gateway(req.ID); old != nil {
		before = old.Secret
	}
	g, idx, err := s.queue.RegisterGateway(r.Context(), queue.GatewayInput{ID: req.ID, Address: req.Address, Metadata: req.Metadata,
		Capacity: req.Capacity, Actor: c.caller.Actor(""), Delivery: req.Delivery, Role: req.Role, Secret: req.Secret})
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	v := s.viewGateway(g, s.queue.Workers(g.ID))
	if g.Secret != before {
		v.Secret = g.Secret // shown once: to the registration that set it
	}
	writeJSON(w, created(g.CreateIndex, idx), v)
	return nil
}

func (s *Server) handleGatewayDeregister(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	g, gone, idx, err := s.queue.DeregisterGateway(r.Context(), r.PathValue("id"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	out := api.GatewayDeregistered{Gateway: s.viewGateway(g, gone), Workers: []*api.Worker{}}
	for _, wk := range gone {
		out.Workers = append(out.Workers, s.viewWorker(wk))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleWorkers(w http.ResponseWriter, r *http.Request, c *call) error {
	out := api.WorkerList{Workers: []*api.Worker{}}
	for _, wk := range s.queue.Workers(r.URL.Query().Get("gateway")) {
		out.Workers = append(out.Workers, s.viewWorker(wk))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleWorker(w http.ResponseWriter, r *http.Request, c *call) error {
	wk, err := s.queue.Worker(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.viewWorker(wk))
	return nil
}

func (s *Server) handleWorkerRegister(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.WorkerRegisterRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	wk, idx, err := s.queue.RegisterWorker(r.Context(), queue.WorkerInput{ID: req.ID, Gateway: req.Gateway, Capabilities: req.Capabilities,
		Metadata: req.Metadata, Capacity: req.Capacity, Actor: c.caller.Actor("")})
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, created(wk.CreateIndex, idx), s.viewWorker(wk))
	return nil
}

func (s *Server) handleWorkerDeregister(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	wk, idx, err := s.queue.DeregisterWorker(r.Context(), r.PathValue("id"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.viewWorker(wk))
	return nil
}

// The heartbeats are answered by the node they reach: recorded there and
// gossiped, never a log entry (docs/controlplane.md, "Health").

func (s *Server) handleGatewayHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	a, err := s.queue.GatewayHeartbeat(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.HeartbeatAnswer{ID: id, Health: a.Health, LastSeen: api.Time(a.LastSeen)})
	return nil
}

func (s *Server) handleRegisteredWorkerHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	a, err := s.queue.WorkerHeartbeat(c.caller.Actor(""), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.HeartbeatAnswer{ID: id, Health: a.Health, LastSeen: api.Time(a.LastSeen)})
	return nil
}

// The read models (seed 003): the system's state, who works on what, and
// what an agent would get next. Reads: a follower answers from its state
// under the usual consistency rules; nothing is locked or changed.

func (s *Server) readModelRoutes() {
	s.route("GET", "/v1/state", kindRead, allowAll, s.handleSystemState)
	s.route("GET", "/v1/agents", kindRead, allowAll, s.handleAgents)
	s.route("GET", "/v1/tasks/next", kindRead, allowAll, s.handleNextFor)
	s.route("POST", "/v1/tasks/route", kindWrite, allowHead, s.handleRoute)
}

func (s *Server) viewAgent(a *queue.Agent) *api.Agent {
	v := &api.Agent{ID: a.ID, Tasks: []api.AgentTask{}}
	if w := a.Worker; w != nil {
		v.Registered, v.Gateway, v.Health, v.Capacity = true, w.Gateway, w.Health, w.Capacity
	}
	for _, j := range a.Jobs {
		t := api.AgentTask{JobID: j.ID, Stream: j.Stream, Attempt: int(j.Attempts), StartedAt: api.Time(j.StartedAt)}
		if j.Lease != nil {
			t.LeaseExpiresAt = api.Time(j.Lease.ExpiresAt)
		}
		v.Tasks = append(v.Tasks, t)
	}
	return v
}

func (s *Server) handleSystemState(w http.ResponseWriter, r *http.Request, c *call) error {
	out, err := s.systemState(r.Context(), c.caller)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// systemState is GET /v1/state's answer: this node's view of the cluster
// and of the replicated state.
func (s *Server) systemState(ctx context.Context, caller queue.Caller) (*api.SystemState, error) {
	cs, err := s.cluster.Status(ctx)
	if err != nil {
		return nil, err
	}
	st := s.queue.SystemState(caller)
	status := viewStatus(cs)
	out := api.SystemState{NodeID: status.NodeID, Leader: status.Leader, Term: status.Term, Index: status.AppliedIndex,
		Nodes: status.Nodes, Gateways: []*api.Gateway{}, Agents: []*api.Agent{}, Queues: []*api.QueueDepth{}, Jobs: map[string]int{}}
	var workers []*fsm.Worker
	for _, a := range st.Agents {
		if a.Worker != nil {
			workers = append(workers, a.Worker)
		}
		out.Agents = append(out.Agents, s.viewAgent(a))
	}
	for _, g := range st.Gateways {
		out.Gateways = append(out.Gateways, s.viewGateway(g, workers))
	}
	now := s.queue.Now()
	for _, d := range st.Streams {
		q := &api.QueueDepth{Stream: d.Stream, Queued: d.Queued, Running: d.Running, Paused: d.Paused, RateLimited: d.RateLimited}
		if d.OldestQueued != 0 {
			q.OldestQueuedSeconds = max(0, float64(now-d.OldestQueued)/1e9)
		}
		for _, u := range d.Unmatched {
			q.Unmatched = append(q.Unmatched, api.UnmatchedJobs{Requires: fsm.Labels(u.Requires), Jobs: u.Jobs})
		}
		out.Queues = append(out.Queues, q)
	}
	for state, n := range st.Counts {
		out.Jobs[string(api.JobStatus(state))] = n
	}
	feed := s.queue.Feed(0, 0)
	out.Events = api.EventFeedState{On: feed.On, Oldest: feed.Oldest, Latest: feed.Latest}
	return &out, nil
}

func (s *Server) handleAgents(w http.ResponseWriter, r *http.Request, c *call) error {
	out := api.AgentList{Agents: []*api.Agent{}}
	for _, a := range s.queue.Agents(c.caller) {
		out.Agents = append(out.Agents, s.viewAgent(a))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleNextFor answers the task a claim by agent_id of streams (comma
// separated; default "default") would take now: 200 the task, in the task
// API's view (as GET /v1/tasks/{id}), 204 none.
func (s *Server) handleNextFor(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	var streams []string
	if v := q.Get("streams"); v != "" {
		streams = strings.Split(v, ",")
	}
	j, err := s.queue.NextFor(q.Get("agent_id"), c.caller, streams)
	if err != nil {
		return err
	}
	if j == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, viewControlTask(j))
	return nil
}

// handleRoute routes a queued job to a gateway (head): 200 with the job and
// the gateway; 503 no_healthy_gateway, and nothing changed, when none can
// take it.
func (s *Server) handleRoute(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.RouteRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	j, g, idx, err := s.queue.Route(r.Context(), queue.RouteInput{JobID: req.JobID, Capabilities: req.Capabilities, Labels: req.Labels,
		Key: req.IdempotencyKey, Actor: c.caller.Actor("")})
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	out := api.RouteAnswer{Job: viewJob(j)}
	if g != nil { // a repeated dispatch whose gateway left since: the job, as it is
		out.Gateway = s.viewGateway(g, s.queue.Workers(g.ID))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
