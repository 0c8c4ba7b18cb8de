package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads /metrics as head and parses it.
func (e *env) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	r := e.do("GET", "/metrics", headTok, nil)
	if r.Code != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d %s", r.Code, r.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		e.t.Fatalf("parse /metrics: %v\n%s", err, r.Body)
	}
	return fams
}

// metricValue returns the value of the sample of family name whose labels
// include every pair of labels, and whether there is one.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsFollowTheQueue(t *testing.T) {
	e := newEnv(t)
	// Head only: a claw or no token is refused, and nothing is leaked.
	e.do("GET", "/metrics", "", nil).apiErr(t, http.StatusUnauthorized, "unauthorized")
	e.do("GET", "/metrics", leftTok, nil).apiErr(t, http.StatusForbidden, "forbidden")

	a := e.create(map[string]interface{}{"stream": "alpha"})["id"].(string)
	e.create(map[string]interface{}{"stream": "alpha"})
	e.create(map[string]interface{}{"stream": "beta"})
	e.claim(a, leftTok)
	fams := e.scrape()
	for _, c := range []struct {
		stream, state string
		want          float64
	}{{"alpha", "queued", 1}, {"alpha", "running", 1}, {"beta", "queued", 1}} {
		if v, _ := metricValue(fams, "spine_jobs", "stream", c.stream, "state", c.state); v != c.want {
			t.Errorf("spine_jobs{stream=%q,state=%q} = %v, want %v", c.stream, c.state, v, c.want)
		}
	}
	if _, ok := metricValue(fams, "spine_queue_oldest_age_seconds", "stream", "beta"); !ok {
		t.Error("no spine_queue_oldest_age_seconds for stream beta")
	}
	created, _ := metricValue(fams, "spine_job_events_total", "event", "created")
	claimed, _ := metricValue(fams, "spine_job_events_total", "event", "claimed")
	if created != 3 || claimed != 1 {
		t.Errorf("events: created %v claimed %v, want 3 and 1", created, claimed)
	}
	if n, _ := metricValue(fams, "spine_http_request_duration_seconds", "route", "/jobs", "method", "POST", "code", "201"); n != 3 {
		t.Errorf("request histogram of POST /jobs 201 counts %v, want 3", n)
	}

	r := e.do("POST", "/jobs/"+a+"/complete", leftTok, `{"result":{"ok":true}}`)
	if r.Code != http.StatusOK {
		t.Fatalf("complete: %d %s", r.Code, r.Body)
	}
	fams = e.scrape()
	if v, _ := metricValue(fams, "spine_jobs", "stream", "alpha", "state", "done"); v != 1 {
		t.Errorf("alpha done = %v, want 1", v)
	}
	if _, ok := metricValue(fams, "spine_jobs", "stream", "alpha", "state", "running"); ok {
		t.Error("alpha still has a running series after its one running job completed")
	}
	if v, _ := metricValue(fams, "spine_job_events_total", "event", "completed"); v != 1 {
		t.Errorf("completed events = %v, want 1", v)
	}
}

// Stream names come from producers: past MaxMetricStreams they are summed
// under one label, so the series stay bounded.
func TestMetricsStreamLabelsAreBounded(t *testing.T) {
	e := newEnv(t)
	total := MaxMetricStreams + 20
	for i := range total {
		e.create(map[string]interface{}{"stream": fmt.Sprintf("s%03d", i)})
	}
	fams := e.scrape()
	f := fams["spine_jobs"]
	if f == nil {
		t.Fatal("no spine_jobs")
	}
	named, sum := 0, 0.0
	other := 0.0
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if lp.GetName() == "stream" {
				if lp.GetValue() == OtherStreams {
					other += m.Gauge.GetValue()
				} else {
					named++
				}
			}
		}
		sum += m.Gauge.GetValue()
	}
	if named != MaxMetricStreams || other != 20 || sum != float64(total) {
		t.Fatalf("named streams %d (want %d), %s holds %v (want 20), total %v (want %d)", named, MaxMetricStreams, OtherStreams, other, sum, total)
	}
}

// plainWriter is a ResponseWriter that cannot flush, as a mux connection's
// is: its answer goes whole.
type plainWriter struct{ h http.Header }

func (w *plainWriter) Header() http.Header         { return w.h }
func (w *plainWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *plainWriter) WriteHeader(int)             {}

// The request histogram's writer flushes as the writer under it does: an
// event stream served over a mux connection must learn that it cannot
// flush, or it never ends its answer and the client never gets it.
func TestInstrumentedWriterFlushesAsItsWriter(t *testing.T) {
	var got error
	m := &metrics{requests: newMetricsForTest()}
	h := m.instrument("GET", "/x", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("data"))
		got = http.NewResponseController(w).Flush()
	})
	h(&plainWriter{h: http.Header{}}, httptest.NewRequest("GET", "/x", nil))
	if got == nil {
		t.Fatal("flushing over a writer that cannot flush reported success")
	}
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/x", nil))
	if got != nil || !rec.Flushed {
		t.Fatalf("flushing over a flushing writer: %v, flushed %v", got, rec.Flushed)
	}
}

func newMetricsForTest() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t"}, []string{"route", "method", "code"})
}
