package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// BenchmarkRegistryHeartbeats measures what liveness costs the log: 1,000
// registered workers heartbeating every 5 s, spread over the three nodes
// of a local cluster, for 20 s. It reports the Raft commit rate during the
// heartbeats (raft-entries/s; a heartbeat writes no entry, so only changes
// of health would) and the share of workers whose latest heartbeat the
// leader knew through gossip at the end (seen-by-leader-%).
//
//	go test -run xxx -bench RegistryHeartbeats -benchtime 1x ./systemtest/
func BenchmarkRegistryHeartbeats(b *testing.B) {
	const (
		workers = 1000
		every   = 5 * time.Second
		run     = 20 * time.Second
	)
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: b.TempDir(), Nodes: 3, Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	base := c.Nodes[0].URL
	gw := wName("bgw")
	apiWant(b, apiDo(b, "POST", base+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: gw, Address: "http://10.9.9.9:7000", Capacity: workers}), 201)
	ids := make([]string, workers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-w%04d", gw, i)
		wg.Add(1)
		sem <- struct{}{}
		go func(id string) {
			defer wg.Done()
			defer func() { <-sem }()
			apiWant(b, apiDo(b, "POST", c.Nodes[len(id)%3].URL+"/v1/workers", apiHead, api.WorkerRegisterRequest{ID: id, Gateway: gw, Capacity: 1}), 201)
		}(ids[i])
	}
	wg.Wait()
	leader := c.Nodes[0]
	for _, n := range c.Nodes {
		if s, err := c.Status(n); err == nil && s.State == "Leader" {
			leader = n
		}
	}
	commit := func() uint64 {
		s, err := c.Status(leader)
		if err != nil {
			b.Fatal(err)
		}
		return s.CommitIndex
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	beat := func(i int) error {
		req, _ := http.NewRequest("POST", c.Nodes[i%3].URL+"/v1/workers/"+ids[i]+"/heartbeat", nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.HeadToken)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("heartbeat of %s: %s", ids[i], resp.Status)
		}
		return nil
	}
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), run)
		start, startIdx := time.Now(), commit()
		var sent, failed int
		var mu sync.Mutex
		var bw sync.WaitGroup
		// Each worker beats every 5 s, the workers spread over the period.
		for i := range ids {
			bw.Add(1)
			go func(i int) {
				defer bw.Done()
				t := time.NewTimer(every * time.Duration(i) / workers)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					err := beat(i)
					mu.Lock()
					sent++
					if err != nil {
						failed++
					}
					mu.Unlock()
					t.Reset(every)
				}
			}(i)
		}
		bw.Wait()
		cancel()
		elapsed := time.Since(start)
		entries := commit() - startIdx
		if failed > 0 {
			b.Fatalf("%d of %d heartbeats failed", failed, sent)
		}
		// How many workers' latest heartbeat does the leader know?
		var list api.WorkerList
		apiDecode(b, apiDo(b, "GET", leader.URL+"/v1/workers?gateway="+gw, apiHead, nil), &list)
		fresh := 0
		for _, w := range list.Workers {
			if time.Since(w.LastSeen) < every+2*time.Second && w.Health == api.HealthHealthy {
				fresh++
			}
		}
		b.ReportMetric(float64(entries)/elapsed.Seconds(), "raft-entries/s")
		b.ReportMetric(float64(sent)/elapsed.Seconds(), "heartbeats/s")
		b.ReportMetric(100*float64(fresh)/float64(workers), "seen-by-leader-%")
	}
}
