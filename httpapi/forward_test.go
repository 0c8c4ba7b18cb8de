package httpapi

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// recordedReq is what the fake leader saw.
type recordedReq struct {
	Method, URI string
	Header      http.Header
	Body        string
}

// fakeLeader is an httptest server standing in for the leader: it records
// each request and answers with a canned reply.
type fakeLeader struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recordedReq
}

func newFakeLeader(t *testing.T, answer http.HandlerFunc) *fakeLeader {
	t.Helper()
	l := &fakeLeader{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.RelayPath {
			// Like a leader of a version without the relay: the follower
			// falls back to plain HTTP forwarding.
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.reqs = append(l.reqs, recordedReq{Method: r.Method, URI: r.URL.RequestURI(), Header: r.Header.Clone(), Body: string(body)})
		l.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *fakeLeader) requests() []recordedReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]recordedReq(nil), l.reqs...)
}

func leaderAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(api.HeaderNode, "n2")
	w.Header().Set(api.HeaderLeader, "n2")
	w.Header().Set(api.HeaderIndex, "77")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"from-leader"}`)
}

func TestForwardWrite(t *testing.T) {
	e := newEnv(t)
	l := newFakeLeader(t, leaderAnswer)
	e.fc.setFollower("n2", l.URL)

	r := e.do("POST", "/jobs?x=1", headTok, `{"payload":1}`, "Idempotency-Key", "k9")
	if r.Code != http.StatusCreated || string(r.Body) != `{"id":"from-leader"}` {
		t.Fatalf("forwarded answer: %d %s", r.Code, r.Body)
	}
	if r.Header.Get(api.HeaderNode) != "n1" || r.Header.Get(api.HeaderLeader) != "n2" || r.Header.Get(api.HeaderIndex) != "77" {
		t.Errorf("answer headers: %v", r.Header)
	}
	reqs := l.requests()
	if len(reqs) != 1 {
		t.Fatalf("leader saw %d requests", len(reqs))
	}
	q := reqs[0]
	if q.Method != "POST" || q.URI != "/jobs?x=1" || q.Body != `{"payload":1}` {
		t.Errorf("forwarded request: %+v", q)
	}
	if q.Header.Get("Authorization") != "Bearer "+headTok || q.Header.Get(api.HeaderForwardedBy) != "n1" ||
		q.Header.Get("Idempotency-Key") != "k9" {
		t.Errorf("forwarded headers: %v", q.Header)
	}
	if e.fc.AppliedIndex() != 0 {
		t.Error("the follower applied the write itself")
	}

	// Reads are forwarded too (default consistency), but not ?stale ones.
	e.do("GET", "/jobs/abc", leftTok, nil)
	e.do("GET", "/jobs/abc?stale", leftTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	if reqs := l.requests(); len(reqs) != 2 || reqs[1].Method != "GET" || reqs[1].URI != "/jobs/abc" {
		t.Errorf("leader saw %+v", reqs)
	}

	// Auth and role checks happen before forwarding.
	e.do("POST", "/jobs", "", `{"payload":1}`).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	e.do("POST", "/jobs", leftTok, `{"payload":1}`).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	// Validation happens on the leader; an over-size body is refused here.
	e.do("POST", "/jobs", headTok, `{"payload":"`+string(make([]byte, 1<<20))+`"}`).apiErr(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	if n := len(l.requests()); n != 2 {
		t.Errorf("leader saw %d requests, want 2", n)
	}
}

func TestForwardNotTwice(t *testing.T) {
	e := newEnv(t)
	l := newFakeLeader(t, leaderAnswer)
	e.fc.setFollower("n2", l.URL)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/jobs", `{"payload":1}`},
		{"GET", "/jobs", ""},
	} {
		r := e.do(c.method, c.path, headTok, c.body, api.HeaderForwardedBy, "n3")
		er := r.apiErr(t, http.StatusServiceUnavailable, api.CodeNoLeader)
		if r.Header.Get("Retry-After") == "" || er["leader"] != l.URL {
			t.Errorf("%s %s: Retry-After %q leader %v", c.method, c.path, r.Header.Get("Retry-After"), er["leader"])
		}
	}
	if n := len(l.requests()); n != 0 {
		t.Errorf("leader saw %d requests", n)
	}
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestForwardLeaderUnreachable(t *testing.T) {
	const hold = 150 * time.Millisecond
	for _, c := range []struct {
		name, leaderID string
		addr           func(t *testing.T) string
	}{
		{"dial fails", "n2", deadAddr},
		{"no leader known", "", func(*testing.T) string { return "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *envConfig) { cfg.LeaderHold = hold })
			addr := c.addr(t)
			e.fc.setFollower(c.leaderID, addr)
			start := time.Now()
			r := e.do("POST", "/jobs", headTok, `{"payload":1}`)
			took := time.Since(start)
			er := r.apiErr(t, http.StatusServiceUnavailable, api.CodeNoLeader)
			if r.Header.Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
			if addr != "" && er["leader"] != addr {
				t.Errorf("error.leader = %v, want %s", er["leader"], addr)
			}
			if took < hold {
				t.Errorf("answered after %v, before the leader hold of %v", took, hold)
			}
			if r.Header.Get(api.HeaderNode) != "n1" {
				t.Errorf("headers: %v", r.Header)
			}
		})
	}
}

func TestForwardAnswerLost(t *testing.T) {
	e := newEnv(t)
	l := newFakeLeader(t, func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	e.fc.setFollower("n2", l.URL)
	// A write that may have reached the leader is not retried: its outcome is unknown.
	e.do("POST", "/jobs", headTok, `{"payload":1}`).apiErr(t, http.StatusServiceUnavailable, api.CodeOutcomeUnknown)
	// A read is safe to repeat; it answers no_leader.
	e.do("GET", "/jobs", headTok, nil).apiErr(t, http.StatusServiceUnavailable, api.CodeNoLeader)
}

func TestForwardBecomesLeader(t *testing.T) {
	// A follower that learns it is the leader while holding serves the
	// request itself.
	e := newEnv(t, func(cfg *envConfig) { cfg.LeaderHold = 10 * time.Second })
	e.fc.setFollower("", "")
	e.fc.beforeApply = nil
	done := make(chan resp, 1)
	go func() { done <- e.do("POST", "/jobs", headTok, `{"payload":1}`) }()
	e.fc.mu.Lock()
	e.fc.leader, e.fc.leaderID, e.fc.leaderAddr = true, "n1", "http://n1.test:36725"
	e.fc.mu.Unlock()
	close(e.fc.leaderCh)
	r := <-done
	if r.Code != http.StatusCreated {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
}
