package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/spine-queue/spine/internal/gcpace"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spine-queue/spine/internal/timerslack"
	"github.com/spine-queue/spine/queue"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/spine-queue/spine"
	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/httpapi"
)

func runServe(args []string) int {
	cfg, err := parseServe(args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "spine serve: %v\n", err)
		return exitUsage
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "spine", Level: hclog.LevelFromString(cfg.LogLevel), Output: os.Stderr,
		JSONFormat: cfg.LogJSON, TimeFormat: "2006-01-02T15:04:05.000Z07:00"}).With("node", cfg.NodeID)
	// Before anything is opened: this may re-execute the binary in place.
	if err := timerslack.Apply(cfg.TimerSlack); err != nil {
		logger.Warn("timer slack not applied; the node runs with the inherited one", "error", err)
	}
	if err := serve(cfg, logger); err != nil {
		logger.Error("stopped", "error", err)
		return exitError
	}
	return exitOK
}

func serve(cfg *serveConfig, logger hclog.Logger) error {
	if os.Getenv("GOGC") == "" {
		// The job store is a large, long-lived heap of small objects: collect
		// half as often as Go's default (measured: 10-25% more jobs/s on a
		// 2-core cluster). Set GOGC to override.
		debug.SetGCPercent(200)
	}
	defer gcpace.CapHeapGrowth(cfg.HeapHeadroomMiB << 20)()
	if d := timerslack.Now(); d >= 0 {
		logger.Info("process", "timer_slack", d, "gomaxprocs", runtime.GOMAXPROCS(0))
	}
	skill := spine.SkillMD
	if cfg.SkillPath != "" {
		b, err := os.ReadFile(cfg.SkillPath)
		if err != nil {
			return fmt.Errorf("SPINE_SKILL_MD_PATH: %w", err)
		}
		skill = b
	}
	machine, err := fsm.New(fsm.Config{DefaultMaxAttempts: cfg.DefaultMaxAttempts, Logger: logger})
	if err != nil {
		return err
	}
	// With --tls-*: the nodes' mutual TLS, and HTTPS for the API.
	var nodeTLS *tls.Config
	if cfg.TLSCA != "" {
		if nodeTLS, err = cluster.LoadTLS(cfg.TLSCA, cfg.TLSCert, cfg.TLSKey); err != nil {
			return err
		}
	}
	// Listen before starting Raft so a bad address fails fast.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	var listenTLS *tls.Config
	if nodeTLS != nil {
		// Clients with tokens present no certificate; one that is
		// presented must verify against the cluster CA, and only such a
		// caller (a node) may use the node-to-node paths (httpapi).
		listenTLS = nodeTLS.Clone()
		listenTLS.ClientAuth = tls.VerifyClientCertIfGiven
		listenTLS.NextProtos = []string{"http/1.1"} // the relay and mux are HTTP/1.1 upgrades
	}
	// Metrics: the API's own, Go's runtime and the process, and what
	// hashicorp/raft and memberlist emit through go-metrics.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	raftMetrics, err := collectMetrics(reg)
	if err != nil {
		ln.Close()
		return err
	}
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
	}
	headTok := firstHeadToken()
	node, err := cluster.New(cluster.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, RaftAddr: cfg.RaftAddr, GossipAddr: cfg.GossipAddr, HTTPAddr: cfg.AdvertiseHTTP,
		Bootstrap: cfg.Bootstrap, Join: cfg.Join, JoinToken: headTok, FSM: machine, Logger: logger,
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout, LeaderLeaseTimeout: cfg.LeaderLeaseTimeout,
		LogBackend: cfg.LogBackend, SerialLogWrite: cfg.SerialLogWrite, Commands: uint8(fsm.LatestCommand()), Level: fsm.LatestLevel, TLS: nodeTLS,
		GossipKey: cfg.GossipKey, RaftMsgpack: cfg.RaftMsgpack,
	})
	if err != nil {
		ln.Close()
		return err
	}
	offset := cfg.ClockOffset
	svc := queue.New(queue.Config{Lease: cfg.Lease, MaxBlobBytes: cfg.MaxBlobBytes,
		LeaseRenewFraction: cfg.LeaseRenewFraction, RetryBackoff: cfg.RetryBackoff, Logger: logger,
		Now: func() time.Time { return time.Now().Add(offset) }}, node, machine)
	api, err := httpapi.New(httpapi.Config{
		Tokens: cfg.Tokens, SkillMD: skill, CPUSeconds: cpuSeconds, TimerSlack: timerslack.Now,
		Logger: logger, DisableRelay: cfg.NoRelay, Metrics: reg, SnapshotDir: cfg.DataDir,
		NodeTLS: nodeTLS, MCP: cfg.MCP,
	}, node, svc)
	if err != nil {
		node.Shutdown()
		ln.Close()
		return err
	}
	node.RunWhileLeader("reaper", svc.Reaper(cfg.ReaperInterval, cfg.LeaseGrace))
	node.RunWhileLeader("promoter", svc.Promoter())
	node.RunWhileLeader("scheduler", svc.Scheduler())
	node.RunWhileLeader("task-purge", svc.TaskPurger(time.Minute))
	node.RunWhileLeader("health", svc.HealthMonitor(queue.HealthConfig{SuspectAfter: cfg.HealthSuspect, DeadAfter: cfg.HealthDead}))
	node.RunWhileLeader("feed", svc.FeedStarter(500*time.Millisecond))
	node.RunWhileLeader("level", svc.LevelRaiser(500*time.Millisecond))
	node.RunWhileLeader("retention", svc.Purger(cfg.Retention))
	node.RunWhileLeader("deliver", svc.Deliverer(queue.DeliveryConfig{AcceptTimeout: cfg.GatewayAccept,
		Body: httpapi.DeliveryBody(func() []string { return nodeURLs(node, cfg.AdvertiseHTTP) }), UserAgent: "spine/" + version}))

	if listenTLS != nil {
		ln = tls.NewListener(ln, listenTLS)
	} else {
		// A request Go's server cannot parse is refused in JSON too.
		ln = api.Listener(ln)
	}
	handler := api.Handler()
	if cfg.Pprof {
		handler = withPprof(handler, cfg.Tokens, raftMetrics)
	}
	if metricsLn != nil {
		msrv := &http.Server{Handler: metricsMux(api.MetricsHandler()), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(metricsLn) }()
		defer msrv.Close()
		logger.Info("serving metrics", "addr", metricsLn.Addr().String())
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20, // past httpapi.MaxHeaderBytes the API answers 431 in JSON
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second, // long-poll claims wait up to 30 s
		IdleTimeout:       120 * time.Second,
		ErrorLog:          logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	switch {
	case cfg.Bootstrap:
		logger.Info("serving; bootstrapping a new cluster if this data dir is empty", "http", cfg.AdvertiseHTTP, "raft", cfg.RaftAddr, "gossip", cfg.GossipAddr)
	case len(cfg.Join) > 0:
		logger.Info("serving; joining the cluster", "http", cfg.AdvertiseHTTP, "join", cfg.Join)
	default:
		logger.Info("serving; a new node waits to be added (spine cluster join), a restarted one rejoins", "http", cfg.AdvertiseHTTP)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	var serveErr error
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case serveErr = <-errc:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// HTTP requests and mux connections drain side by side: each answers
	// what it read (up to 5 s) and closes.
	drained := make(chan struct{})
	go func() {
		api.Shutdown(ctx)
		close(drained)
	}()
	_ = srv.Shutdown(ctx)
	<-drained
	api.Close()
	if err := node.Shutdown(); err != nil {
		logger.Warn("raft shutdown", "error", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// collectMetrics bridges the metrics hashicorp/raft and memberlist emit
// (commit time, log dispatch, AppendEntries round trips, FSM apply;
// go-metrics names under "spine_") into reg (raftSink), which also serves
// them as JSON under /debug/metrics with pprof.
func collectMetrics(reg prometheus.Registerer) (*raftSink, error) {
	sink := newRaftSink(time.Minute)
	if err := reg.Register(sink); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if _, err := gometrics.NewGlobal(metricsConfig(), sink); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return sink, nil
}

// metricsConfig is go-metrics' configuration in front of the sink.
func metricsConfig() *gometrics.Config {
	// No service name: go-metrics would insert it into every key, a new
	// slice per sample (a few per commit); the sink prefixes it instead.
	conf := gometrics.DefaultConfig("")
	conf.EnableHostname = false
	conf.EnableRuntimeMetrics = false // the Go collector has them
	return conf
}

// metricsMux serves /metrics alone, for the metrics listener.
func metricsMux(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return mux
}

// withPprof serves the Go profiler under /debug/pprof/ and raft's metrics
// under /debug/metrics (JSON) to head tokens only.
func withPprof(api http.Handler, tokens *httpapi.Tokens, metrics *raftSink) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", api)
	headOnly := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if tokens.Role(tok) != httpapi.RoleHead {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"head token required"}}`)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/debug/pprof/", headOnly(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
		case "profile":
			pprof.Profile(w, r)
		case "trace":
			pprof.Trace(w, r)
		default:
			pprof.Index(w, r)
		}
	}))
	if metrics != nil {
		mux.HandleFunc("GET /debug/metrics", headOnly(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(metrics.summary())
		}))
	}
	return mux
}

func firstHeadToken() string {
	if t := strings.TrimSpace(os.Getenv("HEAD_TOKEN")); t != "" {
		return t
	}
	for _, t := range strings.Split(os.Getenv("HEAD_TOKENS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			return t
		}
	}
	return ""
}

// cpuSeconds is this process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// nodeURLs are the cluster's nodes' HTTP addresses (self alone when the
// configuration cannot be read).
func nodeURLs(node *cluster.Node, self string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out := []string{}
	if st, err := node.Status(ctx); err == nil {
		for _, n := range st.Nodes {
			if n.HTTPAddr != "" {
				out = append(out, n.HTTPAddr)
			}
		}
	}
	if len(out) == 0 {
		out = append(out, self)
	}
	return out
}
