package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// slackList describes the nodes' timer slack: one value when they agree.
func slackList(ns []int64) string {
	parts := make([]string, len(ns))
	same := true
	for i, v := range ns {
		parts[i] = "unknown"
		if v >= 0 {
			parts[i] = time.Duration(v).String()
		}
		same = same && v == ns[0]
	}
	if same && len(parts) > 0 {
		return parts[0] + " on every node"
	}
	return strings.Join(parts, " / ")
}

// raft describes a phase's log appends (c holds the phase's differences):
// entries per fsync'ed append, the mean time of one, and appends per job
// over all nodes.
func (c counters) raft(jobs int64) string {
	if c.batches == 0 || jobs <= 0 {
		return ""
	}
	each := ""
	if ms := c.appendMs(); ms > 0 {
		each = fmt.Sprintf(" (%.2f ms each)", ms)
	}
	return fmt.Sprintf("              raft log: %.1f entries per fsync'ed append%s, %.2f appends per job (all nodes)\n",
		c.perBatch(), each, float64(c.batches)/float64(jobs))
}

// appendMs is the mean time of one log append (write + fsync) over all
// nodes, 0 if unknown.
func (c counters) appendMs() float64 {
	if c.batches == 0 || c.appendSec <= 0 {
		return 0
	}
	return round3(c.appendSec * 1000 / float64(c.batches))
}

// perBatch is the mean number of entries per log append, 0 if unknown.
func (c counters) perBatch() float64 {
	if c.batches == 0 {
		return 0
	}
	return round3(float64(c.entries) / float64(c.batches))
}

// sampleCost reads the nodes' counters now; the returned func reads them
// again and returns the differences (and adds the per-node CPU to r.cpuSum).
func (r *runner) sampleCost(ctx context.Context) (func() counters, error) {
	t0, per0, err := r.a.counters(ctx)
	if err != nil {
		return nil, err
	}
	return func() counters {
		t1, per1, err := r.a.counters(ctx)
		if err != nil {
			r.printf("    could not sample the servers' counters after the phase: %v\n", err)
			return counters{}
		}
		if r.cpuSum == nil {
			r.cpuSum = make([]float64, len(per1))
		}
		for i := range per1 {
			r.cpuSum[i] += per1[i] - per0[i]
		}
		d := counters{cpu: round3(t1.cpu - t0.cpu)}
		if t1.batches >= t0.batches && t1.entries >= t0.entries { // else a node restarted: unknown
			d.batches, d.entries = t1.batches-t0.batches, t1.entries-t0.entries
			if t1.appendSec >= t0.appendSec {
				d.appendSec = t1.appendSec - t0.appendSec
			}
		}
		if t1.localHB >= t0.localHB {
			d.localHB = t1.localHB - t0.localHB
		}
		return d
	}, nil
}

// ---------------------------------------------------------------- producers
