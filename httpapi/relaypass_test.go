package httpapi

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// relayLeader is a fake leader that speaks the relay: it serves each
// relayed request with answer and records the request as it arrived.
type relayLeader struct {
	*httptest.Server
	srv  *wire.Server
	mu   sync.Mutex
	reqs []recordedReq
	keep bool // record requests
}

func newRelayLeader(t testing.TB, keep bool, answer http.HandlerFunc) *relayLeader {
	t.Helper()
	l := &relayLeader{keep: keep}
	l.srv = &wire.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.keep {
			body, _ := io.ReadAll(r.Body)
			l.mu.Lock()
			l.reqs = append(l.reqs, recordedReq{Method: r.Method, URI: r.Host + " " + r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
			l.mu.Unlock()
		}
		answer(w, r)
	}), MaxFrame: wire.MaxFrame}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.RelayPath {
			http.Error(w, "only the relay here", http.StatusTeapot)
			return
		}
		c, err := wire.Accept(w, r, wire.RelayProtocol)
		if err != nil {
			return
		}
		go func() { _ = l.srv.Serve(c) }()
	}))
	t.Cleanup(func() { l.srv.Close(); l.Close() })
	return l
}

func (l *relayLeader) requests() []recordedReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]recordedReq(nil), l.reqs...)
}

// createdAnswer is what a leader answers a create: its headers and a job.
func createdAnswer(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set(api.HeaderNode, "n1")
	h.Set(api.HeaderLeader, "n1")
	h.Set(api.HeaderLeaderAddr, "http://n1.test:36725")
	h.Set(api.HeaderIndex, "4242")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"01JBENCHJOB0000000000000000","stream":"bench","state":"queued","priority":0,"attempts":0,"maxAttempts":3,"created_at":"2026-01-01T00:00:00Z","payload":{"t":1700000000000000000,"i":12345,"pad":"`+strings.Repeat("x", 200)+`"}}`)
}

// followerOf is a follower env whose leader is l, reached over a mux
// client of its own port.
func followerOf(t testing.TB, l *relayLeader, reencode bool) (*env, *wire.Client) {
	t.Helper()
	f := newEnv(t)
	f.srv.reencode = reencode
	f.fc.id = "n2"
	f.fc.setFollower("n1", l.URL)
	fts := httptest.NewServer(f.h)
	t.Cleanup(fts.Close)
	c, err := wire.Dial(context.Background(), fts.URL, wire.MuxPath, wire.MuxProtocol, headTok)
	if err != nil {
		t.Fatalf("mux upgrade: %v", err)
	}
	t.Cleanup(c.Close)
	return f, c
}

// BenchmarkFollowerForward is one client request a follower forwards to
// the leader and answers: a create sent over the mux to the follower,
// relayed to a fake leader (which only answers, so nearly all the work
// counted is the follower's and the client's), and its answer passed back.
// pass is the follower passing frames through, reencode the follower
// decoding and encoding them again (as before). Run with -benchmem:
// allocations per op are the forward path's.
func BenchmarkFollowerForward(b *testing.B) {
	for _, mode := range []string{"pass", "reencode"} {
		b.Run(mode, func(b *testing.B) {
			l := newRelayLeader(b, false, createdAnswer)
			_, c := followerOf(b, l, mode == "reencode")
			hdr := http.Header{}
			hdr.Set("Authorization", "Bearer "+headTok)
			hdr.Set("Content-Type", "application/json")
			body := []byte(`{"stream":"bench","payload":{"t":1700000000000000000,"i":12345,"pad":"` + strings.Repeat("x", 200) + `"}}`)
			frame := wire.AppendRequest(nil, http.MethodPost, "/jobs", hdr, body)
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(8) // requests in flight together, as on a loaded follower
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := c.RoundTrip(ctx, frame)
					if err != nil {
						b.Error(err)
						return
					}
					if r.StatusCode != http.StatusCreated {
						b.Errorf("status %d", r.StatusCode)
						return
					}
				}
			})
		})
	}
}

// A follower passing a client's mux request through to the leader as its
// frame, and the leader's answer back as its frame, sends and answers
// exactly what decoding and encoding both again did: the same method, path,
// query, header fields and body reach the leader (the client's own
// X-Spine-Forwarded-By replaced by the follower's, hop-by-hop fields
// dropped, a read's body not sent), and the client gets the same status,
// header fields (the follower's X-Spine-Node; its leader headers where the
// leader's answer has none) and body.
func TestRelayPassesFramesThrough(t *testing.T) {
	answer := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set(api.HeaderNode, "n1")
		h.Set(api.HeaderLeader, "n1")
		h.Set(api.HeaderIndex, "9")
		h.Set("Content-Type", "application/json")
		h["X-Multi"] = []string{"a", "b"}
		h["x-lower"] = []string{"v"}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"seen":"`+r.Method+" "+r.URL.Path+`"}`)
	}
	type out struct {
		leader []recordedReq
		client []resp
	}
	hdr := func(kv ...string) []byte { // a header block, fields in order
		b := binary.AppendUvarint(nil, uint64(len(kv)/2))
		for i := 0; i+1 < len(kv); i += 2 {
			b = wire.AppendField(wire.AppendField(b, []byte(kv[i])), []byte(kv[i+1]))
		}
		return b
	}
	frame := func(method, uri string, h []byte, body string) []byte {
		b := wire.AppendField(wire.AppendField(nil, []byte(method)), []byte(uri))
		return wire.AppendField(append(b, h...), []byte(body))
	}
	auth := "Bearer " + headTok
	frames := [][]byte{
		frame("POST", "/jobs", hdr("Authorization", auth, "Content-Type", "application/json",
			api.HeaderForwardedBy, "n9", "X-Dup", "1", "X-Dup", "2", "x-lower", "q", "Idempotency-Key", "k1"), `{"payload":1}`),
		frame("POST", "/jobs?x=1", hdr("Connection", "close", "Authorization", auth, "Te", "trailers", "Upgrade", "h2c"), `{"payload":2}`),
		frame("GET", "/jobs/a%2Fb?y=%20&z", hdr("Authorization", auth), `{"ignored":true}`),
		frame("GET", "/jobs/a b", hdr("Authorization", auth), ""),
		frame("POST", "http://elsewhere.test:1/jobs?q=1", hdr("Authorization", auth), `{"payload":3}`),
	}
	run := func(reencode bool) out {
		l := newRelayLeader(t, true, answer)
		_, c := followerOf(t, l, reencode)
		var o out
		for _, fr := range frames {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := c.RoundTrip(ctx, fr)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			if got := r.Header.Get(api.HeaderLeaderAddr); got != l.URL {
				t.Errorf("%s = %q, want the follower's leader %s (the leader's answer has none)", api.HeaderLeaderAddr, got, l.URL)
			}
			r.Header.Del(api.HeaderLeaderAddr) // each run has its own leader
			o.client = append(o.client, resp{Code: r.StatusCode, Header: r.Header, Body: b})
		}
		o.leader = l.requests()
		return o
	}
	passed, reencoded := run(false), run(true)
	if len(passed.leader) != len(frames) || len(reencoded.leader) != len(frames) {
		t.Fatalf("the leader saw %d and %d requests, want %d each", len(passed.leader), len(reencoded.leader), len(frames))
	}
	for i := range frames {
		p, r := passed.leader[i], reencoded.leader[i]
		if !reflect.DeepEqual(p, r) {
			t.Errorf("request %d reached the leader as\n%+v\npassed through, as\n%+v\nre-encoded", i, p, r)
		}
		if got := p.Header[api.HeaderForwardedBy]; len(got) != 1 || got[0] != "n2" {
			t.Errorf("request %d: %s = %q, want only the follower's", i, api.HeaderForwardedBy, got)
		}
		for _, k := range []string{"Connection", "Te", "Upgrade"} {
			if _, ok := p.Header[k]; ok {
				t.Errorf("request %d: hop-by-hop %s reached the leader", i, k)
			}
		}
		pc, rc := passed.client[i], reencoded.client[i]
		for _, h := range []http.Header{pc.Header, rc.Header} {
			delete(h, api.HeaderIndex) // the follower's applied index when the leader's is not taken
		}
		if !reflect.DeepEqual(pc, rc) {
			t.Errorf("answer %d passed through\n%d %v %s\nre-encoded\n%d %v %s", i, pc.Code, pc.Header, pc.Body, rc.Code, rc.Header, rc.Body)
		}
		if pc.Code != http.StatusAccepted || pc.Header.Get(api.HeaderNode) != "n2" || pc.Header.Get(api.HeaderLeader) != "n1" {
			t.Errorf("answer %d: %d, %s %q", i, pc.Code, api.HeaderNode, pc.Header.Get(api.HeaderNode))
		}
	}
	if got := passed.leader[2].Body; got != "" {
		t.Errorf("a forwarded read carried the body %q", got)
	}
}

// Over a client's mux, a follower still resends a request its leader
// refused unapplied (no_leader) and answers outcome_unknown, never
// resending, when the leader's answer is lost.
func TestRelayPassNoLeaderAndLost(t *testing.T) {
	var creates, cancels atomic.Int32
	release := make(chan struct{})
	var l *relayLeader
	l = newRelayLeader(t, false, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/jobs" && creates.Add(1) == 1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"`+api.CodeNoLeader+`","message":"not the leader"}}`)
		case r.URL.Path == "/jobs":
			createdAnswer(w, r)
		default: // the answer is lost: the leader goes away meanwhile
			cancels.Add(1)
			close(release)
			<-r.Context().Done()
		}
	})
	_, c := followerOf(t, l, false)
	r := muxDo(t, c, "POST", "/jobs", headTok, `{"payload":1}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("create after a no_leader: %d %s", r.Code, r.Body)
	}
	if n := creates.Load(); n != 2 {
		t.Fatalf("the leader got the create %d times, want 2 (refused, then taken)", n)
	}
	go func() { <-release; l.srv.Close() }()
	r = muxDo(t, c, "POST", "/jobs/x/cancel", headTok, "")
	r.apiErr(t, http.StatusServiceUnavailable, api.CodeOutcomeUnknown)
	if n := cancels.Load(); n != 1 {
		t.Fatalf("the leader got the lost write %d times, want 1", n)
	}
}
