package httpapi

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spine-queue/spine/cluster/clusterinfo"
	"github.com/spine-queue/spine/fsm"
)

// Prometheus metrics (GET /metrics): the queue as this node's state machine
// holds it (jobs per stream and state, the oldest queued job's age, the job
// events it applied), its long polls and HTTP requests, raft and gossip as
// it sees them. Figures of replicated state are the same on every node that
// has applied the same entries; the others are the node's own.

// MaxMetricStreams caps the streams named in labels: past it, the smallest
// streams are summed under the stream label OtherStreams, so a producer
// inventing stream names cannot grow the metrics without bound.
const (
	MaxMetricStreams = 100
	OtherStreams     = "_other"
)

// metrics are the server's instruments, registered in reg.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.HistogramVec
	forwarded prometheus.Counter
	// tokenLookups counts a follower's lookups of named tokens it had not
	// applied (tokenlookup.go), by outcome.
	tokenLookups *prometheus.CounterVec
}

func newMetrics(s *Server, reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reg: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "spine_http_request_duration_seconds",
			Help: "Time to answer an API request, by route (its pattern), method and status code. Long polls and event streams last as long as they wait.",
			// From a local read (~100 µs) to a long poll (30 s).
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "code"}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spine_http_forwarded_total",
			Help: "Requests this node forwarded to the leader (each attempt).",
		}),
		tokenLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spine_http_token_lookups_total",
			Help: "Secrets this follower did not know and asked the leader about, by outcome: accepted (it caught up with the leader and knew the token), refused, or busy (too many lookups at once: refused without asking).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"accepted", "refused", "busy"} {
		m.tokenLookups.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.requests, m.forwarded, m.tokenLookups, &stateCollector{s: s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// statusRecorder keeps the status code a handler wrote. Unwrap lets
// http.ResponseController reach the connection (flushes of event streams).
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// FlushError flushes what the handler wrote, as the writer underneath
// does: an error where it cannot (a mux connection's answer goes whole),
// which tells an event stream to end its answer there.
func (r *statusRecorder) FlushError() error {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return http.NewResponseController(r.ResponseWriter).Flush()
}

// Flush is FlushError for callers that assert http.Flusher.
func (r *statusRecorder) Flush() { _ = r.FlushError() }

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument times h under the route's pattern.
func (m *metrics) instrument(method, pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(pattern, method, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
	}
}

// handleMetrics serves the registry in Prometheus' text format.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, c *call) error {
	s.MetricsHandler().ServeHTTP(w, r)
	return nil
}

// MetricsHandler serves the node's metrics without authentication, for a
// listener of its own (spine serve --metrics-addr).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is where the server's metrics are registered.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

var (
	descJobs = prometheus.NewDesc("spine_jobs",
		"Jobs by stream and state (queued, running, done, failed, dead, cancelled) in this node's state machine. Streams past the "+strconv.Itoa(MaxMetricStreams)+" largest are summed under stream=\""+OtherStreams+"\".",
		[]string{"stream", "state"}, nil)
	descOldest = prometheus.NewDesc("spine_queue_oldest_age_seconds",
		"How long the job that has waited longest in each stream's queue has waited since it was last queued.", []string{"stream"}, nil)
	descEvents = prometheus.NewDesc("spine_job_events_total",
		"Job events this node applied since it started: created, claimed, started, completed, failed, released, reaped (a lease expired), dead, redriven, routed, comment, auto_failed. Every node applies every event.",
		[]string{"event"}, nil)
	descPaused = prometheus.NewDesc("spine_stream_paused",
		"1 for each stream an operator paused (claims skip it; POST /streams/{name}/resume ends it).", []string{"stream"}, nil)
	descRateLimited = prometheus.NewDesc("spine_jobs_rate_limited",
		"Queued jobs their key's rate limit holds back now, by stream (claimable once the rate allows; GET /rates). Streams are labelled as in spine_jobs; absent when none waits.",
		[]string{"stream"}, nil)
	descWaiters = prometheus.NewDesc("spine_claim_waiters",
		"Long-poll claims waiting for work on this node.", nil, nil)
	descRaftState = prometheus.NewDesc("spine_raft_state",
		"1 for this node's raft state (leader, follower, candidate, shutdown), 0 for the others.", []string{"state"}, nil)
	descTerm          = prometheus.NewDesc("spine_raft_term", "Raft's current term on this node.", nil, nil)
	descLeaderChanges = prometheus.NewDesc("spine_raft_leader_changes_total", "Leader changes this node observed (a leader elected or lost) since it started.", nil, nil)
	descLastIndex     = prometheus.NewDesc("spine_raft_last_index", "Index of the last entry in this node's log.", nil, nil)
	descCommitIndex   = prometheus.NewDesc("spine_raft_commit_index", "Highest index this node knows committed.", nil, nil)
	descAppliedIndex  = prometheus.NewDesc("spine_raft_applied_index", "Highest index applied to this node's state machine.", nil, nil)
	descLastContact   = prometheus.NewDesc("spine_raft_last_contact_seconds", "Time since this node last heard from the leader (0 on the leader; absent if it never has).", nil, nil)
	descLogBytes      = prometheus.NewDesc("spine_raft_log_bytes", "Size on disk of this node's raft log and stable store.", nil, nil)
	descSnapBytes     = prometheus.NewDesc("spine_raft_snapshot_bytes", "Size on disk of the raft snapshots this node keeps.", nil, nil)
	descLogBatches    = prometheus.NewDesc("spine_raft_log_appends_total", "Batches appended to this node's log, one write and one fsync each.", nil, nil)
	descLogEntries    = prometheus.NewDesc("spine_raft_log_entries_total", "Entries appended to this node's log.", nil, nil)
	descLogSeconds    = prometheus.NewDesc("spine_raft_log_append_seconds_total", "Time the log appends took to write and fsync; divided by spine_raft_log_appends_total, the cost of one durable append.", nil, nil)
	descRaftConns     = prometheus.NewDesc("spine_raft_connections_total", "Raft connections this node opened, by encoding (binary, msgpack) and side (dialled, served; msgpack dialled is not counted).", []string{"encoding", "side"}, nil)
	descMembers       = prometheus.NewDesc("spine_gossip_members", "Cluster members by health as this node's gossip sees them (alive, suspect, dead: a raft server gossip does not see). Counts this node.", []string{"health"}, nil)
	descMismatches    = prometheus.NewDesc("spine_state_hash_mismatches_total", "Peers' state hashes that differed from this node's at the same index: replicas that diverged. Must stay 0.", nil, nil)
)

// stateCollector reads the figures at scrape time.
type stateCollector struct{ s *Server }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descOldest, descRateLimited, descPaused, descEvents, descWaiters, descRaftState, descTerm,
		descLeaderChanges, descLastIndex, descCommitIndex, descAppliedIndex, descLastContact, descLogBytes,
		descSnapBytes, descLogBatches, descLogEntries, descLogSeconds, descMembers, descMismatches, descRaftConns} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	r := s.queue.Local()
	counts := r.StreamCounts()
	oldest := r.OldestQueued()
	for _, p := range r.Paused() {
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, 1, p.Stream)
	}
	// The streams named: the largest by jobs not yet finished, then by
	// all jobs, then by name.
	type size struct {
		open, all int
	}
	sizes := map[string]size{}
	for _, sc := range counts {
		z := sizes[sc.Stream]
		z.all += sc.N
		if sc.State == "queued" || sc.State == "running" {
			z.open += sc.N
		}
		sizes[sc.Stream] = z
	}
	names := make([]string, 0, len(sizes))
	for name := range sizes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := sizes[names[i]], sizes[names[j]]
		if a.open != b.open {
			return a.open > b.open
		}
		if a.all != b.all {
			return a.all > b.all
		}
		return names[i] < names[j]
	})
	label := map[string]string{}
	for i, name := range names {
		if i < MaxMetricStreams {
			label[name] = name
		} else {
			label[name] = OtherStreams
		}
	}
	jobs := map[[2]string]int{}
	for _, sc := range counts {
		jobs[[2]string{label[sc.Stream], string(sc.State)}] += sc.N
	}
	for k, n := range jobs {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	now := s.queue.Now()
	ages := map[string]int64{}
	for stream, at := range oldest {
		l := label[stream]
		if l == "" {
			l = OtherStreams
		}
		if prev, ok := ages[l]; !ok || at < prev {
			ages[l] = at
		}
	}
	for l, at := range ages {
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, max(0, float64(now-at)/1e9), l)
	}
	if waiting := r.RateWaiting(fsm.HeadRole, func(string) bool { return true }); len(waiting) > 0 {
		by := map[string]int{}
		for stream, n := range waiting {
			l := label[stream]
			if l == "" {
				l = OtherStreams
			}
			by[l] += n
		}
		for l, n := range by {
			ch <- prometheus.MustNewConstMetric(descRateLimited, prometheus.GaugeValue, float64(n), l)
		}
	}
	for ev, n := range r.EventCounts() {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(n), ev)
	}
	ch <- prometheus.MustNewConstMetric(descWaiters, prometheus.GaugeValue, float64(s.queue.Stats().ClaimWaiters))

	node, ok := s.cluster.(interface{ Metrics() clusterinfo.Metrics })
	if !ok {
		return
	}
	m := node.Metrics()
	for _, st := range []string{"Leader", "Follower", "Candidate", "Shutdown"} {
		v := 0.0
		if m.State == st {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, v, lower(st))
	}
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(m.Term))
	ch <- prometheus.MustNewConstMetric(descLeaderChanges, prometheus.CounterValue, float64(m.LeaderChanges))
	ch <- prometheus.MustNewConstMetric(descLastIndex, prometheus.GaugeValue, float64(m.LastIndex))
	ch <- prometheus.MustNewConstMetric(descCommitIndex, prometheus.GaugeValue, float64(m.CommitIndex))
	ch <- prometheus.MustNewConstMetric(descAppliedIndex, prometheus.GaugeValue, float64(m.AppliedIndex))
	if m.LastContact >= 0 {
		ch <- prometheus.MustNewConstMetric(descLastContact, prometheus.GaugeValue, m.LastContact.Seconds())
	}
	ch <- prometheus.MustNewConstMetric(descLogBytes, prometheus.GaugeValue, float64(m.LogBytes))
	ch <- prometheus.MustNewConstMetric(descSnapBytes, prometheus.GaugeValue, float64(m.SnapshotBytes))
	ch <- prometheus.MustNewConstMetric(descLogBatches, prometheus.CounterValue, float64(m.LogBatches))
	ch <- prometheus.MustNewConstMetric(descLogEntries, prometheus.CounterValue, float64(m.LogEntries))
	ch <- prometheus.MustNewConstMetric(descLogSeconds, prometheus.CounterValue, m.LogAppendSeconds)
	for h, n := range m.Members {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(n), h)
	}
	ch <- prometheus.MustNewConstMetric(descMismatches, prometheus.CounterValue, float64(m.HashMismatches))
	ch <- prometheus.MustNewConstMetric(descRaftConns, prometheus.CounterValue, float64(m.RaftConns.BinaryDialled), "binary", "dialled")
	ch <- prometheus.MustNewConstMetric(descRaftConns, prometheus.CounterValue, float64(m.RaftConns.BinaryServed), "binary", "served")
	ch <- prometheus.MustNewConstMetric(descRaftConns, prometheus.CounterValue, float64(m.RaftConns.MsgpackServed), "msgpack", "served")
}

func lower(s string) string {
	b := []byte(s)
	if len(b) > 0 && b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}
