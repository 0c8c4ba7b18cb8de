package drill

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// KillRecord is one leader kill.
type KillRecord struct {
	N    int    // 1-based
	Node string // the leader that was killed
	Pid  int
	// At is the kill's offset from the start of the drill.
	At time.Duration
	// RestartDelay is the (random) delay before the node was restarted.
	RestartDelay time.Duration
	// NewLeader is the node seen leading next; Election is when it was first
	// seen (polled every 20ms), from the SIGKILL.
	NewLeader string
	Election  time.Duration
	// Unavailable is the write unavailability: from the SIGKILL to the answer
	// of the first acknowledged probe create sent after it. The probe tries
	// every few milliseconds, one try per client call.
	Unavailable time.Duration
	// ProducerGap is the hole the producers saw in their acknowledgements
	// around the kill (last answer before it to first answer after it),
	// with the client's retry waits included.
	ProducerGap time.Duration
	// Recovered is when every node, the restarted one included, had applied
	// the new leader's commit index, from the SIGKILL.
	Recovered time.Duration

	killAt time.Time
}

// Report is the outcome of a drill.
type Report struct {
	Seed         int64
	Nodes        int
	KillsPlanned int
	Producers    int
	Workers      int
	Kills        []KillRecord

	// Jobs is the number of acknowledged creates (ProbeJobs of them by the
	// probe); JobsInCluster is how many jobs the cluster holds at the end
	// (more when a create's answer was lost when the load stopped).
	Jobs, ProbeJobs, JobsInCluster int
	// Claims answered to the workers, completes acknowledged to them.
	Claims, Completes int
	// Retried or refused calls (expected around kills, not violations).
	CreateRetries, ProbeErrors, DuplicateAnswers, ClaimErrors, CompleteErrors, StaleRefused int

	// The guarantees.
	Lost              int  // acknowledged creates missing at the end
	DoubleCompletions int  // jobs acknowledged complete for two attempts
	NotDone           int  // jobs not done after the drain
	EventsChecked     int  // jobs whose event history was read
	EventViolations   int  // of those, histories without exactly one matching completed event
	Reaped            int  // reaped events in the histories read (leases the reaper took back)
	NodesAgree        bool // every node holds the same (id, status, attempts, modifyIndex)
	Disagreements     int
	FinalIndex        uint64 // leader commit index the nodes were compared at
	// HashesAgree: every node reached the same applied index with the same
	// state hash and saw no hash mismatch (testcluster.CheckConverged).
	HashesAgree bool
	// Verified is set when the final verification ran to the end.
	Verified bool

	DrainTime time.Duration
	Duration  time.Duration
	// Dir holds the nodes' data and logs (empty once removed).
	Dir string
	// Violations lists every broken guarantee; Err says why the drill could
	// not finish, if it could not.
	Violations []string
	Err        string
}

func (r *Report) violation(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// OK reports whether the drill finished and found no violation.
func (r *Report) OK() bool { return r.Err == "" && r.Verified && len(r.Violations) == 0 }

// Unavailability returns the median and max write unavailability over the kills.
func (r *Report) Unavailability() (median, maxd time.Duration) {
	return medianMax(r.Kills, func(k KillRecord) time.Duration { return k.Unavailable })
}

// ProducerGaps returns the median and max of the producers' observed gaps.
func (r *Report) ProducerGaps() (median, maxd time.Duration) {
	return medianMax(r.Kills, func(k KillRecord) time.Duration { return k.ProducerGap })
}

// ElectionTimes returns the median and max time to a visible new leader.
func (r *Report) ElectionTimes() (median, maxd time.Duration) {
	return medianMax(r.Kills, func(k KillRecord) time.Duration { return k.Election })
}

func medianMax(ks []KillRecord, f func(KillRecord) time.Duration) (time.Duration, time.Duration) {
	if len(ks) == 0 {
		return 0, 0
	}
	ds := make([]time.Duration, len(ks))
	for i, k := range ks {
		ds[i] = f(k)
	}
	slices.Sort(ds)
	n := len(ds)
	med := ds[n/2]
	if n%2 == 0 {
		med = (ds[n/2-1] + ds[n/2]) / 2
	}
	return med, ds[n-1]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%dms", d.Round(time.Millisecond).Milliseconds())
}

// String is the human report.
func (r *Report) String() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	p("== Spine failover drill ==")
	p("seed %d (SEED=%d to replay), %d nodes, %d producers + probe, %d workers, %s",
		r.Seed, r.Seed, r.Nodes, r.Producers, r.Workers, r.Duration.Round(100*time.Millisecond))
	p("")
	p("kills                 %d of %d", len(r.Kills), r.KillsPlanned)
	if len(r.Kills) > 0 {
		p("   #  at        killed  pid      new leader  leader seen  first write  producer gap  restart after  caught up")
		for _, k := range r.Kills {
			p("  %2d  %-8s  %-6s  %-7d  %-10s  %11s  %11s  %12s  %13s  %9s", k.N, k.At.Round(100*time.Millisecond),
				k.Node, k.Pid, k.NewLeader, ms(k.Election), ms(k.Unavailable), ms(k.ProducerGap), ms(k.RestartDelay), ms(k.Recovered))
		}
	}
	med, mx := r.Unavailability()
	emed, emx := r.ElectionTimes()
	gmed, gmx := r.ProducerGaps()
	p("write unavailability  median %s, max %s  (probe; target: median < 1500ms, max < 3000ms on 3-node loopback)", ms(med), ms(mx))
	p("producer gap          median %s, max %s  (as the producers saw it, client retry waits included)", ms(gmed), ms(gmx))
	p("new leader visible    median %s, max %s", ms(emed), ms(emx))
	p("")
	p("jobs acknowledged     %d (%d by the probe); %d in the cluster", r.Jobs, r.ProbeJobs, r.JobsInCluster)
	p("claims / completes    %d / %d acknowledged", r.Claims, r.Completes)
	p("retried or refused    probe tries failed %d, producer creates given up %d, duplicate answers %d,",
		r.ProbeErrors, r.CreateRetries, r.DuplicateAnswers)
	p("                      claim errors %d, complete errors %d (stale lease %d)", r.ClaimErrors, r.CompleteErrors, r.StaleRefused)
	p("drain                 %s (leases reaped: %d, in the histories checked)", r.DrainTime.Round(100*time.Millisecond), r.Reaped)
	p("")
	if !r.Verified {
		p("final state           NOT VERIFIED (the drill did not get that far)")
	}
	p("lost                  %d", r.Lost)
	p("double completions    %d", r.DoubleCompletions)
	p("not done              %d", r.NotDone)
	p("bad event histories   %d (of %d checked)", r.EventViolations, r.EventsChecked)
	p("nodes agree           %s (%d nodes at index %d, %d differences)", yes(r.NodesAgree), r.Nodes, r.FinalIndex, r.Disagreements)
	p("state hashes agree    %s", yes(r.HashesAgree))
	for _, v := range r.Violations {
		p("VIOLATION: %s", v)
	}
	if r.Err != "" {
		p("ERROR: %s", r.Err)
	}
	if r.Dir != "" {
		p("data and node logs in %s", r.Dir)
	}
	if r.OK() {
		p("RESULT: PASS")
	} else {
		p("RESULT: FAIL")
	}
	return b.String()
}

// JSON is the report as one JSON object (durations in milliseconds).
func (r *Report) JSON() []byte {
	type kill struct {
		N             int     `json:"n"`
		Node          string  `json:"node"`
		Pid           int     `json:"pid"`
		AtMS          float64 `json:"at_ms"`
		RestartMS     float64 `json:"restart_delay_ms"`
		NewLeader     string  `json:"new_leader"`
		ElectionMS    float64 `json:"election_ms"`
		UnavailableMS float64 `json:"unavailable_ms"`
		ProducerGapMS float64 `json:"producer_gap_ms"`
		RecoveredMS   float64 `json:"recovered_ms"`
	}
	f := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	kills := make([]kill, 0, len(r.Kills))
	for _, k := range r.Kills {
		kills = append(kills, kill{k.N, k.Node, k.Pid, f(k.At), f(k.RestartDelay), k.NewLeader,
			f(k.Election), f(k.Unavailable), f(k.ProducerGap), f(k.Recovered)})
	}
	med, mx := r.Unavailability()
	emed, emx := r.ElectionTimes()
	gmed, gmx := r.ProducerGaps()
	out := map[string]any{
		"ok": r.OK(), "seed": r.Seed, "nodes": r.Nodes, "kills_planned": r.KillsPlanned, "kills": len(r.Kills),
		"kill_log": kills, "producers": r.Producers, "workers": r.Workers,
		"jobs": r.Jobs, "probe_jobs": r.ProbeJobs, "jobs_in_cluster": r.JobsInCluster,
		"claims": r.Claims, "completes": r.Completes, "create_retries": r.CreateRetries,
		"duplicate_answers": r.DuplicateAnswers, "claim_errors": r.ClaimErrors,
		"complete_errors": r.CompleteErrors, "stale_refused": r.StaleRefused,
		"lost": r.Lost, "double_completions": r.DoubleCompletions, "not_done": r.NotDone,
		"events_checked": r.EventsChecked, "reaped": r.Reaped, "event_violations": r.EventViolations,
		"verified": r.Verified, "nodes_agree": r.NodesAgree, "disagreements": r.Disagreements, "hashes_agree": r.HashesAgree, "final_index": r.FinalIndex,
		"unavailability_median_ms": f(med), "unavailability_max_ms": f(mx),
		"producer_gap_median_ms": f(gmed), "producer_gap_max_ms": f(gmx), "probe_errors": r.ProbeErrors,
		"election_median_ms": f(emed), "election_max_ms": f(emx),
		"drain_ms": f(r.DrainTime), "duration_ms": f(r.Duration),
		"violations": r.Violations, "error": r.Err, "dir": r.Dir,
	}
	b, _ := json.Marshal(out)
	return b
}
