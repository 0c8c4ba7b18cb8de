package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// compareMetric is one row of `spine-bench compare`: a key of the JSON
// line (or a figure derived from it, named with a leading @).
type compareMetric struct {
	key, label  string
	lowerBetter bool
}

var compareMetrics = []compareMetric{
	{"create_jobs_per_s", "create jobs/s", false},
	{"lifecycle_jobs_per_s", "lifecycle jobs/s", false},
	{"mixed_jobs_per_s", "mixed jobs/s", false},
	{"cpu_ms_per_job", "server CPU ms per job (all nodes)", true},
	{"create_server_cpu_ms_per_job", "  of a create", true},
	{"lifecycle_server_cpu_ms_per_job", "  of a lifecycle", true},
	{"mixed_server_cpu_ms_per_job", "  of a mixed job", true},
	{"@rss_leader", "peak RSS, leader MiB", true},
	{"@rss_followers", "peak RSS, largest follower MiB", true},
	{"create_p99_ms", "create p99 ms", true},
	{"claim_p99_ms", "lifecycle claim p99 ms", true},
	{"heartbeat_p99_ms", "lifecycle heartbeat p99 ms", true},
	{"complete_p99_ms", "lifecycle complete p99 ms", true},
	{"mixed_e2e_p99_ms", "mixed end-to-end p99 ms", true},
}

// compareRow is one metric over the runs of both builds.
type compareRow struct {
	Key      string    `json:"key"`
	Base     []float64 `json:"base"`
	New      []float64 `json:"new"`
	BaseMean float64   `json:"base_mean"`
	NewMean  float64   `json:"new_mean"`
	Ratio    float64   `json:"ratio"` // new mean / base mean
	// Verdict is "within noise" when the two builds' ranges overlap, else
	// "better" or "worse" for the new build; empty with one run of a build.
	Verdict string `json:"verdict"`
	label   string
}

// compareResult is the JSON line of `spine-bench compare`.
type compareResult struct {
	BaseLabel   string       `json:"base_label"`
	NewLabel    string       `json:"new_label"`
	BaseRuns    int          `json:"base_runs"`
	NewRuns     int          `json:"new_runs"`
	UncleanRuns int          `json:"unclean_runs"`
	Metrics     []compareRow `json:"metrics"`
}

// CompareMain is `spine-bench compare --base FILE… --new FILE…`: each FILE
// is the output of one spine-bench run (its last JSON line is read). It
// prints a table of each metric's per-run values, means and new/base
// ratio, then one JSON line.
func CompareMain(args []string, stdout, stderr io.Writer) int {
	var baseFiles, newFiles addrFlag
	var baseLabel, newLabel string
	fs := flag.NewFlagSet("spine-bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&baseFiles, "base", "output of a run of the base build; repeatable or CSV")
	fs.Var(&newFiles, "new", "output of a run of the new build; repeatable or CSV")
	fs.StringVar(&baseLabel, "base-label", "base", "what the base build is (a commit, a path)")
	fs.StringVar(&newLabel, "new-label", "new", "what the new build is")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: spine-bench compare --base FILE... --new FILE...\n\nCompares runs of two builds (scripts/bench-compare.sh makes them): each FILE is the output\nof one spine-bench run, whose last JSON line is read. Prints per-run values, means and the\nratio new/base per metric, then one JSON line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if len(baseFiles) == 0 || len(newFiles) == 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "spine-bench compare: give --base and --new files, and nothing else")
		return ExitUsage
	}
	read := func(files []string) ([]map[string]any, error) {
		var out []map[string]any
		for _, f := range files {
			m, err := readLastJSON(f)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}
	base, err := read(baseFiles)
	if err == nil {
		var nw []map[string]any
		if nw, err = read(newFiles); err == nil {
			res := compareRuns(base, nw, baseLabel, newLabel)
			printCompare(stdout, res)
			b, _ := json.Marshal(res)
			fmt.Fprintln(stdout, string(b))
			return ExitOK
		}
	}
	fmt.Fprintf(stderr, "spine-bench compare: %v\n", err)
	return ExitError
}

// readLastJSON reads file f and returns its last JSON line: a benchmark
// run's result.
func readLastJSON(f string) (map[string]any, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	m, err := lastJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return m, nil
}

// lastJSON is the last line of b that is a JSON object.
func lastJSON(b []byte) (map[string]any, error) {
	var last map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			last = m
		}
	}
	if last == nil {
		return nil, errors.New("no JSON line (did the run fail?)")
	}
	return last, nil
}

// metricValue reads one metric of a run; ok is false when the run has none.
func metricValue(run map[string]any, key string) (float64, bool) {
	switch key {
	case "@rss_leader", "@rss_followers":
		list, _ := run["server_peak_rss_mib"].([]any)
		leader := -1
		if id, _ := run["leader"].(string); strings.HasPrefix(id, "n") {
			if n, err := strconv.Atoi(id[1:]); err == nil {
				leader = n - 1
			}
		}
		if leader < 0 || leader >= len(list) {
			return 0, false
		}
		if key == "@rss_leader" {
			v, ok := list[leader].(float64)
			return v, ok && v > 0
		}
		best, found := 0.0, false
		for i, x := range list {
			if v, ok := x.(float64); ok && i != leader && v > 0 {
				best, found = math.Max(best, v), true
			}
		}
		return best, found
	}
	v, ok := run[key].(float64)
	return v, ok && v > 0
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func minMax(v []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// compareRuns makes the rows of every metric both builds' runs report.
func compareRuns(base, nw []map[string]any, baseLabel, newLabel string) *compareResult {
	res := &compareResult{BaseLabel: baseLabel, NewLabel: newLabel, BaseRuns: len(base), NewRuns: len(nw)}
	for _, run := range append(append([]map[string]any{}, base...), nw...) {
		if c, ok := run["clean"].(bool); ok && !c {
			res.UncleanRuns++
		}
	}
	for _, m := range compareMetrics {
		row := compareRow{Key: m.key, label: m.label}
		for _, run := range base {
			if v, ok := metricValue(run, m.key); ok {
				row.Base = append(row.Base, v)
			}
		}
		for _, run := range nw {
			if v, ok := metricValue(run, m.key); ok {
				row.New = append(row.New, v)
			}
		}
		if len(row.Base) == 0 || len(row.New) == 0 {
			continue
		}
		row.BaseMean, row.NewMean = round3(mean(row.Base)), round3(mean(row.New))
		if row.BaseMean > 0 {
			row.Ratio = round3(row.NewMean / row.BaseMean)
		}
		bl, bh := minMax(row.Base)
		nl, nh := minMax(row.New)
		switch {
		case len(row.Base) < 2 || len(row.New) < 2:
			row.Verdict = "" // one run has no spread to judge noise by
		case nl <= bh && bl <= nh:
			row.Verdict = "within noise"
		case (nl > bh) != m.lowerBetter:
			row.Verdict = "better"
		default:
			row.Verdict = "worse"
		}
		res.Metrics = append(res.Metrics, row)
	}
	return res
}

// fmtNum writes a figure with 3 significant digits at least, no exponent.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func fmtList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmtNum(x)
	}
	return strings.Join(parts, " ")
}

func printCompare(w io.Writer, res *compareResult) {
	fmt.Fprintf(w, "\nbase: %s (%d runs)\nnew:  %s (%d runs)\n", res.BaseLabel, res.BaseRuns, res.NewLabel, res.NewRuns)
	if res.UncleanRuns > 0 {
		fmt.Fprintf(w, "WARNING: %d runs were not clean (errors, lost jobs or redeliveries): their figures are not comparable\n", res.UncleanRuns)
	}
	if res.BaseRuns < 2 || res.NewRuns < 2 {
		fmt.Fprintln(w, "one run of a build has no spread to judge noise by: run PAIRS=3 or more before concluding")
	} else {
		fmt.Fprintln(w, `"within noise": the two builds' ranges overlap; otherwise better or worse for new`)
	}
	fmt.Fprintln(w)
	rows := [][]string{{"metric", "base runs", "new runs", "base mean", "new mean", "new/base", ""}}
	for _, r := range res.Metrics {
		rows = append(rows, []string{r.label, fmtList(r.Base), fmtList(r.New), fmtNum(r.BaseMean), fmtNum(r.NewMean),
			strconv.FormatFloat(r.Ratio, 'f', 3, 64), r.Verdict})
	}
	renderTable(w, rows)
}
