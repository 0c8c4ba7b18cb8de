package bench

import (
	"math"
	"sort"
	"sync"
	"time"
)

// lat collects latency samples from many goroutines. Each goroutine keeps
// its own slice and hands it over once (addAll), so the hot loop takes no lock.
type lat struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *lat) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *lat) addAll(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// Summary of one latency series, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Max  float64 `json:"max_ms"`
}

func (l *lat) summary() Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Summarize(l.d)
}

// Summarize sorts d in place and returns its percentiles (nearest rank, as
// peerbench computes them) in milliseconds.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return Summary{N: len(d), P50: Percentile(d, 50), P99: Percentile(d, 99),
		Mean: ms(sum / time.Duration(len(d))), Max: ms(d[len(d)-1])}
}

// Percentile returns the p-th percentile (0..100, nearest rank) of the
// ascending slice sorted, in milliseconds; 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(sorted) {
		rank = len(sorted) - 1
	}
	return ms(sorted[rank])
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func perJobMs(cpuSec float64, jobs int64) float64 {
	if jobs <= 0 {
		return 0
	}
	return round3(cpuSec * 1000 / float64(jobs))
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round1(float64(n) / d.Seconds())
}
