package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/spine-queue/spine/internal/testcluster"
)

func TestParseSizes(t *testing.T) {
	for in, want := range map[string][]int{
		"1000,30000":             {1000, 30000},
		"1k, 30k,100K,0.3m":      {1000, 30000, 100000, 300000},
		"5":                      {5},
		"1_000,2k,":              {1000, 2000},
		"1000,30000,100000,300k": {1000, 30000, 100000, 300000},
	} {
		got, err := parseSizes(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", ",", "0", "-5", "abc", "30k,1k", "1k,1000", "20m", "1e3x"} {
		if got, err := parseSizes(in); err == nil {
			t.Errorf("parseSizes(%q) = %v, want an error", in, got)
		}
	}
}

func TestSizesUpTo(t *testing.T) {
	for n, want := range map[int][]int{
		300000:  {1000, 30000, 100000, 300000},
		30000:   {1000, 30000},
		50000:   {1000, 30000, 50000},
		1000:    {1000},
		500:     {500},
		1000000: {1000, 30000, 100000, 300000, 1000000},
	} {
		got, err := sizesUpTo(n)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("sizesUpTo(%d) = %v, %v; want %v", n, got, err, want)
		}
	}
	if _, err := sizesUpTo(0); err == nil {
		t.Error("sizesUpTo(0) accepted")
	}
}

// The tail of a heap profile fetched with debug=1, as net/http/pprof
// writes it.
const heapDebug1 = `heap profile: 3: 1024 [9: 4096] @ heap/1048576
1: 512 [1: 512] @ 0x1 0x2
#	0x1	main.f+0x1	/x.go:1

# runtime.MemStats
# Alloc = 62914560
# TotalAlloc = 100000000
# HeapAlloc = 62914560
# HeapInuse = 75497472
# PauseNs = [1 2 3]
# NumGC = 12
`

func TestParseMemStats(t *testing.T) {
	m := parseMemStats([]byte(heapDebug1))
	if m["HeapAlloc"] != 62914560 || m["HeapInuse"] != 75497472 || m["NumGC"] != 12 {
		t.Fatalf("parseMemStats: %v", m)
	}
	if _, ok := m["PauseNs"]; ok {
		t.Fatal("a list was read as a number")
	}
}

func TestPromValue(t *testing.T) {
	text := []byte(`# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.2345678e+07
go_memstats_heap_alloc_bytes_total 99
go_memstats_heap_inuse_bytes{x="y"} 5
go_memstats_heap_inuse_bytes 16384
`)
	if v := promValue(text, "go_memstats_heap_alloc_bytes"); v != 12345678 {
		t.Errorf("heap_alloc = %v", v)
	}
	if v := promValue(text, "go_memstats_heap_inuse_bytes"); v != 16384 {
		t.Errorf("heap_inuse = %v (a labelled sample or a longer name was taken)", v)
	}
	if v := promValue(text, "absent"); v != 0 {
		t.Errorf("absent = %v", v)
	}
}

func TestThousandsAndPerJob(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 300000: "300,000", 1234567: "1,234,567", -30000: "-30,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	got := perJobBytes([]float64{11, 3}, []float64{1, 1}, 1<<20)
	if !reflect.DeepEqual(got, []float64{10, 2}) {
		t.Errorf("perJobBytes = %v", got)
	}
	if got := joinFloats([]float64{1.25, 2}, 1); got != "1.2/2.0" && got != "1.3/2.0" {
		t.Errorf("joinFloats = %q", got)
	}
}

func TestRenderTable(t *testing.T) {
	var b bytes.Buffer
	renderTable(&b, [][]string{{"route", "1,000", "300,000"}, {"GET /health", "0.06 / 0.1", "1 / 2"}, {"ü", "x", ""}})
	want := "route             1,000  300,000\n" +
		"GET /health  0.06 / 0.1    1 / 2\n" +
		"ü                     x\n"
	if b.String() != want {
		t.Fatalf("renderTable:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The report has a row per route and figure and a column per size, and
// the recovery figures after it; a size that failed part-way shows "-".
func TestPrintScale(t *testing.T) {
	res := &scaleResult{Nodes: 3, Payload: 256, Streams: 20, Samples: 50, Sizes: []scaleSize{
		{Queued: 1000, FillJobsPerS: 9000, LiveHeapForced: true, RSSMiB: []float64{50, 30, 30},
			Routes: []scaleRoute{{Route: "claim (worker)", N: 50, P50: 1, P99: 2}, {Route: "GET /dlq", N: 0, Errors: 50}}},
		{Queued: 30000, FillJobsPerS: 8000, RSSMiB: []float64{200, 120, 120},
			Routes: []scaleRoute{{Route: "claim (worker)", N: 50, P50: 1.5, P99: 3, Errors: 1}}},
	}, Recovery: &recoveryFigs{Queued: 30000, SaveSeconds: 0.4, SnapshotBytes: 15_200_000, LeaderKillSeconds: 1.1,
		Leader: "n1", NewLeader: "n3", RestoreSeconds: 1.4, RestoreError: "503 no_leader", QueuedAfter: 30002},
		Idle: &idleFigs{Seconds: 30, RSSMiB: []float64{60, 40, 41}, RSSBytesPerJob: []float64{980, 912, 915}},
		Finished: &finishedFigs{Jobs: 30002, DrainJobsPer: 5000, IdleSeconds: 30, RSSMiB: []float64{70, 50, 51},
			LiveHeapMiB: []float64{40, 33, 34}, RSSBytesPerJob: []float64{1200, 1100, 1101}, LiveHeapBytesPerJob: []float64{840, 830, 831}}}
	var b bytes.Buffer
	printScale(&b, res)
	out := b.String()
	for _, want := range []string{"queued jobs", "30,000", "claim (worker)", "1.00 / 2.00", "1.50 / 3.00 (1 err)",
		"50 errors", "RSS MiB", "200/120/120", "live heap MiB (after GC)", "15.2 MB", "new leader n3",
		"FAILED (below)", "the restore failed: 503 no_leader", "queued after recovery: 30,002",
		"at 30,000 queued jobs, at rest (30s without a request", "60/40/41", "980/912/915",
		"every job finished (30,002 done", "live heap bytes per finished job   840/830/831", "1200/1100/1101"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "GET /dlq") || !strings.Contains(out, " -") {
		t.Errorf("a route missing at a size is not shown as -:\n%s", out)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}

// TestScaleEndToEnd runs `spine-bench scale` at two small sizes against a
// real 3-node cluster, recovery included.
func TestScaleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	dir := t.TempDir()
	bin, err := testcluster.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := ScaleMain([]string{"--binary", bin, "--workdir", dir, "--sizes", "100,400", "--samples", "3",
		"--producers", "8", "--timeout", "3m", "--idle", "1s"}, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if code != ExitOK {
		t.Fatalf("exit code %d", code)
	}
	var res scaleResult
	found := false
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatalf("JSON line: %v", err)
			}
			found = true
		}
	}
	if !found || !res.OK || len(res.Sizes) != 2 || res.Recovery == nil || res.Idle == nil || len(res.Idle.RSSMiB) != 3 {
		t.Fatalf("result: %+v", res)
	}
	for _, sz := range res.Sizes {
		if sz.QueuedSeen != sz.Queued || len(sz.Routes) != 3+len(scaleReads()) || len(sz.RSSMiB) != 3 || !sz.LiveHeapForced {
			t.Errorf("size %d: %+v", sz.Queued, sz)
		}
		for _, r := range sz.Routes {
			if r.N != 3 || r.Errors != 0 || r.P50 <= 0 {
				t.Errorf("size %d: %+v", sz.Queued, r)
			}
		}
	}
	if f := res.Finished; f == nil || f.Jobs < 400 || len(f.RSSMiB) != 3 || len(f.LiveHeapBytesPerJob) != 3 {
		t.Errorf("finished: %+v", f)
	}
	rec := res.Recovery
	if rec.SaveSeconds <= 0 || rec.SnapshotBytes <= 0 || rec.TransferBytes <= 0 || rec.LeaderKillSeconds <= 0 ||
		rec.FollowerSyncSeconds <= 0 || rec.FullRestartWriteSeconds <= 0 || rec.QueuedAfter < 400 {
		t.Errorf("recovery: %+v", rec)
	}
}
