package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// BenchmarkDashboardTab measures what an open web UI dashboard costs the
// node that serves it, with many jobs queued and jobs arriving: a local
// 3-node cluster is filled with SPINE_BENCH_QUEUED queued jobs (default
// 300,000; 256-byte payloads over 20 streams), then, while 5 jobs a second
// are created, the leader's CPU time (utime + stime from /proc) is read
// over a 60 s window with no tab open, then with a head's dashboard tab
// open on the leader, alternating, twice each. It reports the leader's CPU
// without a tab (idle-%core), with one (tab-%core) and their difference
// (tab-cost-%core), in percent of one core. Needs Chromium.
//
//	go test -run xxx -bench DashboardTab -benchtime 1x -timeout 30m ./systemtest/
func BenchmarkDashboardTab(b *testing.B) {
	queued := 300_000
	if v, err := strconv.Atoi(os.Getenv("SPINE_BENCH_QUEUED")); err == nil && v > 0 {
		queued = v
	}
	const window = 60 * time.Second
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: b.TempDir(), Nodes: 3, Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	leader, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := client.New([]string{leader.URL}, client.WithToken(apiHead), client.WithTimeout(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(`{"d":"` + strings.Repeat("x", 247) + `"}`)
	create := func(stream string) error {
		_, err := cl.JobCreate(context.Background(), &client.JobCreateParams{Payload: payload, Stream: stream})
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(queued); i = next.Add(1) {
				if err := create(fmt.Sprintf("s%02d", i%20)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("filling the queue: %v", err)
	}
	cpu := func() time.Duration {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", leader.Pid()))
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64) // utime, the 14th field
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	// measure returns the leader's CPU over one window, as a share of a
	// core in percent, while 5 jobs a second are created.
	measure := func() float64 {
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			tk := time.NewTicker(200 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					done <- nil
					return
				case <-tk.C:
					if err := create("live"); err != nil {
						done <- err
						return
					}
				}
			}
		}()
		time.Sleep(5 * time.Second) // past the tab's first load
		a := cpu()
		time.Sleep(window)
		used := cpu() - a
		close(stop)
		if err := <-done; err != nil {
			b.Fatalf("creates during the window: %v", err)
		}
		return 100 * float64(used) / float64(window)
	}
	b.ResetTimer()
	var idle, open []float64
	for range 2 * b.N {
		idle = append(idle, measure())
		tab, _ := browser(b)
		run(b, tab, "head logs in", chromedp.Navigate(leader.URL+"/ui/"), present("#token"),
			chromedp.SendKeys(chromedp.CSS("#token"), apiHead), clickJS("#login"),
			pollJS("the dashboard", `location.pathname == "/ui/" && !document.querySelector("#token")`))
		open = append(open, measure())
		chromedp.Cancel(tab)
	}
	b.StopTimer()
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	b.Logf("leader CPU, %% of a core, %d queued, 5 creates/s: without a tab %.2f, with one %.2f (windows of %s)", queued, idle, open, window)
	b.ReportMetric(mean(idle), "idle-%core")
	b.ReportMetric(mean(open), "tab-%core")
	b.ReportMetric(mean(open)-mean(idle), "tab-cost-%core")
}
