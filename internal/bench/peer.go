package bench

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The kinds of run `spine-bench peer` puts side by side, told apart by
// their JSON line: Spine's own benchmark, and the NATS JetStream peer
// (shared/peerbench's natsbench) with its default sync and with
// `-sync always`; and, as a control, Spine with its nodes' data on tmpfs
// (data_on_tmpfs), whose fsyncs reach no disk: what Spine does when a
// durable write costs nothing, to tell the disk's share of a gap from the
// rest.
const (
	peerSpine       = "spine"
	peerSpineTmpfs  = "spine-tmpfs"
	peerNATSDefault = "nats-default"
	peerNATSAlways  = "nats-always"
)

var peerKinds = []struct{ kind, label string }{
	{peerSpine, "Spine (spine-bench --local 3)"},
	{peerNATSDefault, "NATS JetStream R3, default sync (natsbench)"},
	{peerNATSAlways, "NATS JetStream R3, sync always (natsbench -sync always)"},
	{peerSpineTmpfs, "Spine with its data on tmpfs, a control: no write reaches a disk (spine-bench --local 3 --workdir on a tmpfs)"},
}

// peerRatioMetrics are the figures of which Spine's ratio to each NATS mode
// is taken: Spine's value over the NATS run's of the same round.
var peerRatioMetrics = []compareMetric{
	{"create_jobs_per_s", "create jobs/s", false},
	{"lifecycle_jobs_per_s", "lifecycle jobs/s", false},
	{"mixed_jobs_per_s", "mixed jobs/s", false},
	{"lifecycle_server_cpu_ms_per_job", "server CPU ms per lifecycle job", true},
}

// peerRun is one file given to `spine-bench peer`.
type peerRun struct {
	file  string
	round string // the file name's prefix up to the first '-'
	kind  string // peerSpine, peerSpineTmpfs, peerNATSDefault or peerNATSAlways
	clean bool
	m     map[string]any
}

// peerRatio is one metric's Spine/NATS ratio over the rounds in which both
// runs are clean and report it.
type peerRatio struct {
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []string  `json:"rounds"`
	Values []float64 `json:"values"` // in the order of Rounds
}

// peerResult is the JSON line of `spine-bench peer`. The ratio maps are
// keyed by the metric's JSON key; a metric no round can pair is absent.
type peerResult struct {
	Rounds        []string              `json:"rounds"`
	Runs          map[string]int        `json:"runs"`
	UncleanRuns   []string              `json:"unclean_runs"`
	VsNATSDefault map[string]*peerRatio `json:"spine_vs_nats_default"`
	VsNATSAlways  map[string]*peerRatio `json:"spine_vs_nats_always"`
	// The control's ratios, when tmpfs runs were given.
	TmpfsVsNATSDefault map[string]*peerRatio `json:"spine_tmpfs_vs_nats_default,omitempty"`
	TmpfsVsNATSAlways  map[string]*peerRatio `json:"spine_tmpfs_vs_nats_always,omitempty"`
}

// PeerMain is `spine-bench peer FILE...`: each FILE is the output of one run
// of spine-bench or natsbench, named ROUND-SOMETHING (scripts/bench-peer.sh
// names them 1-spine.txt, 1-nats-default.txt, …). It prints a table per
// system, Spine's ratios to each NATS mode as min–max over the rounds, then
// one JSON line. It exits 1, after printing, when a run is not clean.
func PeerMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("spine-bench peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: spine-bench peer FILE...

Puts Spine next to NATS JetStream (scripts/bench-peer.sh makes the runs): each FILE is the
output of one run of spine-bench --local 3 or of natsbench (default sync or -sync always), whose
last JSON line is read. A file's round is its name up to the first '-' (1-spine.txt,
1-nats-default.txt, 1-nats-always.txt). Prints a table per system, then Spine's ratio to each
NATS mode per round, as min–max over the rounds, then one JSON line. Runs that are not clean
are shown but left out of the ratios, and make the exit status 1.
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "spine-bench peer: give the output files of the runs")
		return ExitUsage
	}
	runs, err := readPeerRuns(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "spine-bench peer: %v\n", err)
		return ExitError
	}
	res := peerCompare(runs)
	printPeer(stdout, runs, res)
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	if len(res.UncleanRuns) > 0 {
		fmt.Fprintf(stderr, "spine-bench peer: %s not clean: %s\n", plural(len(res.UncleanRuns), "run"), strings.Join(res.UncleanRuns, " "))
		return ExitError
	}
	return ExitOK
}

// readPeerRuns reads and classifies every file; two runs of one system in
// the same round cannot be paired and are an error.
func readPeerRuns(files []string) ([]peerRun, error) {
	var runs []peerRun
	seen := map[[2]string]string{}
	for _, f := range files {
		m, err := readLastJSON(f)
		if err != nil {
			return nil, err
		}
		kind, err := peerKind(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		round, _, ok := strings.Cut(filepath.Base(f), "-")
		if !ok || round == "" {
			return nil, fmt.Errorf("%s: no round in the file name (name it ROUND-SYSTEM.txt, as scripts/bench-peer.sh does)", f)
		}
		key := [2]string{round, kind}
		if other, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s and %s are both %s runs of round %s", other, f, kind, round)
		}
		seen[key] = f
		clean, _ := m["clean"].(bool)
		runs = append(runs, peerRun{file: f, round: round, kind: kind, clean: clean, m: m})
	}
	return runs, nil
}

// peerKind classifies a run by its JSON line's system and sync fields.
func peerKind(m map[string]any) (string, error) {
	sys, _ := m["system"].(string)
	switch sys {
	case "spine-raft-r3", "spine": // "spine": a run that panicked before it knew its node count
		if tmpfs, _ := m["data_on_tmpfs"].(bool); tmpfs {
			return peerSpineTmpfs, nil
		}
		return peerSpine, nil
	case "nats-jetstream-r3":
		switch sync, _ := m["sync"].(string); sync {
		case "default":
			return peerNATSDefault, nil
		case "always":
			return peerNATSAlways, nil
		default:
			return "", fmt.Errorf("a NATS run with sync %q: only default and always are compared", sync)
		}
	}
	return "", fmt.Errorf("system %q is neither a 3-node Spine (spine-raft-r3) nor NATS JetStream R3 (nats-jetstream-r3)", sys)
}

// roundOrder sorts rounds numerically when both are numbers, else as text.
func roundOrder(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	return cmp.Compare(a, b)
}

// peerCompare takes, for each NATS mode and metric, Spine's ratio (and
// the tmpfs control's) in every round where both runs are clean and report
// the metric.
func peerCompare(runs []peerRun) *peerResult {
	res := &peerResult{Runs: map[string]int{}, UncleanRuns: []string{},
		VsNATSDefault: map[string]*peerRatio{}, VsNATSAlways: map[string]*peerRatio{}}
	byRound := map[string]map[string]peerRun{}
	for _, r := range runs {
		if byRound[r.round] == nil {
			byRound[r.round] = map[string]peerRun{}
			res.Rounds = append(res.Rounds, r.round)
		}
		byRound[r.round][r.kind] = r
		res.Runs[r.kind]++
		if !r.clean {
			res.UncleanRuns = append(res.UncleanRuns, r.file)
		}
	}
	slices.SortFunc(res.Rounds, roundOrder)
	if res.Runs[peerSpineTmpfs] > 0 {
		res.TmpfsVsNATSDefault, res.TmpfsVsNATSAlways = map[string]*peerRatio{}, map[string]*peerRatio{}
	}
	for _, vs := range []struct {
		spine, kind string
		out         map[string]*peerRatio
	}{
		{peerSpine, peerNATSDefault, res.VsNATSDefault}, {peerSpine, peerNATSAlways, res.VsNATSAlways},
		{peerSpineTmpfs, peerNATSDefault, res.TmpfsVsNATSDefault}, {peerSpineTmpfs, peerNATSAlways, res.TmpfsVsNATSAlways},
	} {
		if vs.out == nil {
			continue
		}
		for _, m := range peerRatioMetrics {
			var ratio *peerRatio
			for _, round := range res.Rounds {
				s, okS := byRound[round][vs.spine]
				n, okN := byRound[round][vs.kind]
				if !okS || !okN || !s.clean || !n.clean {
					continue
				}
				sv, okS := metricValue(s.m, m.key)
				nv, okN := metricValue(n.m, m.key)
				if !okS || !okN {
					continue
				}
				if ratio == nil {
					ratio = &peerRatio{}
				}
				ratio.Rounds = append(ratio.Rounds, round)
				ratio.Values = append(ratio.Values, round3(sv/nv))
			}
			if ratio != nil {
				ratio.Min, ratio.Max = minMax(ratio.Values)
				vs.out[m.key] = ratio
			}
		}
	}
	return res
}

// peerState is a run's last column: whether its figures can be compared.
func peerState(r peerRun) string {
	switch ok, _ := r.m["ok"].(bool); {
	case r.clean:
		return "yes"
	case !ok:
		return "FAILED"
	}
	return "NOT CLEAN"
}

func printPeer(w io.Writer, runs []peerRun, res *peerResult) {
	for _, k := range peerKinds {
		var mine []peerRun
		for _, r := range runs {
			if r.kind == k.kind {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		slices.SortFunc(mine, func(a, b peerRun) int { return roundOrder(a.round, b.round) })
		fmt.Fprintf(w, "\n%s, %s\n", k.label, plural(len(mine), "run"))
		rows := [][]string{{"round", "create jobs/s", "lifecycle jobs/s", "mixed jobs/s", "CPU ms/lifecycle job", "peak RSS MiB n1/n2/n3", "clean"}}
		for _, r := range mine {
			row := []string{r.round}
			for _, key := range []string{"create_jobs_per_s", "lifecycle_jobs_per_s", "mixed_jobs_per_s", "lifecycle_server_cpu_ms_per_job"} {
				if v, ok := metricValue(r.m, key); ok {
					row = append(row, fmtNum(v))
				} else {
					row = append(row, "-")
				}
			}
			rss := "-"
			if list, _ := r.m["server_peak_rss_mib"].([]any); len(list) > 0 {
				parts := make([]string, len(list))
				for i, x := range list {
					v, _ := x.(float64)
					parts[i] = strconv.FormatFloat(v, 'f', 1, 64)
				}
				rss = strings.Join(parts, "/")
			}
			rows = append(rows, append(row, rss, peerState(r)))
		}
		renderTable(w, rows)
	}
	fmt.Fprintln(w, "\nSpine / NATS, each round's Spine run over the same round's NATS run, min–max over the rounds")
	fmt.Fprintln(w, "(above 1: Spine's figure is the larger; for CPU, below 1 Spine spends less; runs not clean are left out):")
	fmt.Fprintln(w)
	renderRatios(w, res.VsNATSDefault, res.VsNATSAlways)
	if res.TmpfsVsNATSDefault != nil {
		fmt.Fprintln(w, "\nThe control, Spine with its data on tmpfs (no durable write reaches a disk), over NATS in the same round:")
		fmt.Fprintln(w)
		renderRatios(w, res.TmpfsVsNATSDefault, res.TmpfsVsNATSAlways)
	}
	if len(res.UncleanRuns) > 0 {
		fmt.Fprintf(w, "\nWARNING: not clean (errors, lost jobs or redeliveries, or the run failed): %s\n",
			strings.Join(res.UncleanRuns, " "))
	}
	fmt.Fprintln(w)
}

// renderRatios prints a metric per row, its ratio to each NATS mode.
func renderRatios(w io.Writer, vsDefault, vsAlways map[string]*peerRatio) {
	rows := [][]string{{"metric", "vs NATS default", "vs NATS sync always"}}
	for _, m := range peerRatioMetrics {
		rows = append(rows, []string{m.label, fmtRatio(vsDefault[m.key]), fmtRatio(vsAlways[m.key])})
	}
	renderTable(w, rows)
}

// fmtRatio is "lo–hi× (each round's)", "r×" for a single round, or "-"
// when no round pairs.
func fmtRatio(r *peerRatio) string {
	if r == nil {
		return "-"
	}
	rng := strconv.FormatFloat(r.Min, 'f', 2, 64)
	if hi := strconv.FormatFloat(r.Max, 'f', 2, 64); hi != rng {
		rng += "–" + hi
	}
	if len(r.Values) < 2 {
		return rng + "×"
	}
	parts := make([]string, len(r.Values))
	for i, v := range r.Values {
		parts[i] = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return fmt.Sprintf("%s× (%s)", rng, strings.Join(parts, " "))
}

// plural is "1 run", "2 runs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
