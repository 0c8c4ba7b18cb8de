package main

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// raftSink carries the metrics hashicorp/raft and memberlist emit through
// go-metrics (a few per committed entry on every node) into the Prometheus
// registry. Each key becomes one series, made the first time it is seen
// and found again by a hash of the key, without building its name: a
// sample costs a hash, a map read and an atomic add. Timings are
// histograms in milliseconds, the unit go-metrics measures them in.
// A series without a sample for a minute is left out of scrapes (a
// follower shows no leader-only timings).
type raftSink struct {
	series sync.Map // uint64 (hashKey) → *sinkSeries
	mu     sync.Mutex
	// collided holds the series whose hash another key took first.
	collided map[string]*sinkSeries
	expire   time.Duration
}

type sinkKind byte

const (
	sinkGauge sinkKind = iota
	sinkCounter
	sinkSample
)

type sinkSeries struct {
	kind    sinkKind
	parts   []string
	labels  []gometrics.Label
	gauge   prometheus.Gauge
	counter prometheus.Counter
	hist    prometheus.Histogram
	updated atomic.Int64 // unix nanoseconds of the last sample
}

// sinkBuckets: 0.05 ms to 3.3 s, doubling (also fits counts of 1 to 3,000).
var sinkBuckets = prometheus.ExponentialBuckets(0.05, 2, 17)

var sinkNameReplacer = strings.NewReplacer(" ", "_", ".", "_", "=", "_", "-", "_", "/", "_")

// sinkPrefix begins every series' name: spine_raft_commitTime in
// Prometheus, spine.raft.commitTime in /debug/metrics.
const sinkPrefix = "spine"

func newRaftSink(expire time.Duration) *raftSink {
	return &raftSink{collided: map[string]*sinkSeries{}, expire: expire}
}

// hashKey is FNV-1a over the kind, the key's parts and the labels.
func hashKey(kind sinkKind, parts []string, labels []gometrics.Label) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h = (h ^ 0xff) * prime // a separator no key holds
	}
	h = (h ^ uint64(kind)) * prime
	for _, p := range parts {
		mix(p)
	}
	for _, l := range labels {
		mix(l.Name)
		mix(l.Value)
	}
	return h
}

func (s *sinkSeries) is(kind sinkKind, parts []string, labels []gometrics.Label) bool {
	if s.kind != kind || len(s.parts) != len(parts) || len(s.labels) != len(labels) {
		return false
	}
	for i := range parts {
		if s.parts[i] != parts[i] {
			return false
		}
	}
	for i := range labels {
		if s.labels[i] != labels[i] {
			return false
		}
	}
	return true
}

// get returns the series of a key, making it the first time.
func (k *raftSink) get(kind sinkKind, parts []string, labels []gometrics.Label) *sinkSeries {
	h := hashKey(kind, parts, labels)
	if v, ok := k.series.Load(h); ok {
		if s := v.(*sinkSeries); s.is(kind, parts, labels) {
			return s
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.series.Load(h); ok {
		if s := v.(*sinkSeries); s.is(kind, parts, labels) {
			return s
		}
		// Another key has this hash: keep this one by its name.
		name := k.name(kind, parts, labels)
		if s := k.collided[name]; s != nil {
			return s
		}
		s := k.make(kind, parts, labels)
		k.collided[name] = s
		return s
	}
	s := k.make(kind, parts, labels)
	k.series.Store(h, s)
	return s
}

func (k *raftSink) name(kind sinkKind, parts []string, labels []gometrics.Label) string {
	var b strings.Builder
	b.WriteByte(byte('0' + kind))
	for _, p := range parts {
		b.WriteString("|" + p)
	}
	for _, l := range labels {
		b.WriteString("|" + l.Name + "=" + l.Value)
	}
	return b.String()
}

func (k *raftSink) make(kind sinkKind, parts []string, labels []gometrics.Label) *sinkSeries {
	s := &sinkSeries{kind: kind, parts: append([]string(nil), parts...), labels: append([]gometrics.Label(nil), labels...)}
	name := sinkNameReplacer.Replace(sinkPrefix + "_" + strings.Join(parts, "_"))
	var constLabels prometheus.Labels
	if len(labels) > 0 {
		constLabels = prometheus.Labels{}
		for _, l := range labels {
			constLabels[sinkNameReplacer.Replace(l.Name)] = l.Value
		}
	}
	help := "hashicorp/raft's or memberlist's " + strings.Join(parts, ".")
	switch kind {
	case sinkGauge:
		s.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constLabels})
	case sinkCounter:
		s.counter = prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels})
	default:
		s.hist = prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help + " (milliseconds for timings)",
			ConstLabels: constLabels, Buckets: sinkBuckets})
	}
	return s
}

func (k *raftSink) SetGauge(key []string, val float32) { k.SetGaugeWithLabels(key, val, nil) }
func (k *raftSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	s := k.get(sinkGauge, key, labels)
	s.gauge.Set(float64(val))
	s.updated.Store(time.Now().UnixNano())
}

// EmitKey is a key-value event with no Prometheus form: dropped.
func (k *raftSink) EmitKey(key []string, val float32) {}

func (k *raftSink) IncrCounter(key []string, val float32) { k.IncrCounterWithLabels(key, val, nil) }
func (k *raftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if val < 0 {
		return // a Prometheus counter only grows
	}
	s := k.get(sinkCounter, key, labels)
	s.counter.Add(float64(val))
	s.updated.Store(time.Now().UnixNano())
}

func (k *raftSink) AddSample(key []string, val float32) { k.AddSampleWithLabels(key, val, nil) }
func (k *raftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	s := k.get(sinkSample, key, labels)
	s.hist.Observe(float64(val))
	s.updated.Store(time.Now().UnixNano())
}

// Describe sends nothing: the series are made as raft names them (an
// unchecked collector).
func (k *raftSink) Describe(chan<- *prometheus.Desc) {}

// Collect sends every series with a sample in the last expire.
func (k *raftSink) Collect(ch chan<- prometheus.Metric) {
	cutoff := time.Now().Add(-k.expire).UnixNano()
	send := func(s *sinkSeries) {
		if s.updated.Load() < cutoff {
			return
		}
		switch s.kind {
		case sinkGauge:
			ch <- s.gauge
		case sinkCounter:
			ch <- s.counter
		default:
			ch <- s.hist
		}
	}
	k.series.Range(func(_, v any) bool { send(v.(*sinkSeries)); return true })
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.collided {
		send(s)
	}
}

// sinkSummary is what /debug/metrics shows: every series since the node
// started, under go-metrics' dotted names.
type sinkSummary struct {
	Gauges   []sinkValue  `json:"Gauges"`
	Counters []sinkValue  `json:"Counters"`
	Samples  []sinkTiming `json:"Samples"`
}

type sinkValue struct {
	Name   string            `json:"Name"`
	Value  float64           `json:"Value"`
	Labels map[string]string `json:"Labels,omitempty"`
}

type sinkTiming struct {
	Name   string            `json:"Name"`
	Count  uint64            `json:"Count"`
	Sum    float64           `json:"Sum"`
	Mean   float64           `json:"Mean"`
	Labels map[string]string `json:"Labels,omitempty"`
}

func (k *raftSink) summary() sinkSummary {
	out := sinkSummary{Gauges: []sinkValue{}, Counters: []sinkValue{}, Samples: []sinkTiming{}}
	add := func(s *sinkSeries) {
		name := sinkPrefix + "." + strings.Join(s.parts, ".")
		var labels map[string]string
		if len(s.labels) > 0 {
			labels = map[string]string{}
			for _, l := range s.labels {
				labels[l.Name] = l.Value
			}
		}
		var m dto.Metric
		switch s.kind {
		case sinkGauge:
			_ = s.gauge.Write(&m)
			out.Gauges = append(out.Gauges, sinkValue{Name: name, Value: m.GetGauge().GetValue(), Labels: labels})
		case sinkCounter:
			_ = s.counter.Write(&m)
			out.Counters = append(out.Counters, sinkValue{Name: name, Value: m.GetCounter().GetValue(), Labels: labels})
		default:
			_ = s.hist.Write(&m)
			h := m.GetHistogram()
			v := sinkTiming{Name: name, Count: h.GetSampleCount(), Sum: h.GetSampleSum(), Labels: labels}
			if v.Count > 0 {
				v.Mean = v.Sum / float64(v.Count)
			}
			out.Samples = append(out.Samples, v)
		}
	}
	k.series.Range(func(_, v any) bool { add(v.(*sinkSeries)); return true })
	k.mu.Lock()
	for _, s := range k.collided {
		add(s)
	}
	k.mu.Unlock()
	for _, l := range [][]sinkValue{out.Gauges, out.Counters} {
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	}
	sort.Slice(out.Samples, func(i, j int) bool { return out.Samples[i].Name < out.Samples[j].Name })
	return out
}
