package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func jsonRun(t *testing.T, js string) map[string]any {
	t.Helper()
	m, err := lastJSON([]byte("spine-bench: …\nsummary: …\n" + js + "\nlocal cluster stopped\n"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLastJSON(t *testing.T) {
	m := jsonRun(t, `{"create_jobs_per_s":100}`)
	if m["create_jobs_per_s"] != float64(100) {
		t.Fatalf("%v", m)
	}
	if _, err := lastJSON([]byte("ERROR: boom\n{not json\n")); err == nil {
		t.Fatal("no JSON line accepted")
	}
}

func TestMetricValueRSS(t *testing.T) {
	m := jsonRun(t, `{"leader":"n2","server_peak_rss_mib":[250.5,330,240]}`)
	if v, ok := metricValue(m, "@rss_leader"); !ok || v != 330 {
		t.Errorf("leader RSS %v %v", v, ok)
	}
	if v, ok := metricValue(m, "@rss_followers"); !ok || v != 250.5 {
		t.Errorf("followers RSS %v %v", v, ok)
	}
	if _, ok := metricValue(jsonRun(t, `{"server_peak_rss_mib":[1,2,3]}`), "@rss_leader"); ok {
		t.Error("RSS of an unknown leader")
	}
	if _, ok := metricValue(m, "mixed_jobs_per_s"); ok {
		t.Error("an absent metric was found")
	}
}

func TestCompareRuns(t *testing.T) {
	base := []map[string]any{
		jsonRun(t, `{"create_jobs_per_s":100,"lifecycle_jobs_per_s":50,"cpu_ms_per_job":1.0,"claim_p99_ms":10,"clean":true}`),
		jsonRun(t, `{"create_jobs_per_s":110,"lifecycle_jobs_per_s":60,"cpu_ms_per_job":1.2,"claim_p99_ms":12,"clean":true}`),
	}
	nw := []map[string]any{
		jsonRun(t, `{"create_jobs_per_s":150,"lifecycle_jobs_per_s":55,"cpu_ms_per_job":1.5,"claim_p99_ms":5,"clean":true}`),
		jsonRun(t, `{"create_jobs_per_s":160,"lifecycle_jobs_per_s":58,"cpu_ms_per_job":1.3,"claim_p99_ms":6,"clean":false}`),
	}
	res := compareRuns(base, nw, "main", "tree")
	if res.UncleanRuns != 1 || res.BaseRuns != 2 || res.NewRuns != 2 {
		t.Fatalf("%+v", res)
	}
	rows := map[string]compareRow{}
	for _, r := range res.Metrics {
		rows[r.Key] = r
	}
	if len(rows) != 4 {
		t.Fatalf("rows %v: only metrics both builds report", rows)
	}
	c := rows["create_jobs_per_s"]
	if c.BaseMean != 105 || c.NewMean != 155 || c.Ratio != 1.476 || c.Verdict != "better" {
		t.Errorf("create: %+v", c)
	}
	if v := rows["lifecycle_jobs_per_s"].Verdict; v != "within noise" {
		t.Errorf("lifecycle: %s", v)
	}
	if v := rows["cpu_ms_per_job"].Verdict; v != "worse" {
		t.Errorf("more CPU per job: %s", v)
	}
	if v := rows["claim_p99_ms"].Verdict; v != "better" {
		t.Errorf("lower p99: %s", v)
	}
}

func TestCompareMain(t *testing.T) {
	dir := t.TempDir()
	write := func(name, js string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("summary: …\n"+js+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b1 := write("b1", `{"create_jobs_per_s":100,"leader":"n1","server_peak_rss_mib":[300,200,210],"clean":true}`)
	b2 := write("b2", `{"create_jobs_per_s":120,"leader":"n1","server_peak_rss_mib":[310,205,215],"clean":true}`)
	n1 := write("n1", `{"create_jobs_per_s":130,"leader":"n1","server_peak_rss_mib":[250,150,160],"clean":true}`)
	var out, errOut bytes.Buffer
	if code := CompareMain([]string{"--base", b1 + "," + b2, "--new", n1, "--base-label", "main (abc)"}, &out, &errOut); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res compareResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not the JSON result: %v\n%s", err, out.String())
	}
	if res.BaseLabel != "main (abc)" || len(res.Metrics) != 3 {
		t.Fatalf("%+v", res)
	}
	for _, want := range []string{"create jobs/s", "100 120", "1.182", "peak RSS, leader MiB", "0.820", "no spread"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if code := CompareMain([]string{"--base", b1}, &out, &errOut); code != ExitUsage {
		t.Errorf("no --new: exit %d", code)
	}
	if code := CompareMain([]string{"--base", b1, "--new", filepath.Join(dir, "absent")}, &out, &errOut); code != ExitError {
		t.Errorf("absent file: exit %d", code)
	}
}
