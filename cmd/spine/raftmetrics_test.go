package main

import (
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gometricsprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// Raft's counters, gauges and timings reach Prometheus under their
// flattened names, labels as labels, and a series nobody fed for the
// expiry is left out of scrapes.
func TestRaftSink(t *testing.T) {
	reg := prometheus.NewRegistry()
	k := newRaftSink(time.Minute)
	reg.MustRegister(k)
	k.IncrCounter([]string{"raft", "apply"}, 1)
	k.IncrCounter([]string{"raft", "apply"}, 2)
	k.SetGauge([]string{"raft", "peers"}, 3)
	for _, peer := range []string{"n2", "n3", "n2"} {
		k.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 1.5,
			[]gometrics.Label{{Name: "peer_id", Value: peer}})
	}
	k.AddSample([]string{"raft", "commitTime"}, 0.7)
	f := gather(t, reg)
	if v := f["spine_raft_apply"].GetMetric()[0].GetCounter().GetValue(); v != 3 {
		t.Errorf("counter = %v, want 3", v)
	}
	if v := f["spine_raft_peers"].GetMetric()[0].GetGauge().GetValue(); v != 3 {
		t.Errorf("gauge = %v, want 3", v)
	}
	rpc := f["spine_raft_replication_appendEntries_rpc"].GetMetric()
	counts := map[string]uint64{}
	for _, m := range rpc {
		counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
	}
	if len(rpc) != 2 || counts["n2"] != 2 || counts["n3"] != 1 {
		t.Errorf("per-peer samples = %v, want n2:2 n3:1", counts)
	}
	if h := f["spine_raft_commitTime"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() < 0.69 || h.GetSampleSum() > 0.71 {
		t.Errorf("commitTime = %v samples summing to %v, want 1 of 0.7", h.GetSampleCount(), h.GetSampleSum())
	}
	// Age every series past the expiry but the counter.
	k.series.Range(func(_, v any) bool {
		if s := v.(*sinkSeries); s.kind != sinkCounter {
			s.updated.Store(time.Now().Add(-2 * time.Minute).UnixNano())
		}
		return true
	})
	f = gather(t, reg)
	if _, ok := f["spine_raft_commitTime"]; ok {
		t.Error("a timing without a sample for the expiry is still scraped")
	}
	if _, ok := f["spine_raft_apply"]; !ok {
		t.Error("a fresh counter is not scraped")
	}
}

// Two keys with one hash are two series.
func TestRaftSinkCollision(t *testing.T) {
	reg := prometheus.NewRegistry()
	k := newRaftSink(time.Minute)
	reg.MustRegister(k)
	a := []string{"raft", "a"}
	k.AddSample(a, 1)
	// Make b's hash land on a's series.
	s, _ := k.series.LoadAndDelete(hashKey(sinkSample, a, nil))
	b := []string{"raft", "b"}
	k.series.Store(hashKey(sinkSample, b, nil), s)
	k.AddSample(b, 2)
	k.AddSample(b, 2)
	f := gather(t, reg)
	if n := f["spine_raft_a"].GetMetric()[0].GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("a has %d samples, want 1", n)
	}
	if n := f["spine_raft_b"].GetMetric()[0].GetHistogram().GetSampleCount(); n != 2 {
		t.Errorf("b has %d samples, want 2", n)
	}
}

// BenchmarkRaftSink: one timing sample with a label, as raft's replication
// sends per AppendEntries, into this sink and into go-metrics' own
// Prometheus sink.
func BenchmarkRaftSink(b *testing.B) {
	key := []string{"raft", "replication", "appendEntries", "rpc"}
	labels := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	b.Run("sink=spine", func(b *testing.B) {
		k := newRaftSink(time.Minute)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			k.AddSampleWithLabels(key, 1.5, labels)
		}
	})
	b.Run("sink=gometrics", func(b *testing.B) {
		p, err := gometricsprom.NewPrometheusSinkFrom(gometricsprom.PrometheusOpts{Registerer: prometheus.NewRegistry(), Expiration: time.Minute, Name: "x"})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p.AddSampleWithLabels(key, 1.5, labels)
		}
	})
}

// Raft sends a few samples through go-metrics per commit: as the node
// configures it, a sample without labels allocates nothing on its way to
// the sink, and its series is named as before (spine_ first).
func TestMetricsSampleAllocatesNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	k := newRaftSink(time.Minute)
	reg.MustRegister(k)
	m, err := gometrics.New(metricsConfig(), k)
	if err != nil {
		t.Fatal(err)
	}
	key, counter := []string{"raft", "commitTime"}, []string{"raft", "apply"}
	start := time.Now()
	if n := testing.AllocsPerRun(100, func() { m.IncrCounter(counter, 1); m.MeasureSince(key, start) }); n != 0 {
		t.Errorf("%v allocations per sample, want 0", n)
	}
	f := gather(t, reg)
	if f["spine_raft_commitTime"] == nil {
		t.Errorf("no spine_raft_commitTime series: %v", f)
	}
}
