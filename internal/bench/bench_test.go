package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Fatalf("empty: %v", got)
	}
	one := ms(7)
	for _, p := range []float64{0, 50, 99, 100} {
		if got := Percentile(one, p); got != 7 {
			t.Fatalf("single p%v = %v", p, got)
		}
	}
	// 1..100 ms: nearest rank p50 = 50, p99 = 99, p100 = 100, p0 = 1.
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose: Summarize sorts
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(d)
	if s.N != 100 || s.P50 != 50 || s.P99 != 99 || s.Max != 100 || s.Mean != 50.5 {
		t.Fatalf("1..100: %+v", s)
	}
	if got := Percentile(d, 0); got != 1 {
		t.Fatalf("p0 = %v", got)
	}
	// 10 samples: p99 rounds up to the largest.
	if got := Percentile(ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99); got != 10 {
		t.Fatalf("p99 of 10 = %v", got)
	}
	if got := Percentile(ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 50); got != 5 {
		t.Fatalf("p50 of 10 = %v", got)
	}
	if got := Summarize(ms(1, 2)).Mean; got != 1.5 {
		t.Fatalf("mean = %v", got)
	}
}

func TestCreateBody(t *testing.T) {
	for _, size := range []int{minPayload, 256, 1000} {
		b := createBody(nil, "s-1", 1234567890123456789, 42, size)
		var v struct {
			Stream  string          `json:"stream"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("size %d: %v: %s", size, err, b)
		}
		if v.Stream != "s-1" || len(v.Payload) != size {
			t.Fatalf("size %d: stream %q payload %d bytes: %s", size, v.Stream, len(v.Payload), v.Payload)
		}
		var p struct{ T, I int64 }
		if err := json.Unmarshal(v.Payload, &p); err != nil || p.T != 1234567890123456789 || p.I != 42 {
			t.Fatalf("payload %s: %+v %v", v.Payload, p, err)
		}
	}
}

func TestLocalFlag(t *testing.T) {
	var l localFlag
	if err := l.Set("true"); err != nil || l.n != 3 {
		t.Fatal(l.n, err)
	}
	if err := l.Set("5"); err != nil || l.n != 5 {
		t.Fatal(l.n, err)
	}
	if err := l.Set("0"); err == nil {
		t.Fatal("0 nodes accepted")
	}
}

// TestEndToEnd runs all phases with 300 jobs against a real 3-node cluster
// (spine processes started by --local from a freshly built binary).
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	dir := t.TempDir()
	bin, err := testcluster.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Main([]string{"--local", "3", "--binary", bin, "--workdir", dir, "--jobs", "300",
		"--producers", "8", "--workers", "8", "--timeout", "50s", "--phase-timeout", "20s", "--claim-wait", "200ms"},
		&out, &errOut, os.Getenv)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// The JSON line is the last but one: the cluster-stopped line follows it.
	var res map[string]any
	found := false
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-3; i-- {
		if strings.HasPrefix(lines[i], "{") {
			if err := json.Unmarshal([]byte(lines[i]), &res); err != nil {
				t.Fatalf("JSON line does not parse: %v", err)
			}
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no JSON line")
	}
	if code != ExitOK {
		t.Fatalf("exit code %d", code)
	}
	for _, k := range []string{"create_jobs_per_s", "lifecycle_jobs_per_s", "mixed_jobs_per_s", "create_p99_ms",
		"claim_p99_ms", "complete_p99_ms", "mixed_e2e_p99_ms", "cpu_ms_per_job"} {
		v, ok := res[k].(float64)
		if !ok || v <= 0 {
			t.Errorf("%s = %v, want > 0", k, res[k])
		}
	}
	if res["errors"] != float64(0) || res["ok"] != true || res["clean"] != true {
		t.Errorf("errors %v ok %v clean %v", res["errors"], res["ok"], res["clean"])
	}
	if res["lifecycle_completed"] != float64(300) || res["mixed_completed"] != float64(300) {
		t.Errorf("completed %v / %v, want 300", res["lifecycle_completed"], res["mixed_completed"])
	}
}
