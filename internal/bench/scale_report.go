package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// parseSizes reads "1000,30k,0.1m": ascending queue sizes, each 1 to
// 10,000,000.
func parseSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		mult := 1.0
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1e3, f[:len(f)-1]
		case strings.HasSuffix(f, "m"):
			mult, f = 1e6, f[:len(f)-1]
		}
		x, err := strconv.ParseFloat(strings.ReplaceAll(f, "_", ""), 64)
		n := int(x*mult + 0.5)
		if err != nil || n < 1 || n > 10_000_000 {
			return nil, fmt.Errorf("a size is a number of jobs from 1 to 10,000,000 (1000, 30k, 1m), not %q", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes must ascend: %d after %d", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no size in %q", v)
	}
	return out, nil
}

// sizesUpTo is the default sizes below n, then n.
func sizesUpTo(n int) ([]int, error) {
	if n < 1 || n > 10_000_000 {
		return nil, fmt.Errorf("--n is a number of jobs from 1 to 10,000,000, not %d", n)
	}
	var out []int
	for _, s := range defaultScaleSizes {
		if s < n {
			out = append(out, s)
		}
	}
	return append(out, n), nil
}

// parseMemStats reads the "# Name = value" lines of a debug=1 heap
// profile (runtime.MemStats).
func parseMemStats(b []byte) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "# ") {
			continue
		}
		k, v, ok := strings.Cut(line[2:], " = ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[k] = f
		}
	}
	return out
}

// promValue is the value of the first sample of metric name (without
// labels) in a Prometheus text exposition, 0 if absent.
func promValue(b []byte, name string) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return f
		}
	}
	return 0
}

// thousands writes n with commas: 300,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// joinFloats writes a per-node list as a/b/c.
func joinFloats(v []float64, prec int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strings.Join(parts, "/")
}

// renderTable writes rows (the first is the header) as columns padded to
// their widest cell, the first left-aligned, the rest right-aligned.
func renderTable(w io.Writer, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// printScale writes the table of a scale run: a row per route and figure,
// a column per size; then the recovery figures.
func printScale(w io.Writer, res *scaleResult) {
	if len(res.Sizes) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d nodes, %d-byte payloads over %d streams; each route: %d requests one at a time to the leader, p50 / p99 ms;\nper-node figures n1/n2/…\n\n",
		res.Nodes, res.Payload, res.Streams, res.Samples)
	head := []string{"queued jobs"}
	for _, sz := range res.Sizes {
		head = append(head, thousands(sz.Queued))
	}
	rows := [][]string{head}
	row := func(name string, cell func(sz scaleSize) string) {
		r := []string{name}
		for _, sz := range res.Sizes {
			r = append(r, cell(sz))
		}
		rows = append(rows, r)
	}
	row("fill: jobs/s", func(sz scaleSize) string { return strconv.FormatFloat(sz.FillJobsPerS, 'f', 0, 64) })
	for i, rt := range res.Sizes[0].Routes {
		row(rt.Route, func(sz scaleSize) string {
			if i >= len(sz.Routes) {
				return "-"
			}
			r := sz.Routes[i]
			if r.N == 0 {
				return fmt.Sprintf("%d errors", r.Errors)
			}
			c := fmt.Sprintf("%.2f / %.2f", r.P50, r.P99)
			if r.Errors > 0 {
				c += fmt.Sprintf(" (%d err)", r.Errors)
			}
			return c
		})
	}
	row("RSS MiB", func(sz scaleSize) string { return joinFloats(sz.RSSMiB, 0) })
	heap := "live heap MiB (after GC)"
	if !res.Sizes[0].LiveHeapForced {
		heap = "heap alloc MiB (/metrics)"
	}
	row(heap, func(sz scaleSize) string { return joinFloats(sz.LiveHeapMiB, 0) })
	row("heap in use MiB", func(sz scaleSize) string { return joinFloats(sz.HeapInuseMiB, 0) })
	row("live heap bytes per queued job", func(sz scaleSize) string { return joinFloats(sz.LiveHeapBytesPerJob, 0) })
	row("RSS bytes per queued job", func(sz scaleSize) string { return joinFloats(sz.RSSBytesPerJob, 0) })
	row("queued (GET /v1/state)", func(sz scaleSize) string { return thousands(sz.QueuedSeen) })
	renderTable(w, rows)
	if id := res.Idle; id != nil {
		last := res.Sizes[len(res.Sizes)-1]
		fmt.Fprintf(w, "\nat %s queued jobs, at rest (%s without a request; the table's RSS is read right after the fill):\n",
			thousands(last.Queued), time.Duration(id.Seconds*float64(time.Second)))
		fmt.Fprintf(w, "  RSS MiB                   %s\n", joinFloats(id.RSSMiB, 0))
		fmt.Fprintf(w, "  RSS bytes per queued job  %s\n", joinFloats(id.RSSBytesPerJob, 0))
	}

	defer printFinished(w, res.Finished)
	r := res.Recovery
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nat %s queued jobs:\n", thousands(r.Queued))
	add := func(name string, sec float64, note string) {
		if sec > 0 {
			fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-52s %7.2f s  %s", name, sec, note), " "))
		}
	}
	add("spine snapshot save FILE", r.SaveSeconds, fmt.Sprintf("%.1f MB", float64(r.SnapshotBytes)/1e6))
	add("GET /v1/snapshot read to its end", r.TransferSeconds, fmt.Sprintf("%.1f MB", float64(r.TransferBytes)/1e6))
	note := ""
	if r.RestoreError != "" {
		note = "FAILED (below)"
	}
	add("spine snapshot restore FILE: answered", r.RestoreSeconds, note)
	add("  then a leader, every node in sync", r.RestoreSyncSeconds, thousands(r.QueuedAfterRestore)+" queued")
	add("follower "+r.Follower+" SIGKILLed, started: answers /health", r.FollowerUpSeconds, "")
	add("  has applied the leader's commit index", r.FollowerSyncSeconds, "")
	add("leader "+r.Leader+" SIGKILLed: until a create succeeds", r.LeaderKillSeconds, "new leader "+r.NewLeader)
	add("  old leader started again: in sync", r.OldLeaderSyncSeconds, "")
	add("every node SIGKILLed, started: first create", r.FullRestartWriteSeconds, "")
	add("  every node in sync", r.FullRestartSyncSeconds, "")
	if r.RestoreError != "" {
		fmt.Fprintf(w, "the restore failed: %s\n", r.RestoreError)
	}
	if r.QueuedAfter > 0 {
		fmt.Fprintf(w, "queued after recovery: %s\n", thousands(r.QueuedAfter))
	}
}

// printFinished is the report's last section: the memory per finished job.
func printFinished(w io.Writer, f *finishedFigs) {
	if f == nil || f.Jobs == 0 {
		return
	}
	fmt.Fprintf(w, "\nevery job finished (%s done, drained at %.0f jobs/s), at rest (%s without a request):\n",
		thousands(f.Jobs), f.DrainJobsPer, time.Duration(f.IdleSeconds*float64(time.Second)))
	fmt.Fprintf(w, "  RSS MiB                            %s\n", joinFloats(f.RSSMiB, 0))
	fmt.Fprintf(w, "  live heap MiB                      %s\n", joinFloats(f.LiveHeapMiB, 0))
	fmt.Fprintf(w, "  heap in use MiB                    %s\n", joinFloats(f.HeapInuseMiB, 0))
	fmt.Fprintf(w, "  RSS bytes per finished job         %s\n", joinFloats(f.RSSBytesPerJob, 0))
	fmt.Fprintf(w, "  live heap bytes per finished job   %s\n", joinFloats(f.LiveHeapBytesPerJob, 0))
}
