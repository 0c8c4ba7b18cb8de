package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A rate limit holds across a leader kill: a key allows 2 claims per 2s
// with a burst of 2; workers claim in a loop through the followers while
// the leader is killed as the key's next token comes due. Over the whole
// run the claims of the key, by the times the leaders stamped on them,
// never exceed the rate (any n claims from t1 to t2: n <= burst +
// (t2-t1)*limit/period), jobs without the key are never held back behind
// it, and every job is claimed in the end.
func TestRateLimitHoldsAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const (
		stream = "rated"
		jobs   = 12
		plain  = 3
		limit  = 2
		period = 2 * time.Second
		burst  = 2
	)
	head := []string{"SPINE_TOKEN=" + apiHead}
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := spineCLI(t, []string{fs[0].URL, fs[1].URL}, t.TempDir(), head, args...)
		if code != 0 {
			t.Fatalf("spine %v: exit %d: %s %s", args, code, out, errOut)
		}
		return out
	}
	// The stream's default rate, set with the CLI; half the jobs name the
	// same rate themselves, one is created with the CLI's flags.
	cli("stream", "defaults", stream, "--rate-key", "vendor-api", "--rate-limit", "2", "--rate-period", "2s", "--rate-burst", "2")
	rate := map[string]any{"key": "vendor-api", "limit": limit, "periodSeconds": period.Seconds(), "burst": burst}
	rated := map[string]bool{}
	for i := range jobs - 1 {
		body := map[string]any{"stream": stream, "payload": i, "priority": 5}
		if i%2 == 0 {
			body["rateLimit"] = rate
		}
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[i%2].URL+"/jobs", apiHead, body), http.StatusCreated), &j)
		if j.RateLimit == nil || j.RateLimit.Key != "vendor-api" || j.RateLimit.Limit != limit || j.RateLimit.Burst != burst {
			t.Fatalf("created %+v", j)
		}
		rated[j.ID] = true
	}
	var cj api.Job
	if err := json.Unmarshal([]byte(cli("jobs", "create", "--payload", `{"cli":1}`, "--stream", stream, "--priority", "5",
		"--rate-key", "vendor-api", "--rate-limit", "2", "--rate-period", "2s", "--rate-burst", "2", "--output", "json")), &cj); err != nil || cj.RateLimit == nil {
		t.Fatalf("spine jobs create with a rate: %v %+v", err, cj)
	}
	rated[cj.ID] = true
	// Jobs of another key, with a generous rate, in the same stream (the
	// stream's default gives every job there a rate), and jobs without
	// any rate in a stream the workers list after it: neither waits
	// behind the limited key.
	var plainIDs []string
	for i := range plain {
		plainIDs = append(plainIDs, apiCreate(t, fs[i%2].URL, map[string]any{"stream": stream, "payload": "other key",
			"rateLimit": map[string]any{"key": "other-api", "limit": 1000, "periodSeconds": 1}}).ID)
	}
	for i := range 2 {
		plainIDs = append(plainIDs, apiCreate(t, fs[i%2].URL, map[string]any{"stream": "free", "payload": "no rate"}).ID)
	}

	// Workers claim in a loop through the followers (and, after the kill,
	// through the survivors), holding what they take.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	claimed := map[string]int{}
	survivors := fs
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				node := survivors[(w+i)%len(survivors)]
				mu.Unlock()
				r, err := apiRequest("POST", node.URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: fmt.Sprintf("w%d", w), Streams: []string{stream, "free"}, MaxWaitMS: 1500})
				if err != nil || r.Status != http.StatusOK {
					time.Sleep(50 * time.Millisecond) // a node down or electing: try another
					continue
				}
				var wc api.WorkerClaim
				if json.Unmarshal(r.Body, &wc) == nil && wc.Claimed {
					mu.Lock()
					claimed[wc.JobID]++
					mu.Unlock()
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	// The burst goes at once, the plain jobs with it; then wait for the
	// key's next token and kill the leader as it comes due.
	count := func(ids map[string]bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for id := range claimed {
			if ids == nil || ids[id] {
				n++
			}
		}
		return n
	}
	plainSet := map[string]bool{}
	for _, id := range plainIDs {
		plainSet[id] = true
	}
	apiEventually(t, 30*time.Second, "the burst and the plain jobs claimed", func() error {
		if n, p := count(rated), count(plainSet); n < burst || p < len(plainSet) {
			return fmt.Errorf("%d rated, %d plain claimed", n, p)
		}
		return nil
	})
	var rates api.RateList
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/rates", apiHead, nil), http.StatusOK), &rates)
	var vendor api.RateInfo
	for _, r := range rates.Rates {
		if r.Key == "vendor-api" {
			vendor = r
		}
	}
	if vendor.Key == "" || vendor.Waiting == 0 {
		t.Fatalf("rates: %+v", rates)
	}
	var st api.StreamInfo
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/streams/"+stream, apiHead, nil), http.StatusOK), &st)
	if st.RateLimited == 0 || st.RateLimited > jobs-burst {
		t.Fatalf("stream %s before the kill: %d rate-limited", stream, st.RateLimited)
	}
	t.Logf("before the kill: rate %+v, stream %s: %d queued, %d rate-limited", vendor, stream, st.Queued, st.RateLimited)
	t.Logf("spine stream rates:\n%s", cli("stream", "rates", "--output", "table"))
	if out := cli("stream", "stats", stream, "--output", "table"); !strings.Contains(out, "RATE-LIMITED") {
		t.Fatalf("spine stream stats: %s", out)
	}
	if next := vendor.NextAt; !next.IsZero() {
		time.Sleep(time.Until(next)) // the window turns over: kill now
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	survivors = nil
	for _, n := range c.Nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	mu.Unlock()

	// Every job is claimed in the end (12 at one a second, and an election).
	apiEventually(t, 120*time.Second, "every job claimed", func() error {
		if n := count(nil); n < jobs+len(plainSet) {
			return fmt.Errorf("%d of %d jobs claimed", n, jobs+len(plainSet))
		}
		return nil
	})

	// The claim times, as the leaders stamped them in the jobs' histories.
	var at []time.Time
	for _, j := range apiListAll(t, survivors[0].URL, apiHead, url.Values{"stream": {stream}}) {
		if !rated[j.ID] {
			continue
		}
		for _, ev := range apiEvents(t, survivors[0].URL, apiHead, j.ID) {
			if ev.Type == "claimed" {
				ts, err := time.Parse(time.RFC3339Nano, ev.At)
				if err != nil {
					t.Fatal(err)
				}
				at = append(at, ts)
			}
		}
	}
	if len(at) < jobs {
		t.Fatalf("%d claims of %d rated jobs in their histories", len(at), jobs)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	most := 0
	for i := range at {
		for j := i; j < len(at); j++ {
			n := j - i + 1
			allowed := burst + int(int64(at[j].Sub(at[i]))*limit/int64(period))
			if n > allowed {
				t.Errorf("%d claims from %s to %s (%v): the rate allows %d", n, at[i].Format(time.RFC3339Nano), at[j].Format(time.RFC3339Nano), at[j].Sub(at[i]), allowed)
			}
			if at[j].Sub(at[i]) < period {
				most = max(most, n)
			}
		}
	}
	t.Logf("%d claims of the key over %v; at most %d in any %v window (burst %d + %d per %v)", len(at), at[len(at)-1].Sub(at[0]), most, period, burst, limit, period)
}
