package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// scheduleOf reads a schedule through base (stale: the node's own state).
func scheduleOf(base, name string, stale bool) (api.Schedule, error) {
	var sc api.Schedule
	u := base + "/v1/schedules/" + name
	if stale {
		u += "?stale"
	}
	r, err := apiRequest("GET", u, apiHead, nil)
	if err != nil {
		return sc, err
	}
	if r.Status != http.StatusOK {
		return sc, fmt.Errorf("%s", r)
	}
	return sc, json.Unmarshal(r.Body, &sc)
}

// scheduleTicks lists the ticks (unix seconds) of the jobs a schedule's
// ticks made in stream, failing on a key twice or a job without one.
func scheduleTicks(t *testing.T, base, name, stream string) []int64 {
	t.Helper()
	prefix := "schedule:" + name + ":"
	seen := map[int64]string{}
	var ticks []int64
	for _, j := range apiListAll(t, base, apiHead, url.Values{"stream": {stream}, "limit": {"500"}}) {
		rest, ok := strings.CutPrefix(j.IdempotencyKey, prefix)
		if !ok {
			t.Fatalf("job %s of the schedule's stream has key %q", j.ID, j.IdempotencyKey)
		}
		if strings.HasPrefix(rest, "trigger:") {
			continue
		}
		tick, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			t.Fatalf("job %s: key %q", j.ID, j.IdempotencyKey)
		}
		if other, dup := seen[tick]; dup {
			t.Fatalf("tick %d made two jobs: %s and %s", tick, other, j.ID)
		}
		seen[tick] = j.ID
		ticks = append(ticks, tick)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
	return ticks
}

// noGaps fails unless ticks are every second from the first to the last.
func noGaps(t *testing.T, ticks []int64) {
	t.Helper()
	for i := 1; i < len(ticks); i++ {
		if ticks[i] != ticks[i-1]+1 {
			t.Fatalf("ticks %d to %d: %d missing (of %d ticks, %d to %d)", ticks[i-1], ticks[i], ticks[i]-ticks[i-1]-1, len(ticks), ticks[0], ticks[len(ticks)-1])
		}
	}
}

// killRightAfterAFire watches the leader's own state and kills it the
// moment its schedule's run count moves: the fire is applied on the
// leader, and the next tick is under a second away.
func killRightAfterAFire(t *testing.T, c *testcluster.Cluster, leader *testcluster.Node, name string) {
	t.Helper()
	first, err := scheduleOf(leader.URL, name, true)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sc, err := scheduleOf(leader.URL, name, true)
		if err == nil && sc.Runs != first.Runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule did not fire on %s: %v", leader.ID, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
}

// A schedule every second fires each tick exactly once across a leader
// killed right after a fire and a leader frozen (SIGSTOP) while it fires
// a tick and woken once another leads: the jobs' idempotency keys name every
// tick of the observed span once, with no gap (catch-up all makes the
// ticks the election missed). A pause makes no job; a resume goes on from
// the next tick.
func TestScheduleFiresEveryTickOnceAcrossLeaderChanges(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const name, stream = "every1", "ticks"
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/schedules", apiHead, map[string]any{"name": name, "intervalSeconds": 1, "overlap": "allow",
		"catchup": "all", "catchupWindowSeconds": 600, "job": map[string]any{"stream": stream, "payload": map[string]any{"report": "daily"}}}), http.StatusCreated)
	apiEventually(t, 30*time.Second, "three ticks", func() error {
		if n := len(scheduleTicks(t, fs[0].URL, name, stream)); n < 3 {
			return fmt.Errorf("%d ticks", n)
		}
		return nil
	})

	// Kill the leader right after a fire.
	killRightAfterAFire(t, c, leader, name)
	killedAt := time.Now()
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	leader2, _ := apiRoles(t, c)
	apiEventually(t, 60*time.Second, "ticks after the failover", func() error {
		ticks := scheduleTicks(t, leader2.URL, name, stream)
		if last := ticks[len(ticks)-1]; last < killedAt.Unix()+3 {
			return fmt.Errorf("last tick %d, killed at %d", last, killedAt.Unix())
		}
		return nil
	})
	noGaps(t, scheduleTicks(t, leader2.URL, name, stream))

	// Bring the killed node back, then freeze the new leader right after
	// a fire; another leads; wake the frozen one (its scheduler may still
	// think it leads for a moment: its fires are refused or never commit).
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// Frozen at a tick's firing time this once (100 ms past a second, in
	// the scheduler's 200 ms window): the fire may be proposed and not
	// yet committed, or not proposed yet.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 100*time.Millisecond)))
	if err := c.Pause(leader2); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	var leader3 *testcluster.Node
	apiEventually(t, 60*time.Second, "a leader other than the frozen one", func() error {
		for _, n := range c.Nodes {
			if n == leader2 || !n.Running() {
				continue
			}
			if h, err := c.Health(n); err == nil && h.Role == "leader" {
				leader3 = n
				return nil
			}
		}
		return fmt.Errorf("no leader yet")
	})
	apiEventually(t, 60*time.Second, "ticks after the freeze", func() error {
		ticks := scheduleTicks(t, leader3.URL, name, stream)
		if last := ticks[len(ticks)-1]; last < frozenAt.Unix()+3 {
			return fmt.Errorf("last tick %d, frozen at %d", last, frozenAt.Unix())
		}
		return nil
	})
	if err := c.Resume(leader2); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	ticks := scheduleTicks(t, leader3.URL, name, stream)
	noGaps(t, ticks)
	sc, err := scheduleOf(leader3.URL, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Skipped != 0 || sc.Runs != int64(len(ticks)) {
		t.Fatalf("schedule counts %d runs and %d skipped; its jobs name %d ticks", sc.Runs, sc.Skipped, len(ticks))
	}
	t.Logf("%d ticks, %d to %d, no gap, none twice, across a kill and a freeze", len(ticks), ticks[0], ticks[len(ticks)-1])

	// Paused: no job while a second schedule fires three ticks; resumed:
	// the next tick after the resume, none of the pause's.
	base := leader3.URL
	var paused api.Schedule
	apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/v1/schedules/"+name+"/pause", apiHead, nil), http.StatusOK), &paused)
	pausedAt := time.Now()
	before := len(scheduleTicks(t, base, name, stream))
	apiWant(t, apiDo(t, "POST", base+"/v1/schedules", apiHead, map[string]any{"name": "witness", "intervalSeconds": 1, "overlap": "allow",
		"job": map[string]any{"stream": "witness", "payload": 1}}), http.StatusCreated)
	apiEventually(t, 30*time.Second, "the witness's three ticks", func() error {
		if sc, err := scheduleOf(base, "witness", false); err != nil || sc.Runs < 3 {
			return fmt.Errorf("witness: %+v %v", sc.Runs, err)
		}
		return nil
	})
	if n := len(scheduleTicks(t, base, name, stream)); n != before {
		t.Fatalf("a paused schedule made %d jobs", n-before)
	}
	var resumed api.Schedule
	apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/v1/schedules/"+name+"/resume", apiHead, nil), http.StatusOK), &resumed)
	if resumed.NextFireAt.IsZero() || resumed.NextFireAt.Before(pausedAt) {
		t.Fatalf("resumed: next fire %v", resumed.NextFireAt)
	}
	apiEventually(t, 30*time.Second, "a tick after the resume", func() error {
		if n := len(scheduleTicks(t, base, name, stream)); n <= before {
			return fmt.Errorf("%d ticks", n)
		}
		return nil
	})
	after := scheduleTicks(t, base, name, stream)
	if next := after[before]; next < resumed.NextFireAt.Unix() || next <= pausedAt.Unix() {
		t.Fatalf("the first tick after the resume is %d; paused at %d, next fire %v", next, pausedAt.Unix(), resumed.NextFireAt)
	}
	noGaps(t, after[before:])
}
