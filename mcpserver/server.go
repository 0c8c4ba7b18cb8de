package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/client"
)

// Role decides which tools a server offers. The API checks every call
// against the token's own role whatever the tools are.
type Role string

const (
	// RoleClaw is a worker (the left_claw and right_claw tokens): it reads
	// streams and jobs, claims, heartbeats and finishes jobs.
	RoleClaw Role = "claw"
	// RoleHead is the orchestrator (a head token): it enqueues jobs,
	// lists and inspects them, redrives, requeues and cancels them, and
	// reads the cluster's status. It cannot claim, so the lease tools are
	// not offered to it.
	RoleHead Role = "head"
)

// Resource URIs.
const (
	// SkillURI is the skill file every node serves at GET /skill.md.
	SkillURI = "spine://skill.md"
	// InstructionsTemplate is the URI template of a stream's instructions.
	InstructionsTemplate = "spine://streams/{name}/instructions"
)

// Config configures a server. Backend and Role are required.
type Config struct {
	// Backend reaches the queue as the session's agent: a *client.Client
	// under the agent's token (spine mcp), or a node's own queue (/mcp).
	Backend Backend
	// Role is the role of that token.
	Role Role
	// WorkerID names the session's claims that give no worker_id (default
	// "mcp-" and 8 random hex digits, one per server).
	WorkerID string
	// Version is the version the server reports (default the binary's
	// module version).
	Version string
	// SchemaCache, when set, keeps the tools' JSON schemas between servers
	// (a node builds one server per session).
	SchemaCache *mcp.SchemaCache
	// SessionIdle, when set, is how long the session lasts without a
	// request (the /mcp transport ends it then). The heartbeat interval the
	// tools ask for is then at most half of it, so that an agent that
	// heartbeats as told keeps its session, and the leases in it.
	SessionIdle time.Duration
}

// server is the state of one MCP session: its backend and the leases its
// claims hold.
type server struct {
	c      Backend
	role   Role
	leases *leases
	// args are the arguments of each tool, by name (set by New, then read).
	args map[string]*argSpec
	// heartbeatCap bounds the heartbeat interval the tools ask for (0: none).
	heartbeatCap time.Duration

	mu sync.Mutex
	// workerID is the session's worker id: the default of its claims,
	// changed when held_jobs takes over another session's worker.
	workerID string
}

// worker is the session's worker id.
func (s *server) worker() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workerID
}

// New returns the MCP server of one session: the tools of cfg.Role and the
// resources, on cfg.Backend.
func New(cfg Config) (*mcp.Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("mcpserver: no backend")
	}
	if cfg.Role != RoleClaw && cfg.Role != RoleHead {
		return nil, fmt.Errorf("mcpserver: role %q is neither %s nor %s", cfg.Role, RoleClaw, RoleHead)
	}
	if cfg.WorkerID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.WorkerID = "mcp-" + hex.EncodeToString(b[:])
	}
	if cfg.Version == "" {
		cfg.Version = moduleVersion()
	}
	s := &server{c: cfg.Backend, role: cfg.Role, workerID: cfg.WorkerID, leases: newLeases(), args: map[string]*argSpec{},
		heartbeatCap: cfg.SessionIdle / 2}
	srv := mcp.NewServer(&mcp.Implementation{Name: "spine", Title: "Spine job queue", Version: cfg.Version},
		&mcp.ServerOptions{
			Instructions: instructions(cfg.Role),
			SchemaCache:  cfg.SchemaCache,
			// Tools, resources and templates are inferred; no logging.
			Capabilities: &mcp.ServerCapabilities{},
		})
	s.addCommonTools(srv)
	switch cfg.Role {
	case RoleClaw:
		s.addClawTools(srv)
	case RoleHead:
		s.addHeadTools(srv)
		s.addTokenTools(srv)
		s.addScheduleTools(srv)
	}
	s.addResources(srv)
	srv.AddReceivingMiddleware(s.checkArguments)
	return srv, nil
}

// RoleOf finds the role of c's token by asking for the cluster's status,
// which only head may read: a claw's token is refused with 403.
func RoleOf(ctx context.Context, c Backend) (Role, error) {
	_, err := c.ClusterStatus(ctx)
	switch {
	case err == nil:
		return RoleHead, nil
	case errors.Is(err, client.ErrForbidden):
		return RoleClaw, nil
	}
	return "", err
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// instructions is what the server tells a client about itself when it
// connects: the agent's loop, in a few lines.
func instructions(r Role) string {
	if r == RoleHead {
		return `Spine is a replicated job queue; you are its head (orchestrator).
enqueue puts a job (any JSON payload) in a stream; workers (claws) claim and finish it.
list_jobs and get_job show where jobs are; list_streams shows each stream's queue.
A failed or dead job goes back to the queue with redrive (same job) or requeue (a new copy).
cancel stops a job; cluster_status shows the nodes and the leader.
Every change is committed on a majority of nodes before it is answered.`
	}
	return `Spine is a replicated job queue; you are a claw (worker).
The loop: claim (waits for a job of your streams) -> do what its payload says, following the
stream's instructions -> heartbeat(job_id) every heartbeat_interval_seconds while you work ->
complete(job_id, result={"summary": ...}), or fail(job_id, message, retryable) if you cannot do it,
or release(job_id) if it is not for you. Then claim again.
This session keeps each claimed job's lease: give only the job_id. If a call says your lease
ended, stop working on that job and claim again. list_streams and peek show what waits.
Resource spine://skill.md explains the rules; spine://streams/{name}/instructions a stream's instructions.`
}

// addResources adds the skill file and the template of a stream's
// instructions.
func (s *server) addResources(srv *mcp.Server) {
	srv.AddResource(&mcp.Resource{
		URI: SkillURI, Name: "skill", Title: "Spine skill: how to be a claw", MIMEType: "text/markdown",
		Description: "The skill file every node serves: how a worker claims, heartbeats and reports, and the rules of leases.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		b, err := s.c.SkillMD(ctx)
		if err != nil {
			return nil, s.advise(err, "read the skill file", "")
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: SkillURI, MIMEType: "text/markdown", Text: string(b)}}}, nil
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: InstructionsTemplate, Name: "stream-instructions", Title: "A stream's instructions", MIMEType: "text/markdown",
		Description: "What every job of the stream is for and when it is done, as the stream's creator wrote it (developer-queue streams have them).",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		name, ok := streamOfURI(uri)
		if !ok {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		st, err := s.c.Stream(ctx, name)
		if err != nil {
			return nil, s.advise(err, "read the instructions of stream "+name, "")
		}
		text := st.Instructions
		if text == "" {
			text = fmt.Sprintf("Stream %s has no instructions: do what each job's payload says.\n", name)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: text}}}, nil
	})
}

// streamOfURI returns the stream a spine://streams/{name}/instructions URI
// names (percent-decoded).
func streamOfURI(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, "spine://streams/")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "/instructions")
	if !ok || esc == "" || strings.Contains(esc, "/") {
		return "", false
	}
	name, err := url.PathUnescape(esc)
	if err != nil || name == "" {
		return "", false
	}
	return name, true
}

// InstructionsURI is the URI of stream's instructions.
func InstructionsURI(stream string) string {
	return "spine://streams/" + url.PathEscape(stream) + "/instructions"
}

// heartbeatEvery is the heartbeat interval the tools ask for of a claim
// whose lease wants one every d.
func (s *server) heartbeatEvery(d time.Duration) time.Duration {
	if s.heartbeatCap > 0 && d > s.heartbeatCap {
		return s.heartbeatCap
	}
	return d
}
