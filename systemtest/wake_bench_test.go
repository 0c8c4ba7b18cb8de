package systemtest

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// BenchmarkWatcherWake measures how soon an idle agent is woken: from the
// enqueue's acknowledgement (the task is committed) to "wake" read from
// the watcher's pipe, on a local three-node cluster.
//
//	go test -run xxx -bench WatcherWake -benchtime 50x ./systemtest/
func BenchmarkWatcherWake(b *testing.B) {
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: b.TempDir(), Nodes: 3, Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	base := c.Nodes[0].URL
	apiWant(b, apiDo(b, "PUT", base+"/api/registry", apiHead, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}}}), 200)
	ses, stream := wName("ses"), wName("wake")
	apiWant(b, apiDo(b, "POST", base+"/api/sessions", apiHead, api.SessionCreateRequest{Name: ses}), 201)
	apiWant(b, apiDo(b, "POST", base+"/api/streams", apiHead, api.StreamCreateRequest{Name: stream, Session: ses}), 201)
	defer func() {
		for _, p := range []string{"-pipe", "-done", ".lock"} {
			os.Remove("/tmp/spine-" + stream + p)
		}
	}()
	watcher, _ := filepath.Abs("../scripts/spine-watcher.sh")
	env := append(os.Environ(), "SPINE="+binary, "SPINE_ADDRS="+strings.Join(c.URLs(), ","), "SPINE_TOKEN="+apiLeft,
		"SPINE_WATCH_WAIT=30s", "SPINE_WATCH_BUSY=0.05")
	startProc(b, env, filepath.Join(b.TempDir(), "watcher.log"), watcher, stream)
	pipe := "/tmp/spine-" + stream + "-pipe"
	done := "/tmp/spine-" + stream + "-done"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(pipe); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the watcher made no pipe")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f, err := os.OpenFile(pipe, os.O_RDONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewReader(f)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		// Let the watcher see the flag and park its long-poll peek.
		time.Sleep(200 * time.Millisecond)
		r := apiDo(b, "POST", base+"/api/tasks", apiHead, api.EnqueueRequest{ToolName: "run-bash", Stream: stream})
		acked := time.Now()
		apiWant(b, r, 201)
		if _, err := lines.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(acked))
		// Take the task away so the stream is empty for the next round.
		var t api.Task
		apiDecode(b, apiWant(b, apiDo(b, "POST", base+"/api/claim", apiLeft, api.TaskClaimRequest{Stream: stream}), 200), &t)
		apiWant(b, apiDo(b, "POST", base+"/api/tasks/"+t.ID+"/complete", apiLeft, api.TaskCompleteRequest{LeaseToken: t.LeaseToken,
			Result: json.RawMessage(`{"summary":"ok"}`)}), 200)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "wake-p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "wake-p99-ms")
	b.Logf("wake latency over %d rounds: p50 %s p99 %s max %s", len(lat), p(0.5), p(0.99), lat[len(lat)-1])
}
