package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// opsScrape reads a node's metrics: from its metrics listener (no token),
// or from the API port with the head token when metricsURL is "".
func opsScrape(t testing.TB, n *testcluster.Node, viaAPI bool) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	u, tok := n.MetricsURL, ""
	if viaAPI {
		u, tok = n.URL+"/metrics", apiHead
	}
	req, _ := http.NewRequest("GET", u, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(b))
}

// opsValue is the value of the series of name whose labels include
// labels (pairs), summed over the series that match; ok is false if none.
func opsValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	sum, found := 0.0, false
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			match := false
			for _, lp := range m.Label {
				match = match || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
			}
			if !match {
				continue next
			}
		}
		found = true
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, found
}

// Every node's /metrics follows the queue as jobs flow, on the API port
// (head token) and on --metrics-addr; raft's own metrics are bridged; a
// leader kill shows as a leader change and a new leader, and the counts
// survive it.
func TestMetricsOnThreeNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: t.TempDir(), Nodes: 3, MetricsAddr: true,
		Env: map[string]string{"REAPER_INTERVAL_MS": "200", "SPINE_LOG_JSON": "true"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCluster(t, c) })
	leader, fs := apiRoles(t, c)

	// The API port's /metrics is for head tokens; the metrics listener
	// needs none.
	apiWantError(t, apiDo(t, "GET", fs[0].URL+"/metrics", apiLeft, nil), http.StatusForbidden, api.CodeForbidden)
	apiWantError(t, apiDo(t, "GET", fs[0].URL+"/metrics", "", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	if _, err := opsScrape(t, fs[0], true); err != nil {
		t.Fatal(err)
	}

	apiEventually(t, 20*time.Second, "every node to see three members alive and one leader", func() error {
		leaders := 0.0
		for _, n := range c.Nodes {
			m, err := opsScrape(t, n, false)
			if err != nil {
				return err
			}
			if v, _ := opsValue(m, "spine_gossip_members", "health", "alive"); v != 3 {
				return fmt.Errorf("%s sees %v members alive", n.ID, v)
			}
			v, _ := opsValue(m, "spine_raft_state", "state", "leader")
			leaders += v
		}
		if leaders != 1 {
			return fmt.Errorf("%v nodes say they lead", leaders)
		}
		return nil
	})

	// Jobs flow through a follower.
	base := fs[0].URL
	var ids []string
	for i := range 30 {
		stream := "metrics-a"
		if i%3 == 2 {
			stream = "metrics-b"
		}
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/jobs", apiHead, map[string]interface{}{"stream": stream, "payload": map[string]int{"n": i}}), http.StatusCreated), &j)
		if stream == "metrics-a" {
			ids = append(ids, j.ID)
		}
	}
	for i, id := range ids[:5] {
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/jobs/"+id+"/claim", apiLeft, map[string]string{"workerId": "w1"}), http.StatusOK), &j)
		if i < 3 {
			apiWant(t, apiDo(t, "POST", base+"/jobs/"+id+"/complete", apiLeft,
				map[string]interface{}{"leaseToken": j.LeaseToken, "attemptId": j.AttemptID, "result": map[string]bool{"ok": true}}), http.StatusOK)
		}
	}
	want := map[[2]string]float64{
		{"metrics-a", "queued"}: 15, {"metrics-a", "running"}: 2, {"metrics-a", "done"}: 3, {"metrics-b", "queued"}: 10,
	}
	checkJobs := func(nodes []*testcluster.Node) {
		t.Helper()
		apiEventually(t, 20*time.Second, "every node's spine_jobs to count the jobs", func() error {
			for _, n := range nodes {
				m, err := opsScrape(t, n, false)
				if err != nil {
					return err
				}
				for k, w := range want {
					if v, _ := opsValue(m, "spine_jobs", "stream", k[0], "state", k[1]); v != w {
						return fmt.Errorf("%s: spine_jobs{stream=%q,state=%q} = %v, want %v", n.ID, k[0], k[1], v, w)
					}
				}
				if _, ok := opsValue(m, "spine_queue_oldest_age_seconds", "stream", "metrics-b"); !ok {
					return fmt.Errorf("%s: no oldest queued age for metrics-b", n.ID)
				}
			}
			return nil
		})
	}
	checkJobs(c.Nodes)
	// The leader speaks raft's binary encoding to the followers, whose
	// gossip says they serve it.
	apiEventually(t, 20*time.Second, "the followers to serve binary raft connections", func() error {
		for _, f := range fs {
			m, err := opsScrape(t, f, false)
			if err != nil {
				return err
			}
			if v, _ := opsValue(m, "spine_raft_connections_total", "encoding", "binary", "side", "served"); v < 1 {
				return fmt.Errorf("%s served %v binary raft connections", f.ID, v)
			}
		}
		return nil
	})

	m, err := opsScrape(t, fs[0], false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"spine_job_events_total", []string{"event", "created"}, 30},
		{"spine_job_events_total", []string{"event", "claimed"}, 5},
		{"spine_job_events_total", []string{"event", "completed"}, 3},
		{"spine_http_request_duration_seconds", []string{"route", "/jobs", "method", "POST", "code", "201"}, 30},
		{"spine_http_forwarded_total", nil, 30}, // a follower forwards its writes
		{"spine_raft_log_bytes", nil, 1},
		{"spine_raft_applied_index", nil, 30},
		{"go_goroutines", nil, 1},
		{"process_cpu_seconds_total", nil, 0},
	} {
		if v, ok := opsValue(m, c.name, c.labels...); !ok || v < c.min {
			t.Errorf("%s: %s%v = %v (present %v), want at least %v", fs[0].ID, c.name, c.labels, v, ok, c.min)
		}
	}
	lm, err := opsScrape(t, leader, true)
	if err != nil {
		t.Fatal(err)
	}
	// hashicorp/raft's own metrics, bridged from go-metrics.
	if v, ok := opsValue(lm, "spine_raft_commitTime"); !ok || v == 0 {
		t.Errorf("the leader has no spine_raft_commitTime samples (bridged from raft's go-metrics)")
	}
	// The Grafana dashboard in docs/ graphs metrics the leader has.
	dash, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, name := range regexp.MustCompile(`\b(?:spine|go|process)_[A-Za-z_]+\b`).FindAllString(string(dash), -1) {
		used[name] = true
	}
	if len(used) < 10 {
		t.Fatalf("the dashboard names only %d metrics: %v", len(used), used)
	}
	for name := range used {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && lm[b] != nil {
				base = b
			}
		}
		if lm[base] == nil {
			t.Errorf("docs/grafana-dashboard.json graphs %s, which the leader does not export", name)
		}
	}

	// Kill the leader: the survivors count a leader change, one of them
	// leads, and every figure of the queue is still there.
	before := map[string]float64{}
	for _, n := range fs {
		m, err := opsScrape(t, n, false)
		if err != nil {
			t.Fatal(err)
		}
		before[n.ID], _ = opsValue(m, "spine_raft_leader_changes_total")
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 20*time.Second, "a new leader in the survivors' metrics", func() error {
		leaders := 0.0
		for _, n := range fs {
			m, err := opsScrape(t, n, false)
			if err != nil {
				return err
			}
			if v, _ := opsValue(m, "spine_raft_leader_changes_total"); v <= before[n.ID] {
				return fmt.Errorf("%s counts %v leader changes, as before the kill", n.ID, v)
			}
			v, _ := opsValue(m, "spine_raft_state", "state", "leader")
			leaders += v
		}
		if leaders != 1 {
			return fmt.Errorf("%v survivors say they lead", leaders)
		}
		return nil
	})
	checkJobs(fs)
	// One line per member's change of health: the killed node fails, then
	// joins again when it restarts.
	logged := func(n *testcluster.Node, msg, member string, times int) error {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			return err
		}
		seen := 0
		for _, line := range strings.Split(string(b), "\n") {
			var rec map[string]interface{}
			if json.Unmarshal([]byte(line), &rec) == nil && rec["@message"] == msg && rec["member"] == member {
				seen++
			}
		}
		if seen < times {
			return fmt.Errorf("%s logged %q for %s %d times, want %d", n.ID, msg, member, seen, times)
		}
		return nil
	}
	apiEventually(t, 30*time.Second, "the survivors to log the killed leader's failure", func() error {
		for _, n := range fs {
			if err := logged(n, "member failed: gossip no longer reaches it", leader.ID, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the survivors to log the restarted node joining (again)", func() error {
		for _, n := range fs {
			if err := logged(n, "member joined", leader.ID, 2); err != nil {
				return err
			}
		}
		return nil
	})

	// --log-json: every line a node wrote is a JSON object; a survivor
	// logged the leader change; no token appears in any log.
	for _, n := range fs {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		changed := false
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec map[string]interface{}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s logged a line that is not JSON: %q", n.ID, line)
			}
			changed = changed || rec["@message"] == "leader changed"
		}
		if !changed {
			t.Errorf("%s logged no leader change", n.ID)
		}
		for _, tok := range []string{apiHead, apiLeft, apiRight} {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s's log contains a token", n.ID)
			}
		}
	}
}

// opsDump is what a backup must bring back, read through base.
type opsDump struct {
	Jobs     []apiJob
	Sessions json.RawMessage
	Streams  json.RawMessage
	Registry json.RawMessage
	Blob     string
	Gateways []string
	Workers  []string
}

func opsRead(t testing.TB, base, blobID string) opsDump {
	t.Helper()
	var d opsDump
	d.Jobs = apiListAll(t, base, apiHead, url.Values{"limit": {"100"}, "consistent": {""}})
	sort.Slice(d.Jobs, func(i, j int) bool { return d.Jobs[i].ID < d.Jobs[j].ID })
	d.Sessions = apiWant(t, apiDo(t, "GET", base+"/api/sessions?consistent", apiHead, nil), http.StatusOK).Body
	d.Streams = apiWant(t, apiDo(t, "GET", base+"/api/streams?consistent", apiHead, nil), http.StatusOK).Body
	d.Registry = apiWant(t, apiDo(t, "GET", base+"/api/registry?consistent", apiHead, nil), http.StatusOK).Body
	d.Blob = string(apiWant(t, apiDo(t, "GET", base+"/blobs/"+blobID, apiHead, nil), http.StatusOK).Body)
	var gws api.GatewayList
	apiDecode(t, apiDo(t, "GET", base+"/v1/gateways?consistent", apiHead, nil), &gws)
	for _, g := range gws.Gateways {
		d.Gateways = append(d.Gateways, g.ID)
	}
	var wks api.WorkerList
	apiDecode(t, apiDo(t, "GET", base+"/v1/workers?consistent", apiHead, nil), &wks)
	for _, w := range wks.Workers {
		d.Workers = append(d.Workers, w.ID)
	}
	return d
}

// opsCLI runs the spine binary against addrs as head, in dir.
func opsCLI(t *testing.T, addrs []string, dir string, args ...string) (int, string, string) {
	t.Helper()
	return spineCLI(t, addrs, dir, []string{"SPINE_TOKEN=" + apiHead}, args...)
}

// A backup taken with `spine snapshot save` from a running cluster, the
// cluster wiped, a new one started: `spine snapshot restore` (sent to a
// follower) brings back every job in every state, session, stream, the
// registry, blobs, gateways and workers, and replaces what the new cluster
// held. Every node installs it: the new leader after a kill serves it.
// Damaged backups are refused and change nothing.
func TestSnapshotSaveWipeRestore(t *testing.T) {
	t.Parallel()
	c1 := startCluster(t, 3, nil)
	dir := t.TempDir()
	_, fs := apiRoles(t, c1)
	base := fs[0].URL

	// A bit of everything.
	yml := "project:\n  name: backup-demo\ntools:\n  run-bash:\n    task_class: MEDIUM_SCRIPT\n"
	if err := os.WriteFile(filepath.Join(dir, "spine.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI := func(addrs []string, args ...string) string {
		t.Helper()
		code, out, errOut := opsCLI(t, addrs, dir, args...)
		if code != 0 {
			t.Fatalf("spine %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	mustCLI(c1.URLs(), "reload")
	mustCLI(c1.URLs(), "session", "create", "backup-s")
	mustCLI(c1.URLs(), "stream", "create", "backup-st", "--session=backup-s", "--instructions", "keep me")
	mustCLI(c1.URLs(), "enqueue", "run-bash", `{"script_path":"x.sh"}`, "--stream=backup-st")
	var ids []string
	for i := range 12 {
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/jobs", apiHead, map[string]interface{}{"payload": map[string]int{"n": i}, "maxAttempts": 1}), http.StatusCreated), &j)
		ids = append(ids, j.ID)
	}
	for i, id := range ids[:6] {
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/jobs/"+id+"/claim", apiLeft, map[string]string{"workerId": "w1"}), http.StatusOK), &j)
		switch i % 3 {
		case 0:
			apiWant(t, apiDo(t, "POST", base+"/jobs/"+id+"/complete", apiLeft, map[string]interface{}{"leaseToken": j.LeaseToken, "attemptId": j.AttemptID, "result": map[string]int{"i": i}}), http.StatusOK)
		case 1:
			apiWant(t, apiDo(t, "POST", base+"/jobs/"+id+"/fail", apiLeft, map[string]interface{}{"leaseToken": j.LeaseToken, "attemptId": j.AttemptID, "error": map[string]string{"message": "no"}, "requeue": true}), http.StatusOK)
		}
	}
	cl, err := client.New(c1.URLs(), client.WithToken(apiHead))
	if err != nil {
		t.Fatal(err)
	}
	blob, err := cl.BlobPut(context.Background(), "notes.txt", strings.NewReader("the blob's bytes"))
	if err != nil {
		t.Fatal(err)
	}
	apiWant(t, apiDo(t, "POST", base+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: "gw-backup", Address: "http://10.9.9.9:7000", Capacity: 2}), http.StatusCreated)
	apiWant(t, apiDo(t, "POST", base+"/v1/workers", apiHead, api.WorkerRegisterRequest{ID: "wk-backup", Gateway: "gw-backup", Capacity: 1}), http.StatusCreated)
	want := opsRead(t, base, blob.ID)
	states := map[string]int{}
	for _, j := range want.Jobs {
		states[j.Status]++
	}
	if states["queued"] == 0 || states["running"] == 0 || states["done"] == 0 || states["dead"] == 0 {
		t.Fatalf("the jobs to back up do not cover the states: %v", states)
	}

	// Save through a follower, then inspect the file.
	file := filepath.Join(dir, "backup.snap")
	mustCLI([]string{fs[1].URL}, "snapshot", "save", file)
	var rep struct {
		Snapshot api.SnapshotInfo     `json:"snapshot"`
		Contents api.SnapshotContents `json:"contents"`
	}
	if err := json.Unmarshal([]byte(mustCLI(nil, "snapshot", "inspect", file)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Snapshot.Index == 0 || rep.Snapshot.Term == 0 || rep.Contents.Sessions != 1 || rep.Contents.Streams != 1 ||
		rep.Contents.Blobs != 1 || rep.Contents.Gateways != 1 || rep.Contents.Workers != 1 || !rep.Contents.Registry {
		t.Fatalf("inspect: %+v", rep)
	}
	for st, n := range states {
		if rep.Contents.Jobs[st] != n {
			t.Errorf("inspect counts %d %s jobs, the cluster had %d (tasks are jobs: %v)", rep.Contents.Jobs[st], st, n, rep.Contents.Jobs)
		}
	}

	// A damaged copy is refused by inspect, by restore, and by the server.
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), raw...)
	bad[len(bad)/2] ^= 0x20
	badFile := filepath.Join(dir, "bad.snap")
	if err := os.WriteFile(badFile, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := opsCLI(t, nil, dir, "snapshot", "inspect", badFile); code == 0 || !strings.Contains(out+errOut, "checksum") {
		t.Fatalf("inspect of a damaged file: exit %d %s%s", code, out, errOut)
	}

	// Wipe: the first cluster dies whole (SIGKILL), a new one starts.
	for _, n := range c1.Nodes {
		if err := c1.Kill(n); err != nil {
			t.Fatal(err)
		}
	}
	c2 := startCluster(t, 3, nil)
	l2, fs2 := apiRoles(t, c2)
	var other apiJob
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs2[0].URL+"/jobs", apiHead, map[string]interface{}{"payload": map[string]string{"from": "the new cluster"}}), http.StatusCreated), &other)
	req, _ := http.NewRequest("PUT", fs2[0].URL+"/v1/snapshot", bytes.NewReader(bad))
	req.Header.Set("Authorization", "Bearer "+apiHead)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "checksum") {
		t.Fatalf("PUT of a damaged snapshot: %d %s", resp.StatusCode, body)
	}
	apiWant(t, apiDo(t, "GET", l2.URL+"/jobs/"+other.ID+"?consistent", apiHead, nil), http.StatusOK)
	if code, _, _ := opsCLI(t, []string{fs2[0].URL}, dir, "snapshot", "restore", badFile); code == 0 {
		t.Fatal("restore of a damaged file succeeded")
	}

	// Restore through a follower.
	out := mustCLI([]string{fs2[1].URL}, "snapshot", "restore", file)
	var restored api.SnapshotRestored
	if err := json.Unmarshal([]byte(out), &restored); err != nil || !restored.Restored || restored.Snapshot.Index != rep.Snapshot.Index {
		t.Fatalf("restore answered %s (%v)", out, err)
	}
	check := func(base string) {
		t.Helper()
		got := opsRead(t, base, blob.ID)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after the restore, %s holds\n%+v\nwant\n%+v", base, got, want)
		}
		apiWantError(t, apiDo(t, "GET", base+"/jobs/"+other.ID+"?consistent", apiHead, nil), http.StatusNotFound, api.CodeNotFound)
	}
	check(fs2[0].URL)

	// Every node installed it: kill the leader, read from the new one.
	if err := c2.Kill(l2); err != nil {
		t.Fatal(err)
	}
	l3, _ := apiRoles(t, c2)
	check(l3.URL)
	// The restored cluster works: a restored queued job is claimed and
	// completed; the killed node comes back and catches up.
	var q apiJob
	for _, j := range want.Jobs {
		if j.Status == "queued" && j.Stream == "default" {
			q = j
			break
		}
	}
	var cj apiJob
	apiDecode(t, apiWant(t, apiDo(t, "POST", l3.URL+"/jobs/"+q.ID+"/claim", apiLeft, map[string]string{"workerId": "w2"}), http.StatusOK), &cj)
	apiWant(t, apiDo(t, "POST", l3.URL+"/jobs/"+q.ID+"/complete", apiLeft, map[string]interface{}{"leaseToken": cj.LeaseToken, "attemptId": cj.AttemptID, "result": map[string]bool{"ok": true}}), http.StatusOK)
	if err := c2.Restart(l2); err != nil {
		t.Fatal(err)
	}
}

// Bad input through a follower (forwarded to the leader) and through the
// real HTTP server: each refused with the API's JSON error naming what is
// wrong, and nothing created.
func TestBadInputOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	_, fs := apiRoles(t, c)
	f := fs[0].URL
	stream := "badinput-" + strings.ToLower(t.Name()[:4])
	for _, tc := range []struct {
		name, path, ctype, body, token string
		status                         int
		code, says                     string
	}{
		{"misspelt field", "/jobs", "application/json", `{"stream":"` + stream + `","payload":{},"maxAtempts":2}`, apiHead, 400, "invalid_request", `did you mean "maxAttempts"`},
		{"text/plain", "/jobs", "text/plain", `{"stream":"` + stream + `","payload":{}}`, apiHead, 415, "unsupported_media_type", "application/json"},
		{"an array", "/jobs", "application/json", `[{"stream":"` + stream + `"}]`, apiHead, 400, "invalid_request", "JSON object"},
		{"1e12", "/internal/worker/claim", "application/json", `{"worker_id":"w","streams":["` + stream + `"],"max_wait_ms":1e12}`, apiLeft, 400, "invalid_request", "capped at 30000"},
	} {
		r := apiDo(t, "POST", f+tc.path, tc.token, tc.body, "Content-Type", tc.ctype)
		apiWantError(t, r, tc.status, tc.code)
		var eb api.ErrorBody
		if err := json.Unmarshal(r.Body, &eb); err != nil || !strings.Contains(eb.Error.Message, tc.says) {
			t.Errorf("%s: %s does not say %q", tc.name, r.Body, tc.says)
		}
	}
	big := strings.Repeat("h", 100<<10)
	apiWantError(t, apiDo(t, "GET", f+"/jobs", apiHead, nil, "X-Big", big), http.StatusRequestHeaderFieldsTooLarge, api.CodeHeadersTooLarge)
	if jobs := apiListAll(t, f, apiHead, url.Values{"stream": {stream}, "consistent": {""}}); len(jobs) != 0 {
		t.Fatalf("refused creates made jobs: %+v", jobs)
	}

	// A slow client (headers never finished) is cut off by the node's
	// header timeout, and holds nothing up meanwhile.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+apiHead+"\r\n"); err != nil {
		t.Fatal(err)
	}
	apiWant(t, apiDo(t, "GET", f+"/health", "", nil), http.StatusOK)
	_ = conn.SetReadDeadline(time.Now().Add(40 * time.Second))
	buf := make([]byte, 512)
	for {
		_, err := conn.Read(buf)
		if err == nil {
			continue // a 408 answer, then the close
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("a client that never finished its headers was not cut off within 40 s")
		}
		break
	}
}
