package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// peerFiles writes each name's content into a temp dir (with a line of
// chatter before it and one after, as the real runs print) and returns the
// paths in the order given.
func peerFiles(t *testing.T, files ...[2]string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f[0])
		if err := os.WriteFile(p, []byte("[A create] …\n"+f[1]+"\nlocal cluster stopped\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// runPeer runs PeerMain and decodes its JSON line.
func runPeer(t *testing.T, paths []string) (int, *peerResult, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := PeerMain(paths, &out, &errOut)
	if code == ExitUsage || code == ExitError && out.Len() == 0 {
		return code, nil, out.String(), errOut.String()
	}
	m, err := lastJSON(out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	b, _ := json.Marshal(m)
	var res peerResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return code, &res, out.String(), errOut.String()
}

const (
	spineRun1 = `{"system":"spine-raft-r3","ok":true,"clean":true,"create_jobs_per_s":6000,"lifecycle_jobs_per_s":5000,"mixed_jobs_per_s":4000,"lifecycle_server_cpu_ms_per_job":0.25,"server_peak_rss_mib":[60.5,50,48.3]}`
	spineRun2 = `{"system":"spine-raft-r3","ok":true,"clean":true,"create_jobs_per_s":7000,"lifecycle_jobs_per_s":4500,"mixed_jobs_per_s":3000,"lifecycle_server_cpu_ms_per_job":0.3,"server_peak_rss_mib":[61,51,49]}`
	natsDef1  = `{"system":"nats-jetstream-r3","sync":"default","ok":true,"clean":true,"create_jobs_per_s":12000,"lifecycle_jobs_per_s":5000,"mixed_jobs_per_s":5000,"lifecycle_server_cpu_ms_per_job":0.25,"server_peak_rss_mib":[38.7,37.4,37.3]}`
	natsDef2  = `{"system":"nats-jetstream-r3","sync":"default","ok":true,"clean":true,"create_jobs_per_s":14000,"lifecycle_jobs_per_s":6000,"mixed_jobs_per_s":4000,"lifecycle_server_cpu_ms_per_job":0.2,"server_peak_rss_mib":[39,38,37]}`
	natsAlw1  = `{"system":"nats-jetstream-r3","sync":"always","ok":true,"clean":true,"create_jobs_per_s":3000,"lifecycle_jobs_per_s":2000,"mixed_jobs_per_s":2000,"lifecycle_server_cpu_ms_per_job":0.5,"server_peak_rss_mib":[40,39,38]}`
	natsAlw2  = `{"system":"nats-jetstream-r3","sync":"always","ok":true,"clean":true,"create_jobs_per_s":3500,"lifecycle_jobs_per_s":2250,"mixed_jobs_per_s":1500,"lifecycle_server_cpu_ms_per_job":0.6,"server_peak_rss_mib":[41,40,39]}`
)

func TestPeerRatios(t *testing.T) {
	// Out of order on purpose: rounds pair by the file name, not the order.
	paths := peerFiles(t,
		[2]string{"2-nats-always.txt", natsAlw2}, [2]string{"1-spine.txt", spineRun1},
		[2]string{"1-nats-default.txt", natsDef1}, [2]string{"2-spine.txt", spineRun2},
		[2]string{"1-nats-always.txt", natsAlw1}, [2]string{"2-nats-default.txt", natsDef2})
	code, res, out, errOut := runPeer(t, paths)
	if code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if !reflect.DeepEqual(res.Rounds, []string{"1", "2"}) || len(res.UncleanRuns) != 0 ||
		!reflect.DeepEqual(res.Runs, map[string]int{peerSpine: 2, peerNATSDefault: 2, peerNATSAlways: 2}) {
		t.Fatalf("rounds %v, runs %v, unclean %v", res.Rounds, res.Runs, res.UncleanRuns)
	}
	want := map[string]map[string][]float64{
		"default": {
			"create_jobs_per_s":               {0.5, 0.5},
			"lifecycle_jobs_per_s":            {1, 0.75},
			"mixed_jobs_per_s":                {0.8, 0.75},
			"lifecycle_server_cpu_ms_per_job": {1, 1.5},
		},
		"always": {
			"create_jobs_per_s":               {2, 2},
			"lifecycle_jobs_per_s":            {2.5, 2},
			"mixed_jobs_per_s":                {2, 2},
			"lifecycle_server_cpu_ms_per_job": {0.5, 0.5},
		},
	}
	for mode, got := range map[string]map[string]*peerRatio{"default": res.VsNATSDefault, "always": res.VsNATSAlways} {
		for key, vals := range want[mode] {
			r := got[key]
			if r == nil {
				t.Errorf("%s %s: no ratio", mode, key)
				continue
			}
			lo, hi := minMax(vals)
			if !reflect.DeepEqual(r.Values, vals) || r.Min != lo || r.Max != hi || !reflect.DeepEqual(r.Rounds, []string{"1", "2"}) {
				t.Errorf("%s %s: %+v, want values %v", mode, key, r, vals)
			}
		}
	}
	for _, s := range []string{"Spine (spine-bench --local 3), 2 runs", "default sync (natsbench), 2 runs",
		"sync always (natsbench -sync always), 2 runs", "60.5/50.0/48.3", "0.75–1.00× (1.00 0.75)", "2.00× (2.00 2.00)"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestPeerTmpfsControl: a Spine run whose data was on tmpfs is the
// control, paired with NATS on its own; Spine's ratios are unchanged by it.
func TestPeerTmpfsControl(t *testing.T) {
	tmpfs := strings.Replace(spineRun1, `"ok":true`, `"ok":true,"data_on_tmpfs":true,"create_jobs_per_s":12000`, 1)
	tmpfs = strings.Replace(tmpfs, `,"create_jobs_per_s":6000`, "", 1)
	paths := peerFiles(t,
		[2]string{"1-spine.txt", spineRun1}, [2]string{"1-nats-default.txt", natsDef1},
		[2]string{"1-nats-always.txt", natsAlw1}, [2]string{"1-spine-tmpfs.txt", tmpfs})
	code, res, out, errOut := runPeer(t, paths)
	if code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if res.Runs[peerSpine] != 1 || res.Runs[peerSpineTmpfs] != 1 {
		t.Fatalf("runs %v", res.Runs)
	}
	for name, c := range map[string]struct {
		r    *peerRatio
		want float64
	}{
		"spine vs default":    {res.VsNATSDefault["create_jobs_per_s"], 0.5},
		"tmpfs vs default":    {res.TmpfsVsNATSDefault["create_jobs_per_s"], 1},
		"tmpfs vs always":     {res.TmpfsVsNATSAlways["create_jobs_per_s"], 4},
		"tmpfs CPU vs always": {res.TmpfsVsNATSAlways["lifecycle_server_cpu_ms_per_job"], 0.5},
	} {
		if c.r == nil || c.r.Min != c.want || c.r.Max != c.want {
			t.Errorf("%s: %+v, want %v", name, c.r, c.want)
		}
	}
	for _, s := range []string{"Spine with its data on tmpfs, a control", "The control, Spine with its data on tmpfs"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	// Without a tmpfs run, the JSON line has no control.
	_, res, _, _ = runPeer(t, paths[:3])
	if res.TmpfsVsNATSDefault != nil || res.TmpfsVsNATSAlways != nil {
		t.Errorf("a control without tmpfs runs: %+v", res)
	}
}

func TestPeerUncleanRunLeftOut(t *testing.T) {
	unclean := strings.Replace(natsDef2, `"clean":true`, `"clean":false`, 1)
	paths := peerFiles(t,
		[2]string{"1-spine.txt", spineRun1}, [2]string{"1-nats-default.txt", natsDef1},
		[2]string{"2-spine.txt", spineRun2}, [2]string{"2-nats-default.txt", unclean})
	code, res, out, errOut := runPeer(t, paths)
	if code != ExitError || !strings.Contains(errOut, "1 run not clean") || !strings.Contains(out, "NOT CLEAN") {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	if r := res.VsNATSDefault["lifecycle_jobs_per_s"]; r == nil || !reflect.DeepEqual(r.Rounds, []string{"1"}) {
		t.Fatalf("the unclean round was paired: %+v", r)
	}
	if !regexp.MustCompile(`\nlifecycle jobs/s +1\.00× +-\n`).MatchString(out) {
		t.Errorf("a single round's ratio is not shown alone:\n%s", out)
	}
	if len(res.VsNATSAlways) != 0 {
		t.Fatalf("ratios to a mode without runs: %+v", res.VsNATSAlways)
	}
}

func TestPeerKind(t *testing.T) {
	for js, want := range map[string]string{
		spineRun1: peerSpine, natsDef1: peerNATSDefault, natsAlw1: peerNATSAlways,
		`{"system":"spine-raft-r3","data_on_tmpfs":true}`: peerSpineTmpfs,
		`{"system":"nats-jetstream-r3","sync":"1s"}`:      "",
		`{"system":"spine-scale"}`:                        "",
		`{"create_jobs_per_s":1}`:                         "",
	} {
		got, err := peerKind(jsonRun(t, js))
		if got != want || (err == nil) != (want != "") {
			t.Errorf("%s: %q %v, want %q", js, got, err, want)
		}
	}
}

func TestPeerFileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		files [][2]string
		want  string
	}{
		"no JSON line": {[][2]string{{"1-spine.txt", spineRun1}, {"1-nats-default.txt", "ERROR: cluster did not start"}},
			"1-nats-default.txt: no JSON line"},
		"no round": {[][2]string{{"spine.txt", spineRun1}}, "no round in the file name"},
		"same round twice": {[][2]string{{"1-spine.txt", spineRun1}, {"1-spine-again.txt", spineRun2}},
			"are both spine runs of round 1"},
	} {
		code, _, out, errOut := runPeer(t, peerFiles(t, tc.files...))
		if code != ExitError || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want an error with %q", name, code, errOut, out, tc.want)
		}
	}
	if code, _, _, _ := runPeer(t, nil); code != ExitUsage {
		t.Errorf("no files: exit %d", code)
	}
}
