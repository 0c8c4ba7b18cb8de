package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// finishedFigs is what a node holds per finished job: at the end of the
// run every queued job was claimed and completed, then the cluster
// received no request for --idle, and each node's memory was read again.
type finishedFigs struct {
	Jobs         int     `json:"jobs"` // done at the end: the drained and those the routes' timings completed
	DrainJobsPer float64 `json:"drain_jobs_per_s"`
	DrainSeconds float64 `json:"drain_s"`
	IdleSeconds  float64 `json:"idle_s"`
	// Per node, node order; per job as (now - empty cluster) / jobs.
	RSSMiB              []float64 `json:"rss_mib"`
	LiveHeapMiB         []float64 `json:"live_heap_mib"`
	HeapInuseMiB        []float64 `json:"heap_inuse_mib"`
	RSSBytesPerJob      []float64 `json:"rss_bytes_per_job"`
	LiveHeapBytesPerJob []float64 `json:"live_heap_bytes_per_job"`
}

// finish claims and completes every queued job through the leader (as many
// workers as producers, each completing with its next claim), waits for
// the followers and for cfg.idle, then reads every node's memory: what a
// cluster holds per finished job while retention keeps them.
func (s *scaleRun) finish(ctx context.Context, base memFigs) (*finishedFigs, error) {
	l, err := s.leader(ctx, 30*time.Second)
	if err != nil {
		return nil, err
	}
	f := &finishedFigs{}
	var done atomic.Int64
	el, errN, first := s.together(ctx, func(ctx context.Context, g int, fail func(error)) {
		wid := fmt.Sprintf("spine-bench-scale-%02d", g)
		// Every stream in turn, from the g-th, each until a claim finds it
		// empty.
		for k := 0; k < s.cfg.streams && ctx.Err() == nil; {
			stream := s.streamName(g + k)
			c, err := s.a.claim(ctx, l, wid, stream, 0)
			if err != nil {
				fail(err)
				continue
			}
			for c != nil && c.Claimed && ctx.Err() == nil {
				if _, c, err = s.a.complete(ctx, l, wid, c, stream, true); err != nil {
					fail(err)
					break
				}
				done.Add(1)
			}
			if err == nil && (c == nil || !c.Claimed) {
				k++
			}
		}
	})
	f.DrainSeconds, f.DrainJobsPer = round3(el.Seconds()), perSec(done.Load(), el)
	if err := ctx.Err(); err != nil {
		return f, err
	}
	if errN > 0 {
		return f, fmt.Errorf("%d claims or completes failed; first: %v", errN, first)
	}
	jobs, err := s.jobCounts(ctx, l)
	if err != nil {
		return f, err
	}
	if jobs["queued"] != 0 || jobs["running"] != 0 {
		return f, fmt.Errorf("after the drain %d jobs are queued and %d running", jobs["queued"], jobs["running"])
	}
	if _, err := s.inSync(ctx, 2*time.Minute); err != nil {
		return f, err
	}
	// Every job the run made is done: those the routes' timings completed
	// too.
	f.Jobs = jobs["done"]
	s.printf("[finish] claimed and completed %s jobs in %.1fs (%.0f jobs/s, %d workers on the leader), %s done in all; idle for %s\n",
		thousands(int(done.Load())), el.Seconds(), f.DrainJobsPer, s.cfg.producers, thousands(f.Jobs), s.cfg.idle)
	select {
	case <-time.After(s.cfg.idle):
	case <-ctx.Done():
		return f, ctx.Err()
	}
	m, err := s.memory(ctx)
	if err != nil {
		return f, fmt.Errorf("memory: %w", err)
	}
	f.IdleSeconds, f.RSSMiB, f.LiveHeapMiB, f.HeapInuseMiB = s.cfg.idle.Seconds(), m.rss, m.live, m.inuse
	f.RSSBytesPerJob, f.LiveHeapBytesPerJob = perJobBytes(m.rss, base.rss, f.Jobs), perJobBytes(m.live, base.live, f.Jobs)
	s.printf("[finish] %s finished jobs: RSS %s MiB, live heap %s MiB, per finished job %s / %s bytes\n", thousands(f.Jobs),
		joinFloats(m.rss, 1), joinFloats(m.live, 1), joinFloats(f.RSSBytesPerJob, 0), joinFloats(f.LiveHeapBytesPerJob, 0))
	return f, nil
}
