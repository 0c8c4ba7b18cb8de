package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// muxDo sends one request over c and records its answer.
func muxDo(t *testing.T, c *wire.Client, method, uri, token, body string, hdr ...string) resp {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.RoundTrip(ctx, wire.AppendRequest(nil, method, uri, h, []byte(body)))
	if err != nil {
		t.Fatalf("%s %s over the mux: %v", method, uri, err)
	}
	b, _ := io.ReadAll(r.Body)
	return resp{Code: r.StatusCode, Header: r.Header, Body: b}
}

func muxDial(t *testing.T, url, token string) *wire.Client {
	t.Helper()
	c, err := wire.Dial(context.Background(), url, wire.MuxPath, wire.MuxProtocol, token)
	if err != nil {
		t.Fatalf("mux upgrade: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// The upgrade itself needs a valid token and the Upgrade header, and says
// what is wrong in the API's JSON errors.
func TestMuxUpgradeRefusals(t *testing.T) {
	e := newEnv(t)
	e.do("GET", "/mux", "", nil, "Connection", "Upgrade", "Upgrade", wire.MuxProtocol).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	e.do("GET", "/mux", "not-a-token", nil, "Connection", "Upgrade", "Upgrade", wire.MuxProtocol).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	e.do("GET", "/mux", headTok, nil).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	if _, err := wire.Dial(context.Background(), ts.URL, wire.MuxPath, wire.MuxProtocol, "not-a-token"); err == nil {
		t.Fatal("mux opened with an invalid token")
	}
}

// Over the mux every request is authenticated and answered as over HTTP:
// its own token and role count (not the upgrade's), bad input gets the same
// JSON error, an oversized body gets 413 and leaves the connection usable.
func TestMuxAnswersAsHTTP(t *testing.T) {
	e := newEnv(t, func(cfg *envConfig) { cfg.MaxBodyBytes = 2048 })
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	c := muxDial(t, ts.URL, leftTok)

	created := muxDo(t, c, "POST", "/jobs", headTok, `{"payload":{"n":1}}`)
	if created.Code != http.StatusCreated {
		t.Fatalf("create over the mux: %d %s", created.Code, created.Body)
	}
	id := created.json(t)["id"].(string)
	over := muxDo(t, c, "GET", "/jobs/"+id, headTok, "")
	direct := e.do("GET", "/jobs/"+id, headTok, nil)
	if over.Code != http.StatusOK || string(over.Body) != string(direct.Body) {
		t.Fatalf("GET over the mux %d %s, over HTTP %d %s", over.Code, over.Body, direct.Code, direct.Body)
	}
	for _, k := range []string{api.HeaderNode, api.HeaderIndex} {
		if over.Header.Get(k) == "" {
			t.Errorf("answer over the mux lacks %s", k)
		}
	}

	muxDo(t, c, "POST", "/jobs", "", `{"payload":1}`).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	muxDo(t, c, "POST", "/dlq/"+id+"/redrive", leftTok, "").apiErr(t, http.StatusForbidden, api.CodeForbidden)
	muxDo(t, c, "POST", "/jobs", headTok, `{"payload":`).apiErr(t, http.StatusBadRequest, api.CodeInvalidJSON)
	muxDo(t, c, "GET", "/jobs/nope", headTok, "").apiErr(t, http.StatusNotFound, api.CodeNotFound)
	muxDo(t, c, "POST", "/jobs", headTok, `{"payload":"`+strings.Repeat("a", 4096)+`"}`).apiErr(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	if again := muxDo(t, c, "POST", "/jobs", headTok, `{"payload":2}`); again.Code != http.StatusCreated {
		t.Fatalf("create after a refused one: %d %s", again.Code, again.Body)
	}
	counts, err := e.fc.fsm.Read().Counts()
	if err != nil {
		t.Fatal(err)
	}
	if counts["queued"] != 2 {
		t.Fatalf("%d jobs queued, want 2 (refused requests changed something)", counts["queued"])
	}
	if n := e.srv.muxSrv.Conns(); n != 1 {
		t.Fatalf("mux_connections = %d, want 1", n)
	}
}

// A follower forwards a client's mux requests to the leader like HTTP ones.
// A client cannot pass its request off as already forwarded by a node: the
// follower would then refuse it as "not the leader" instead of forwarding.
func TestMuxThroughFollower(t *testing.T) {
	leader, follower, _ := relayPair(t)
	fts := httptest.NewServer(follower.h)
	defer fts.Close()
	c := muxDial(t, fts.URL, headTok)
	r := muxDo(t, c, "POST", "/jobs", headTok, `{"payload":7}`, api.HeaderForwardedBy, "n9")
	if r.Code != http.StatusCreated {
		t.Fatalf("create through the follower's mux: %d %s", r.Code, r.Body)
	}
	if leader.job(r.json(t)["id"].(string)) == nil {
		t.Fatal("the leader does not have the job")
	}
	if got := r.Header.Get(api.HeaderNode); got != follower.fc.id {
		t.Fatalf("%s = %q, want the follower %q", api.HeaderNode, got, follower.fc.id)
	}
}

// A node shutting down answers its parked long polls {"claimed":false} at
// once instead of holding its drain until they are cut off with no answer;
// a job created afterwards is not claimed for them.
func TestShutdownEndsLongPolls(t *testing.T) {
	e := newEnv(t)
	shutdownWithParkedClaim(t, e, e, e)
	if r := e.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w2","max_wait_ms":30000}`); r.Code != http.StatusOK || r.json(t)["claimed"] != false {
		t.Fatalf("claim during shutdown answered %d %s, want claimed:false at once", r.Code, r.Body)
	}
	id := e.create(map[string]interface{}{"payload": 1})["id"].(string)
	if j := e.job(id); j.State != "queued" {
		t.Fatalf("job state %s, want queued", j.State)
	}
}

// A follower stopping gracefully ends the long polls it forwarded: the
// caller is told {"claimed":false} at once, the leader drops the wait, and
// a job created afterwards is not claimed for the departed poll.
func TestFollowerShutdownEndsForwardedLongPolls(t *testing.T) {
	leader, follower, _ := relayPair(t)
	shutdownWithParkedClaim(t, follower, leader, follower)
	waitUntil(t, "the leader to drop the claim", func() bool { return leader.srv.queue.Stats().ClaimWaiters == 0 })
	id := leader.create(map[string]interface{}{"payload": 1})["id"].(string)
	if j := leader.job(id); j.State != "queued" {
		t.Fatalf("job state %s, want queued", j.State)
	}
}

// shutdownWithParkedClaim sends a 30 s long-poll claim to via, waits until
// it is parked on parks, shuts stop down gracefully and requires the claim
// to be answered {"claimed":false} within 20 s.
func shutdownWithParkedClaim(t *testing.T, via, parks, stop *env) {
	t.Helper()
	done := make(chan resp, 1)
	go func() {
		done <- via.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w1","max_wait_ms":30000}`)
	}()
	waitUntil(t, "the claim to park", func() bool { return parks.srv.queue.Stats().ClaimWaiters == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop.srv.Shutdown(ctx)
	select {
	case r := <-done:
		if r.Code != http.StatusOK || r.json(t)["claimed"] != false {
			t.Fatalf("parked claim answered %d %s, want claimed:false", r.Code, r.Body)
		}
	case <-ctx.Done():
		t.Fatal("the parked claim was not answered")
	}
}
