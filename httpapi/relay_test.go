package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// relayPair is a follower whose leader is a real Server behind httptest.
func relayPair(t *testing.T) (leader, follower *env, ts *httptest.Server) {
	t.Helper()
	leader = newEnv(t)
	ts = httptest.NewServer(leader.h)
	t.Cleanup(ts.Close)
	follower = newEnv(t)
	follower.fc.id = "n2"
	follower.srv.relay.self = "n2"
	follower.fc.setFollower("n1", ts.URL)
	return leader, follower, ts
}

func TestRelayCarriesConcurrentWrites(t *testing.T) {
	leader, follower, _ := relayPair(t)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := follower.doCtx(ctx, "POST", "/jobs", headTok, fmt.Sprintf(`{"payload":{"i":%d}}`, i), "Idempotency-Key", fmt.Sprintf("k-%d", i))
			if r.Code != http.StatusCreated {
				errs <- fmt.Sprintf("create %d: %d %s", i, r.Code, r.Body)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	counts, err := leader.fc.fsm.Read().Counts()
	if err != nil {
		t.Fatal(err)
	}
	if got := counts["queued"]; got != n {
		t.Fatalf("leader has %d jobs, want %d", got, n)
	}
	follower.srv.relay.mu.Lock()
	relays := len(follower.srv.relay.clients)
	follower.srv.relay.mu.Unlock()
	if relays != 1 {
		t.Fatalf("follower holds %d relay connections, want 1 (requests went over plain HTTP?)", relays)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A caller that leaves a long poll parked on the leader through the relay
// cancels it there too: the leader stops waiting for it at once.
func TestRelayPropagatesCancel(t *testing.T) {
	leader, follower, _ := relayPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan resp, 1)
	go func() {
		done <- follower.doCtx(ctx, "POST", "/internal/worker/claim", leftTok, `{"worker_id":"w1","max_wait_ms":20000}`)
	}()
	waitUntil(t, "the claim to park on the leader", func() bool { return leader.srv.claimWaiters.Load() == 1 })
	cancel()
	waitUntil(t, "the leader to drop the claim", func() bool { return leader.srv.claimWaiters.Load() == 0 })
	<-done
	// The job created afterwards is not claimed for the departed caller.
	id := leader.create(map[string]interface{}{"payload": 1})["id"].(string)
	if j := leader.job(id); j.State != "queued" {
		t.Fatalf("job state %s, want queued", j.State)
	}
}

// A write delivered over the relay whose answer is lost (the leader went
// away) is not sent again: the caller learns its outcome is unknown.
func TestRelayAnswerLost(t *testing.T) {
	leader, follower, _ := relayPair(t)
	done := make(chan resp, 1)
	go func() {
		done <- follower.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w1","max_wait_ms":20000}`)
	}()
	waitUntil(t, "the claim to park on the leader", func() bool { return leader.srv.claimWaiters.Load() == 1 })
	leader.srv.Close() // closes the relay connections it serves
	r := <-done
	r.apiErr(t, http.StatusServiceUnavailable, codeOutcomeUnknown)
}

// A follower whose token configuration differs from the leader's cannot
// open a relay; it forwards over plain HTTP instead, and callers see no
// difference.
func TestRelayRefusedFallsBackToHTTP(t *testing.T) {
	leader, _, ts := relayPair(t)
	follower := newEnv(t, func(cfg *Config) { cfg.Tokens.Add(RoleHead, "another-head-token") })
	follower.fc.id = "n3"
	follower.fc.setFollower("n1", ts.URL)
	r := follower.do("POST", "/jobs", headTok, `{"payload":7}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("create through follower: %d %s", r.Code, r.Body)
	}
	id := r.json(t)["id"].(string)
	if leader.job(id) == nil {
		t.Fatal("leader does not have the job")
	}
	follower.srv.relay.mu.Lock()
	defer follower.srv.relay.mu.Unlock()
	if len(follower.srv.relay.clients) != 0 || len(follower.srv.relay.unsupported) != 1 {
		t.Fatalf("relay clients %d, unsupported %v: want none and the leader marked", len(follower.srv.relay.clients), follower.srv.relay.unsupported)
	}
}

// Frames survive a round trip, and truncated or oversized ones are refused.
func TestRelayFraming(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer x"}, "X-Multi": {"a", "b"}, "Connection": {"close"}}
	p := appendField(nil, []byte("POST"))
	p = appendField(p, []byte("/jobs?x=1"))
	p = appendHeader(p, h)
	p = appendField(p, []byte(`{"payload":1}`))
	req, err := decodeRelayRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.URL.RequestURI() != "/jobs?x=1" || string(body) != `{"payload":1}` ||
		req.Header.Get("Authorization") != "Bearer x" || len(req.Header["X-Multi"]) != 2 || req.Header.Get("Connection") != "" {
		t.Fatalf("decoded %s %s %v %q", req.Method, req.URL, req.Header, body)
	}
	for i := 0; i < len(p); i++ {
		if _, err := decodeRelayRequest(p[:i]); err == nil {
			t.Fatalf("truncated request of %d bytes decoded", i)
		}
	}
	frame := appendFrame(nil, frameRequest, 42, p)
	kind, id, got, err := readFrame(bufio.NewReader(bytes.NewReader(frame)))
	if err != nil || kind != frameRequest || id != 42 || !bytes.Equal(got, p) {
		t.Fatalf("frame round trip: %d %d %v", kind, id, err)
	}
	huge := appendFrame(nil, frameRequest, 1, nil)
	binary.BigEndian.PutUint32(huge, relayMaxFrame+100)
	if _, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(huge))); err == nil {
		t.Fatal("oversized frame accepted")
	}
}

// A leader that accepts connections but never answers the upgrade (hung, or
// partitioned after the handshake) holds at most one dial: callers arriving
// meanwhile share it instead of queueing behind one another's dials, a
// caller that leaves is let go at once, and a relay to another leader is not
// held up by it.
func TestRelayDialIsSharedAndDoesNotBlockOthers(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	_, follower, ts := relayPair(t)
	pool := follower.srv.relay
	hungURL := "http://" + hung.Addr().String()

	const callers = 8
	results := make(chan error, callers)
	for i := 0; i < callers; i++ {
		go func() {
			_, err := pool.client(context.Background(), hungURL)
			results <- err
		}()
	}
	var first net.Conn
	select {
	case first = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no dial reached the hung leader")
	}
	waitUntil(t, "the dial in flight", func() bool {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		return pool.dialing[hungURL] != nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pool.client(ctx, hungURL); !errors.Is(err, errRelayNotSent) {
		t.Fatalf("caller that left: %v, want a not-sent error", err)
	}
	c, err := pool.client(context.Background(), ts.URL)
	if err != nil || c == nil {
		t.Fatalf("relay to a live leader while another dial hangs: %v", err)
	}

	first.Close() // the upgrade fails: that leader speaks no relay
	for i := 0; i < callers; i++ {
		select {
		case err := <-results:
			if !errors.Is(err, errRelayUnsupported) {
				t.Fatalf("caller %d: %v, want unsupported", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("callers still waiting after the dial ended")
		}
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a second dial reached the hung leader")
	default:
	}
}

// A pooled recorder starts every answer empty: no header, status or body of
// an earlier answer leaks into a later one, whichever recorder the pool
// hands out (under -race the pool drops items at random, so both fresh and
// reused recorders are exercised).
func TestRelayRecorderReuseStartsEmpty(t *testing.T) {
	for i := 0; i < 200; i++ {
		rec := newRelayRecorder()
		if len(rec.header) != 0 || rec.status != 0 || rec.body.Len() != 0 {
			t.Fatalf("answer %d: recorder holds header %v, status %d, body %q", i, rec.header, rec.status, rec.body.String())
		}
		want := fmt.Sprintf(`{"n":%d}`, i)
		if i%2 == 0 {
			rec.Header().Set("Retry-After", "1")
			rec.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = rec.Write([]byte(want))
		f := &fields{b: bytes.Clone(rec.encode())}
		rec.free()
		status, h, body := f.uvarint(), f.header(), string(f.bytes())
		if f.err != nil {
			t.Fatalf("answer %d: %v", i, f.err)
		}
		wantStatus, wantRetry := uint64(http.StatusOK), false
		if i%2 == 0 {
			wantStatus, wantRetry = http.StatusServiceUnavailable, true
		}
		if retry := h.Get("Retry-After") != ""; status != wantStatus || retry != wantRetry {
			t.Fatalf("answer %d: status %d, Retry-After %v; want %d, %v", i, status, retry, wantStatus, wantRetry)
		}
		if body != want {
			t.Fatalf("answer %d: body %q, want %q", i, body, want)
		}
	}
}
