package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/httpapi"
	"github.com/spine-queue/spine/queue"
)

// parseRetryBackoff reads SPINE_RETRY_BACKOFF: "off" (or "0"), or
// "base..max" in whole seconds or more ("1s..5m"; "30s" alone has no
// ceiling).
func parseRetryBackoff(v string) (queue.RetryBackoff, error) {
	bad := fmt.Errorf("SPINE_RETRY_BACKOFF=%q must be off, or base..max such as 1s..5m (whole seconds, base at least 1s, max not below base)", v)
	if v == "off" || v == "0" {
		return queue.RetryBackoff{}, nil
	}
	lo, hi, ranged := strings.Cut(v, "..")
	base, err := time.ParseDuration(lo)
	if err != nil || base < time.Second || base%time.Second != 0 {
		return queue.RetryBackoff{}, bad
	}
	b := queue.RetryBackoff{Base: int64(base / time.Second)}
	if ranged {
		ceil, err := time.ParseDuration(hi)
		if err != nil || ceil < base || ceil%time.Second != 0 || ceil > 365*24*time.Hour {
			return queue.RetryBackoff{}, bad
		}
		b.Max = int64(ceil / time.Second)
	}
	return b, nil
}

// serveConfig is everything `spine serve` reads from flags and env.
type serveConfig struct {
	NodeID, DataDir, HTTPAddr, AdvertiseHTTP, RaftAddr, GossipAddr string
	Bootstrap                                                      bool
	Join                                                           []string
	Lease, ReaperInterval, LeaseGrace, Retention                   time.Duration
	DefaultMaxAttempts                                             int
	SkillPath                                                      string
	MaxBlobBytes                                                   int64
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout          time.Duration
	LogLevel                                                       string
	LogJSON                                                        bool
	GossipKey                                                      []byte
	MetricsAddr                                                    string
	LogBackend                                                     string
	NoRelay                                                        bool
	SerialLogWrite                                                 bool
	RaftMsgpack                                                    bool
	Pprof                                                          bool
	TimerSlack                                                     time.Duration
	LeaseRenewFraction                                             float64
	HeapHeadroomMiB                                                int64
	// RetryBackoff (SPINE_RETRY_BACKOFF) is the backoff a job created
	// without one gets.
	RetryBackoff queue.RetryBackoff
	// ClockOffset (SPINE_CLOCK_OFFSET) runs the queue's clock this far
	// ahead of the system's, for drills.
	ClockOffset time.Duration
	// HealthSuspect and HealthDead: a gateway or worker silent this long
	// is suspect, dead.
	HealthSuspect, HealthDead time.Duration
	// GatewayAccept (SPINE_GATEWAY_ACCEPT_TIMEOUT): how long a push
	// gateway has to accept a delivered task.
	GatewayAccept time.Duration
	Tokens        *httpapi.Tokens
	// TLSCA, TLSCert, TLSKey (--tls-*; all three or none): mutual TLS
	// between nodes (raft, forwarding, the relay, joins) and HTTPS for the
	// API.
	TLSCA, TLSCert, TLSKey string
	// MCP bounds the MCP sessions of /mcp (SPINE_MCP_SESSIONS,
	// SPINE_MCP_SESSIONS_PER_TOKEN, SPINE_MCP_SESSION_IDLE).
	MCP httpapi.MCPLimits
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func envInt(key string, def int64) (int64, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not an integer", key, v)
	}
	return n, nil
}

func envBool(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}

func parseServe(args []string) (*serveConfig, error) {
	fs := flag.NewFlagSet("spine serve", flag.ContinueOnError)
	host, _ := os.Hostname()
	hostPort := net.JoinHostPort(envOr("SPINE_HOST", "127.0.0.1"), envOr("SPINE_PORT", "36725"))
	c := &serveConfig{}
	fs.StringVar(&c.NodeID, "node-id", envOr("SPINE_NODE_ID", host), "unique id of this node (env SPINE_NODE_ID; default the hostname)")
	fs.StringVar(&c.DataDir, "data-dir", envOr("SPINE_DATA_DIR", "./data"), "where this node keeps its Raft log and snapshots (env SPINE_DATA_DIR)")
	fs.StringVar(&c.HTTPAddr, "http-addr", hostPort, "HTTP listen address (env SPINE_HOST:SPINE_PORT)")
	fs.StringVar(&c.AdvertiseHTTP, "advertise-http", envOr("SPINE_ADVERTISE_HTTP", ""), "HTTP base URL other nodes use to reach this one (env SPINE_ADVERTISE_HTTP; default http://<http-addr>)")
	fs.StringVar(&c.RaftAddr, "raft-addr", envOr("SPINE_RAFT_ADDR", "127.0.0.1:36726"), "Raft TCP address, bound and advertised (env SPINE_RAFT_ADDR)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", envOr("SPINE_GOSSIP_ADDR", "127.0.0.1:36727"), "memberlist gossip address (env SPINE_GOSSIP_ADDR)")
	fs.BoolVar(&c.Bootstrap, "bootstrap", envBool("SPINE_BOOTSTRAP"), "start a new cluster with this node as its first member (env SPINE_BOOTSTRAP)")
	join := fs.String("join", envOr("SPINE_JOIN", ""), "HTTP URL(s) of any existing member, CSV: ask the cluster to add this node (env SPINE_JOIN)")
	fs.StringVar(&c.SkillPath, "skill-md", envOr("SPINE_SKILL_MD_PATH", ""), "file served at /skill.md, {{node_url}} and {{node_urls}} in it replaced by this node's and every node's URL (env SPINE_SKILL_MD_PATH; default the built-in SKILL.md)")
	fs.BoolVar(&c.Pprof, "pprof", envBool("SPINE_PPROF"), "serve /debug/pprof/ and /debug/metrics (raft metrics, JSON; head token required) for profiling (env SPINE_PPROF)")
	fs.StringVar(&c.LogBackend, "log-backend", envOr("SPINE_LOG_BACKEND", ""), "Raft log store: wal (raft-wal, default for a new data dir) or bolt (raft-boltdb/v2); an existing data dir keeps its own (env SPINE_LOG_BACKEND)")
	fs.BoolVar(&c.SerialLogWrite, "serial-log-write", envBool("SPINE_SERIAL_LOG_WRITE"), "the leader writes and fsyncs each batch to its own log before sending it to the followers (hashicorp/raft's order), instead of while they write theirs (env SPINE_SERIAL_LOG_WRITE)")
	fs.BoolVar(&c.RaftMsgpack, "raft-msgpack", envBool("SPINE_RAFT_MSGPACK"), "dial the other nodes' raft with hashicorp/raft's msgpack protocol only, never the binary one (the node serves both either way) (env SPINE_RAFT_MSGPACK)")
	fs.BoolVar(&c.NoRelay, "no-relay", envBool("SPINE_NO_RELAY"), "forward each request to the leader as its own HTTP exchange instead of over one multiplexed relay connection (env SPINE_NO_RELAY)")
	slack := fs.String("timer-slack", envOr("SPINE_TIMER_SLACK", "5ms"), "how late the kernel may wake this process's timed sleeps to batch wake-ups (Linux; 0 keeps the inherited value). Fewer wake-ups: more jobs/s at less CPU (env SPINE_TIMER_SLACK)")
	headroom := fs.String("heap-headroom-mib", envOr("SPINE_HEAP_HEADROOM_MIB", "56"), "after each garbage collection, let the heap grow by at most this many MiB of garbage before the next (the runtime's memory limit, set to the memory in use plus this; GOGC decides while the heap is small); 0 leaves GOGC alone (env SPINE_HEAP_HEADROOM_MIB)")
	renew := fs.String("lease-renew-fraction", envOr("SPINE_LEASE_RENEW_FRACTION", "0.1"), "a heartbeat is written to the log only when it moves the lease's expiry by at least this fraction of the lease; a sooner one is answered from the committed lease (0 to 0.5; 0 writes every heartbeat) (env SPINE_LEASE_RENEW_FRACTION)")
	fs.StringVar(&c.LogLevel, "log-level", envOr("SPINE_LOG_LEVEL", "info"), "trace, debug, info, warn or error (env SPINE_LOG_LEVEL)")
	gossipKey := fs.String("gossip-key", envOr("SPINE_GOSSIP_KEY", ""), "encrypt gossip with this base64 key (16, 24 or 32 bytes; spine keyring generate); the node keeps its keys in <data-dir>/keyring.json, where spine keyring rotates them (env SPINE_GOSSIP_KEY)")
	fs.BoolVar(&c.LogJSON, "log-json", envBool("SPINE_LOG_JSON"), "write logs as JSON lines (hclog's format) instead of text (env SPINE_LOG_JSON)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", envOr("SPINE_METRICS_ADDR", ""), "also serve /metrics (Prometheus) on this address with no token; the API port's /metrics needs a head token (env SPINE_METRICS_ADDR)")
	fs.StringVar(&c.TLSCA, "tls-ca", envOr("SPINE_TLS_CA", ""), "cluster CA certificate (PEM): with --tls-cert and --tls-key, raft is mutual TLS (only nodes with a certificate from this CA connect), the API is HTTPS, and forwarding presents this node's certificate (env SPINE_TLS_CA; spine tls makes a dev CA)")
	fs.StringVar(&c.TLSCert, "tls-cert", envOr("SPINE_TLS_CERT", ""), "this node's certificate (PEM), signed by --tls-ca, with the node's addresses as SANs (env SPINE_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", envOr("SPINE_TLS_KEY", ""), "this node's private key (PEM) (env SPINE_TLS_KEY)")
	fs.DurationVar(&c.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "Raft heartbeat timeout (env SPINE_RAFT_HEARTBEAT_TIMEOUT_MS; default 500ms)")
	fs.DurationVar(&c.ElectionTimeout, "raft-election-timeout", 0, "Raft election timeout (env SPINE_RAFT_ELECTION_TIMEOUT_MS; default 500ms)")
	fs.DurationVar(&c.LeaderLeaseTimeout, "raft-leader-lease-timeout", 0, "Raft leader lease timeout (env SPINE_RAFT_LEADER_LEASE_TIMEOUT_MS; default 500ms)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: spine serve [flags]

Starts one Spine node. Flags win over env. Tokens come from env only:
HEAD_TOKEN(S), LEFT_CLAW_TOKEN(S), RIGHT_CLAW_TOKEN(S) (CSV for rotation); at least one is required.
Other env: LEASE_SECONDS (300), REAPER_INTERVAL_MS (30000), DEFAULT_MAX_ATTEMPTS (5),
SPINE_LEASE_GRACE_MS (5000; after a leader change, no lease is reaped before this),
SPINE_RETENTION (72h; done jobs older than this are deleted, 0 keeps them; failed and dead jobs stay),
SPINE_MAX_BLOB_BYTES (8388608). SPINE_RETRY_BACKOFF (1s..5m: a job created without a backoff waits
1s after its first failed attempt, doubling, at most 5m, before a retry; off: retries at once; give
every node the same value). SPINE_CLOCK_OFFSET (0; a drill: the queue's clock, which stamps
creates, leases, finish times and retention, runs this far ahead, e.g. 96h shows what the queue
does four days on; give every node the same value). SPINE_HEALTH_SUSPECT_AFTER (15s) and
SPINE_HEALTH_DEAD_AFTER (30s): a registered gateway or worker not heard from for this long is
suspect, dead (docs/controlplane.md). SPINE_GATEWAY_ACCEPT_TIMEOUT (10s): a push gateway that does not
accept a delivered task this long after its lease is suspect, and its tasks are routed to others.
SPINE_TIMER_SLACK (5ms, Linux) re-executes the binary once at start
(same pid) so that every thread of the node has it; 0 keeps the inherited value.
SPINE_LEASE_RENEW_FRACTION (0.1): a heartbeat sooner than this fraction of the lease after the last
extension is answered from the committed lease instead of a log entry (docs/api.md: which node
answers it, and how a claw reads its own writes through a follower with X-Spine-Min-Index).

First node:   spine serve --node-id n1 --bootstrap
More nodes:   spine serve --node-id n2 --http-addr 127.0.0.1:36735 --raft-addr 127.0.0.1:36736 \
                --gossip-addr 127.0.0.1:36737 --data-dir ./data/n2 --join http://127.0.0.1:36725
A restarted node rejoins with its data; no flag is needed.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	scheme := "http://"
	switch set := btoi(c.TLSCA != "") + btoi(c.TLSCert != "") + btoi(c.TLSKey != ""); set {
	case 0:
	case 3:
		scheme = "https://"
	default:
		return nil, errors.New("--tls-ca, --tls-cert and --tls-key (SPINE_TLS_CA, SPINE_TLS_CERT, SPINE_TLS_KEY) go together: give all three or none")
	}
	for _, u := range strings.Split(*join, ",") {
		if u = strings.TrimSpace(u); u != "" {
			if !strings.Contains(u, "://") {
				u = scheme + u
			}
			if scheme == "https://" && !strings.HasPrefix(u, scheme) {
				return nil, fmt.Errorf("--join %s: with --tls-* the other nodes serve HTTPS; use an https:// URL", u)
			}
			c.Join = append(c.Join, strings.TrimRight(u, "/"))
		}
	}
	if c.AdvertiseHTTP == "" {
		c.AdvertiseHTTP = scheme + c.HTTPAddr
	}
	if scheme == "https://" && !strings.HasPrefix(c.AdvertiseHTTP, scheme) {
		return nil, fmt.Errorf("--advertise-http %s: with --tls-* this node serves HTTPS; advertise an https:// URL", c.AdvertiseHTTP)
	}
	var err error
	if c.TimerSlack, err = time.ParseDuration(*slack); err != nil || c.TimerSlack < 0 || c.TimerSlack > time.Second {
		return nil, fmt.Errorf("--timer-slack / SPINE_TIMER_SLACK=%q must be a duration from 0 to 1s, such as 5ms", *slack)
	}
	if *gossipKey != "" {
		if c.GossipKey, err = cluster.ParseGossipKey(*gossipKey); err != nil {
			return nil, fmt.Errorf("--gossip-key / SPINE_GOSSIP_KEY: %w", err)
		}
	}
	if c.LeaseRenewFraction, err = strconv.ParseFloat(*renew, 64); err != nil || !(c.LeaseRenewFraction >= 0 && c.LeaseRenewFraction <= 0.5) {
		return nil, fmt.Errorf("--lease-renew-fraction / SPINE_LEASE_RENEW_FRACTION=%q must be a number from 0 to 0.5, such as 0.1", *renew)
	}
	if c.HeapHeadroomMiB, err = strconv.ParseInt(*headroom, 10, 64); err != nil || c.HeapHeadroomMiB < 0 || c.HeapHeadroomMiB > 1<<20 {
		return nil, fmt.Errorf("--heap-headroom-mib / SPINE_HEAP_HEADROOM_MIB=%q must be a whole number of MiB from 0 to 1048576, such as 56", *headroom)
	}
	ms := func(flagVal *time.Duration, env string) error {
		if *flagVal != 0 {
			return nil
		}
		n, err := envInt(env, 0)
		*flagVal = time.Duration(n) * time.Millisecond
		return err
	}
	for _, e := range []struct {
		v   *time.Duration
		env string
	}{{&c.HeartbeatTimeout, "SPINE_RAFT_HEARTBEAT_TIMEOUT_MS"}, {&c.ElectionTimeout, "SPINE_RAFT_ELECTION_TIMEOUT_MS"}, {&c.LeaderLeaseTimeout, "SPINE_RAFT_LEADER_LEASE_TIMEOUT_MS"}} {
		if err := ms(e.v, e.env); err != nil {
			return nil, err
		}
	}
	lease, err := envInt("LEASE_SECONDS", 300)
	if err != nil {
		return nil, err
	}
	reap, err := envInt("REAPER_INTERVAL_MS", 30000)
	if err != nil {
		return nil, err
	}
	grace, err := envInt("SPINE_LEASE_GRACE_MS", 5000)
	if err != nil {
		return nil, err
	}
	maxAtt, err := envInt("DEFAULT_MAX_ATTEMPTS", 5)
	if err != nil {
		return nil, err
	}
	if v := envOr("SPINE_RETENTION", "72h"); v == "0" {
		c.Retention = 0
	} else if c.Retention, err = time.ParseDuration(v); err != nil || c.Retention < 0 {
		return nil, fmt.Errorf("SPINE_RETENTION=%q must be a duration such as 72h, or 0 to keep done jobs forever", v)
	}
	for _, h := range []struct {
		v   *time.Duration
		env string
		def string
	}{{&c.HealthSuspect, "SPINE_HEALTH_SUSPECT_AFTER", "15s"}, {&c.HealthDead, "SPINE_HEALTH_DEAD_AFTER", "30s"},
		{&c.GatewayAccept, "SPINE_GATEWAY_ACCEPT_TIMEOUT", "10s"}} {
		if *h.v, err = time.ParseDuration(envOr(h.env, h.def)); err != nil || *h.v <= 0 {
			return nil, fmt.Errorf("%s=%q must be a positive duration such as %s", h.env, os.Getenv(h.env), h.def)
		}
	}
	if c.HealthDead < c.HealthSuspect {
		return nil, fmt.Errorf("SPINE_HEALTH_DEAD_AFTER (%v) must not be shorter than SPINE_HEALTH_SUSPECT_AFTER (%v)", c.HealthDead, c.HealthSuspect)
	}
	if v := os.Getenv("SPINE_CLOCK_OFFSET"); v != "" {
		if c.ClockOffset, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("SPINE_CLOCK_OFFSET=%q must be a duration such as 96h", v)
		}
	}
	if c.RetryBackoff, err = parseRetryBackoff(envOr("SPINE_RETRY_BACKOFF", "1s..5m")); err != nil {
		return nil, err
	}
	mcpTotal, err := envInt("SPINE_MCP_SESSIONS", httpapi.DefaultMCPSessions)
	if err != nil {
		return nil, err
	}
	mcpPerToken, err := envInt("SPINE_MCP_SESSIONS_PER_TOKEN", httpapi.DefaultMCPSessionsPerToken)
	if err != nil {
		return nil, err
	}
	if mcpTotal < 1 || mcpPerToken < 1 || mcpTotal > 1<<20 || mcpPerToken > 1<<20 {
		return nil, errors.New("SPINE_MCP_SESSIONS and SPINE_MCP_SESSIONS_PER_TOKEN must be positive")
	}
	c.MCP.Total, c.MCP.PerToken = int(mcpTotal), int(mcpPerToken)
	if v := envOr("SPINE_MCP_SESSION_IDLE", httpapi.DefaultMCPSessionIdle.String()); v != "" {
		if c.MCP.Idle, err = time.ParseDuration(v); err != nil || c.MCP.Idle <= 0 {
			return nil, fmt.Errorf("SPINE_MCP_SESSION_IDLE=%q must be a positive duration such as 10m", v)
		}
	}
	blob, err := envInt("SPINE_MAX_BLOB_BYTES", 8<<20)
	if err != nil {
		return nil, err
	}
	if lease < 1 || reap < 10 || maxAtt < 1 || blob < 1 || grace < 0 {
		return nil, errors.New("LEASE_SECONDS, REAPER_INTERVAL_MS (>=10), DEFAULT_MAX_ATTEMPTS and SPINE_MAX_BLOB_BYTES must be positive")
	}
	c.Lease, c.ReaperInterval, c.LeaseGrace = time.Duration(lease)*time.Second, time.Duration(reap)*time.Millisecond, time.Duration(grace)*time.Millisecond
	c.DefaultMaxAttempts, c.MaxBlobBytes = int(maxAtt), blob
	c.Tokens = tokensFromEnv()
	if c.Tokens.Len() == 0 {
		return nil, errors.New("no token configured: set at least one of HEAD_TOKEN(S), LEFT_CLAW_TOKEN(S), RIGHT_CLAW_TOKEN(S)")
	}
	if c.NodeID == "" {
		return nil, errors.New("--node-id is required")
	}
	if !cluster.ValidNodeID(c.NodeID) {
		return nil, fmt.Errorf("--node-id %q: a node id is %s", c.NodeID, cluster.NodeIDRule)
	}
	return c, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func tokensFromEnv() *httpapi.Tokens {
	t := &httpapi.Tokens{}
	for role, prefix := range map[string]string{httpapi.RoleHead: "HEAD_TOKEN", httpapi.RoleLeftClaw: "LEFT_CLAW_TOKEN", httpapi.RoleRightClaw: "RIGHT_CLAW_TOKEN"} {
		t.Add(role, os.Getenv(prefix))
		t.AddCSV(role, os.Getenv(prefix+"S"))
	}
	return t
}
