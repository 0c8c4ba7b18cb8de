package systemtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// A named token on three processes: created through a follower (the
// secret answered once), used on another node, a claim naming another
// worker id than its bound one refused; then revoked, and the leader
// killed right after the revoke is acknowledged. Every surviving node
// refuses the token within a deadline, and the long poll and the event
// stream it held end.
func TestNamedTokenRevokedThenLeaderKilled(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, followers := apiRoles(t, c)
	f0, f1 := followers[0], followers[1]

	created := apiCreateToken(t, f0.URL, map[string]any{"name": "agent-1", "role": "left_claw",
		"workerId": "w1", "streams": []string{"tok"}, "note": "the system test's agent"})
	secret := created.Secret
	if secret == "" || created.Name != "agent-1" {
		t.Fatalf("created %+v", created)
	}
	// Listed everywhere, never with the secret.
	for _, n := range c.Nodes {
		apiEventually(t, 10*time.Second, "the token listed on "+n.ID, func() error {
			r, err := apiRequest("GET", n.URL+"/v1/tokens", apiHead, nil)
			if err != nil {
				return err
			}
			if strings.Contains(string(r.Body), secret) {
				t.Fatalf("a list shows the secret: %s", r)
			}
			if !strings.Contains(string(r.Body), `"agent-1"`) {
				return fmt.Errorf("not listed yet: %s", r)
			}
			return nil
		})
	}

	// Used on another node: it claims as its bound worker; naming another
	// worker id is refused.
	job := apiCreate(t, f1.URL, map[string]any{"payload": "p", "stream": "tok"})
	apiWantError(t, apiDo(t, "POST", f1.URL+"/internal/worker/claim", secret, map[string]any{"worker_id": "w2", "streams": []string{"tok"}}),
		http.StatusForbidden, "forbidden")
	var claim struct {
		Claimed  bool   `json:"claimed"`
		JobID    string `json:"job_id"`
		WorkerID string
	}
	apiDecode(t, apiWant(t, apiDo(t, "POST", f1.URL+"/internal/worker/claim", secret, map[string]any{"streams": []string{"tok"}}), 200), &claim)
	if !claim.Claimed || claim.JobID != job.ID {
		t.Fatalf("claim %+v", claim)
	}
	var evs struct {
		Events []struct{ Type, Actor, Token string }
	}
	apiDecode(t, apiWant(t, apiDo(t, "GET", leader.URL+"/jobs/"+job.ID+"/events", apiHead, nil), 200), &evs)
	if last := evs.Events[len(evs.Events)-1]; last.Type != "claimed" || last.Token != "agent-1" || last.Actor != "left_claw/w1" {
		t.Fatalf("the claim's event: %+v", last)
	}

	// A long poll and an event stream held by the token, on the followers.
	poll := make(chan string, 1)
	go func() {
		r, err := apiRequest("POST", f0.URL+"/internal/worker/claim", secret, map[string]any{"streams": []string{"tok"}, "max_wait_ms": 25_000})
		if err != nil {
			poll <- err.Error()
			return
		}
		poll <- fmt.Sprint(r.Status)
	}()
	streamEnded := make(chan error, 1)
	streamOpen := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", f1.URL+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			streamEnded <- err
			close(streamOpen)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			streamEnded <- fmt.Errorf("event stream: %d %s", resp.StatusCode, b)
			close(streamOpen)
			return
		}
		close(streamOpen)
		_, err = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		if ctx.Err() != nil {
			err = fmt.Errorf("the event stream was still open after 60s")
		}
		streamEnded <- err
	}()
	<-streamOpen
	// Give the long poll time to reach its node and wait there (nothing
	// below depends on how soon it does).
	time.Sleep(300 * time.Millisecond)

	// Revoke through the leader, then kill it at once.
	apiWant(t, apiDo(t, "DELETE", leader.URL+"/v1/tokens/agent-1", apiHead, nil), 200)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	for _, n := range followers {
		apiEventually(t, 20*time.Second, "the revoked token refused on "+n.ID, func() error {
			r, err := apiRequest("GET", n.URL+"/jobs", secret, nil)
			if err != nil {
				return err
			}
			if r.Status != http.StatusUnauthorized {
				return fmt.Errorf("still accepted: %s", r)
			}
			return nil
		})
	}
	select {
	case got := <-poll:
		if got == "200" {
			t.Fatalf("the revoked token's long poll answered 200")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the revoked token's long poll did not end")
	}
	select {
	case err := <-streamEnded:
		if err != nil && strings.Contains(err.Error(), "still open") {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the revoked token's event stream did not end")
	}
	// The job it claimed is still the cluster's to finish: head sees it.
	apiEventually(t, 20*time.Second, "a new leader", func() error {
		_, err := c.WaitLeader(time.Second)
		return err
	})
}

// A token works on a follower that had not applied its create when the
// create was answered (it was paused, as a slow or cut-off node is, while
// the leader and the other follower committed it behind other entries):
// the follower asks the leader, catches up, and accepts it at once, on a
// plain request and on a claim.
func TestNamedTokenOnLaggingFollower(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, followers := apiRoles(t, c)
	lag := followers[1]
	apiCreateToken(t, leader.URL, map[string]any{"name": "first", "role": "operator"})

	if err := c.Pause(lag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Resume(lag) })
	// Entries the paused follower has to catch up with, then the token.
	jobs := apiCreateJobs(t, []*testcluster.Node{leader}, "lagging", 200)
	created := apiCreateToken(t, leader.URL, map[string]any{"name": "late", "role": "left_claw",
		"workerId": "late-1", "streams": []string{"lagging"}})
	if err := c.Resume(lag); err != nil {
		t.Fatal(err)
	}

	var who api.WhoAmI
	apiDecode(t, apiWant(t, apiDo(t, "GET", lag.URL+"/v1/whoami", created.Secret, nil), http.StatusOK), &who)
	if who.Token != "late" || who.WorkerID != "late-1" {
		t.Fatalf("whoami on the lagging follower: %+v", who)
	}
	var claim api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", lag.URL+"/internal/worker/claim", created.Secret,
		map[string]any{"streams": []string{"lagging"}}), http.StatusOK), &claim)
	if !claim.Claimed || !slices.Contains(jobs, claim.JobID) {
		t.Fatalf("claim on the lagging follower: %+v", claim)
	}
	r := apiDo(t, "GET", lag.URL+"/metrics", apiHead, nil)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(line, "spine_http_token_lookups_total") {
			t.Log(line) // whether the follower had caught up on its own first
		}
	}
}

// apiCreateToken creates a named token through url as head. It waits for
// the cluster to reach the level named tokens need (its first leader
// raises it once every node reports it).
func apiCreateToken(t testing.TB, url string, body map[string]any) api.TokenCreated {
	t.Helper()
	var created api.TokenCreated
	apiEventually(t, 30*time.Second, "create a token through "+url, func() error {
		r, err := apiRequest("POST", url+"/v1/tokens", apiHead, body)
		if err != nil {
			return err
		}
		if r.Status != http.StatusCreated {
			return fmt.Errorf("%s", r)
		}
		return json.Unmarshal(r.Body, &created)
	})
	return created
}
