package wire

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Frames survive a round trip, and truncated or oversized ones are refused.
func TestFraming(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer x"}, "X-Multi": {"a", "b"}, "Connection": {"close"}}
	p := AppendRequest(nil, "POST", "/jobs?x=1", h, []byte(`{"payload":1}`))
	req, err := DecodeRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.URL.RequestURI() != "/jobs?x=1" || string(body) != `{"payload":1}` ||
		req.Header.Get("Authorization") != "Bearer x" || len(req.Header["X-Multi"]) != 2 || req.Header.Get("Connection") != "" {
		t.Fatalf("decoded %s %s %v %q", req.Method, req.URL, req.Header, body)
	}
	for i := 0; i < len(p); i++ {
		if _, err := DecodeRequest(p[:i]); err == nil {
			t.Fatalf("truncated request of %d bytes decoded", i)
		}
	}
	frame := AppendFrame(nil, FrameRequest, 42, p)
	kind, id, got, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)), MaxRequestFrame)
	if err != nil || kind != FrameRequest || id != 42 || !bytes.Equal(got, p) {
		t.Fatalf("frame round trip: %d %d %v", kind, id, err)
	}
	huge := AppendFrame(nil, FrameRequest, 1, nil)
	binary.BigEndian.PutUint32(huge, MaxRequestFrame+100)
	if _, _, _, err := ReadFrame(bufio.NewReader(bytes.NewReader(huge)), MaxRequestFrame); err == nil {
		t.Fatal("oversized frame accepted")
	}
	r := AppendResponse(nil, 409, http.Header{"Retry-After": {"1"}}, []byte(`{"error":{}}`))
	resp, err := DecodeResponse(r)
	if err != nil || resp.StatusCode != 409 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("answer round trip: %v %v", resp, err)
	}
	if _, err := DecodeResponse(AppendResponse(nil, 7, nil, nil)); err == nil {
		t.Fatal("status 7 accepted")
	}
}

// A pooled recorder starts every answer empty: no header, status or body of
// an earlier answer leaks into a later one, whichever recorder the pool
// hands out (under -race the pool drops items at random, so both fresh and
// reused recorders are exercised).
func TestRecorderReuseStartsEmpty(t *testing.T) {
	for i := 0; i < 200; i++ {
		rec := newRecorder()
		if len(rec.header) != 0 || rec.status != 0 || rec.bodyAt != 0 || len(rec.frame) != 0 || rec.passed {
			t.Fatalf("answer %d: recorder holds header %v, status %d, frame %q", i, rec.header, rec.status, rec.frame)
		}
		want := fmt.Sprintf(`{"n":%d}`, i)
		if i%2 == 0 {
			rec.Header().Set("Retry-After", "1")
			rec.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = rec.Write([]byte(want))
		resp, err := DecodeResponse(bytes.Clone(rec.encode()))
		rec.free()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		wantStatus, wantRetry := http.StatusOK, false
		if i%2 == 0 {
			wantStatus, wantRetry = http.StatusServiceUnavailable, true
		}
		if retry := resp.Header.Get("Retry-After") != ""; resp.StatusCode != wantStatus || retry != wantRetry {
			t.Fatalf("answer %d: status %d, Retry-After %v; want %d, %v", i, resp.StatusCode, retry, wantStatus, wantRetry)
		}
		if string(body) != want {
			t.Fatalf("answer %d: body %q, want %q", i, body, want)
		}
	}
}

// A recorder writes the body into the answer's frame as it comes, the rest
// of a long one into chunks, and puts its length in front at the end: the
// frame and the chunks after it are AppendResponse's, for bodies whose
// length takes one to four bytes, written whole or in pieces, and for an
// answer with no body.
func TestRecorderFrameIsTheAnswer(t *testing.T) {
	for _, size := range []int{-1, 0, 1, 127, 128, 16383, 16384, 100_000, 1<<21 + 3} {
		for _, pieces := range []int{1, 3} {
			rec := newRecorder()
			rec.Header()["X-Spine-Index"] = []string{"42", "43"} // one field: a map's order is random
			rec.WriteHeader(http.StatusCreated)
			body := make([]byte, max(size, 0))
			for i := range body {
				body[i] = byte('a' + i%26)
			}
			if size >= 0 {
				for i := 0; i < pieces; i++ {
					_, _ = rec.Write(body[i*len(body)/pieces : (i+1)*len(body)/pieces])
				}
			}
			want := AppendResponse(nil, http.StatusCreated, rec.Header(), body)
			got := bytes.Clone(rec.encode())
			for _, c := range rec.long.b {
				got = append(got, c...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("body of %d bytes in %d writes: frame of %d bytes, want %d", size, pieces, len(got), len(want))
			}
			rec.free()
		}
	}
}

// muxServer serves h over spine-mux/1 (key "good") and over plain HTTP,
// counting the requests each way.
type muxServer struct {
	*httptest.Server
	overMux, overHTTP atomic.Int64
	mu                sync.Mutex
	conns             []*Conn // server sides of the upgraded connections
}

// breakConns closes the server side of every upgraded connection.
func (s *muxServer) breakConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Fail(errors.New("broken by the test"))
	}
}

func newMuxServer(t *testing.T, h http.HandlerFunc, cfg *Server) *muxServer {
	t.Helper()
	s := &muxServer{}
	cfg.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.overMux.Add(1)
		h(w, r)
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MuxPath {
			if r.Header.Get("Authorization") != "Bearer good" {
				http.Error(w, "bad token", http.StatusUnauthorized)
				return
			}
			c, err := Accept(w, r, MuxProtocol)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go cfg.Serve(c)
			return
		}
		s.overHTTP.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Auth", r.Header.Get("Authorization"))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "%s %s", r.URL.RequestURI(), b)
}

// Many goroutines share one connection, each gets its own answer, and what
// the protocol does not carry goes over plain HTTP with the same answer.
func TestTransportCarriesConcurrentRequests(t *testing.T) {
	srv := newMuxServer(t, echo, &Server{})
	tr := NewTransport(http.DefaultTransport)
	tr.Bypass = func(r *http.Request) bool { return r.URL.Path == "/download" }
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/jobs?i=%d", srv.URL, i), strings.NewReader(fmt.Sprint(i)))
			req.Header.Set("Authorization", "Bearer good")
			resp, err := hc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("/jobs?i=%d %d", i, i); resp.StatusCode != 201 || string(b) != want || resp.Header.Get("X-Auth") != "Bearer good" {
				errs <- fmt.Errorf("request %d: %d %q %v, want 201 %q", i, resp.StatusCode, b, resp.Header, want)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := srv.overMux.Load(); got != n {
		t.Fatalf("%d requests over the mux, want %d", got, n)
	}
	if clients, _, _ := tr.pool.Stats(); clients != 1 {
		t.Fatalf("%d connections, want 1", clients)
	}

	// No token, a request Bypass names, a body over MaxBody: plain HTTP,
	// same answers.
	for _, c := range []struct {
		path, auth string
		body       []byte
	}{
		{"/health", "", nil},
		{"/download", "Bearer good", []byte("x")},
		{"/jobs", "Bearer good", bytes.Repeat([]byte("a"), MaxBody+1)},
	} {
		before := srv.overHTTP.Load()
		req, _ := http.NewRequest("POST", srv.URL+c.path, bytes.NewReader(c.body))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || !bytes.Equal(b, append([]byte(c.path+" "), c.body...)) {
			t.Fatalf("%s: %d, %d bytes", c.path, resp.StatusCode, len(b))
		}
		if srv.overHTTP.Load() != before+1 {
			t.Fatalf("%s did not go over plain HTTP", c.path)
		}
	}
}

// A node that refuses the upgrade (an older version) is served over plain
// HTTP, with the request's body intact, and not asked again at once.
func TestTransportFallsBackWhenRefused(t *testing.T) {
	srv := newMuxServer(t, echo, &Server{})
	tr := NewTransport(http.DefaultTransport)
	hc := &http.Client{Transport: tr}
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader("body"))
		req.Header.Set("Authorization", "Bearer stale")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "/jobs body" {
			t.Fatalf("answer %q", b)
		}
	}
	if srv.overHTTP.Load() != 3 || srv.overMux.Load() != 0 {
		t.Fatalf("http %d mux %d, want 3 and 0", srv.overHTTP.Load(), srv.overMux.Load())
	}
	if clients, _, unsupported := tr.pool.Stats(); clients != 0 || unsupported != 1 {
		t.Fatalf("clients %d unsupported %d", clients, unsupported)
	}
}

// A caller that goes away cancels its request on the server at once; a
// request whose connection breaks after it was sent is lost, not "not sent".
func TestCancelAndLoss(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	srv := newMuxServer(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		cancelled <- struct{}{}
	}, &Server{})
	c, err := Dial(context.Background(), srv.URL, MuxPath, MuxProtocol, "good")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(ctx, AppendRequest(nil, "POST", "/wait", nil, nil))
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server kept serving a cancelled request")
	}

	go func() {
		_, err := c.RoundTrip(context.Background(), AppendRequest(nil, "POST", "/wait", nil, nil))
		done <- err
	}()
	<-started
	srv.breakConns()
	if err := <-done; !errors.Is(err, ErrLost) {
		t.Fatalf("request on a broken connection: %v, want ErrLost", err)
	}
	if _, err := c.RoundTrip(context.Background(), AppendRequest(nil, "GET", "/x", nil, nil)); !errors.Is(err, ErrNotSent) {
		t.Fatalf("request after the break: %v, want ErrNotSent", err)
	}
}

// A connection's requests in flight are bounded: past the bound, the server
// reads no more of them until one ends.
func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	var running, peak atomic.Int64
	srv := newMuxServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		running.Add(-1)
	}, &Server{MaxInFlight: 3})
	c, err := Dial(context.Background(), srv.URL, MuxPath, MuxProtocol, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := c.RoundTrip(context.Background(), AppendRequest(nil, "GET", "/x", nil, nil)); err != nil || resp.StatusCode != 200 {
				t.Errorf("request: %v", err)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("three requests never ran")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak of %d requests at once, want 3", p)
	}
}

// An address that accepts connections but never answers the upgrade (hung,
// or partitioned after the handshake) holds at most one dial: callers
// arriving meanwhile share it instead of queueing behind one another's
// dials, a caller that leaves is let go at once, and a connection to another
// address is not held up by it.
func TestPoolDialIsSharedAndDoesNotBlockOthers(t *testing.T) {
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
	live := newMuxServer(t, echo, &Server{})
	pool := &Pool{Path: MuxPath, Protocol: MuxProtocol}
	defer pool.Close()
	hungURL := "http://" + hung.Addr().String()

	const callers = 8
	results := make(chan error, callers)
	for i := 0; i < callers; i++ {
		go func() {
			_, err := pool.Get(context.Background(), hungURL, "good")
			results <- err
		}()
	}
	var first net.Conn
	select {
	case first = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no dial reached the hung address")
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, dialing, _ := pool.Stats(); dialing != 1; _, dialing, _ = pool.Stats() {
		if time.Now().After(deadline) {
			t.Fatal("no dial in flight")
		}
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pool.Get(ctx, hungURL, "good"); !errors.Is(err, ErrNotSent) {
		t.Fatalf("caller that left: %v, want a not-sent error", err)
	}
	c, err := pool.Get(context.Background(), live.URL, "good")
	if err != nil || c == nil {
		t.Fatalf("connection to a live address while another dial hangs: %v", err)
	}

	first.Close() // the upgrade fails: that address speaks no mux
	for i := 0; i < callers; i++ {
		select {
		case err := <-results:
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("caller %d: %v, want unsupported", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("callers still waiting after the dial ended")
		}
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a second dial reached the hung address")
	default:
	}
}

// Shutdown drains a connection without leaving any request in doubt: the
// requests the server read are answered, and every other one fails as not
// sent (and indeed never ran), so the client may send it elsewhere.
func TestShutdownAnswersWhatItReadAndNothingElse(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	ran := map[string]bool{}
	var slow atomic.Int64
	srvCfg := &Server{}
	srv := newMuxServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ran[r.URL.Query().Get("n")] = true
		mu.Unlock()
		if r.URL.Path == "/slow" {
			slow.Add(1)
			<-release
		}
	}, srvCfg)
	c, err := Dial(context.Background(), srv.URL, MuxPath, MuxProtocol, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	type result struct {
		n    string
		resp *http.Response
		err  error
	}
	results := make(chan result, 200)
	send := func(path string, n int) {
		key := fmt.Sprint(n)
		resp, err := c.RoundTrip(context.Background(), AppendRequest(nil, "POST", path+"?n="+key, nil, nil))
		results <- result{key, resp, err}
	}
	const slowN, lateN = 20, 100
	for i := 0; i < slowN; i++ {
		go send("/slow", i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slow.Load() < slowN {
		if time.Now().After(deadline) {
			t.Fatal("the slow requests never ran")
		}
		time.Sleep(time.Millisecond)
	}
	// More requests race the shutdown: some are read before it, some are
	// in the kernel or half read when it interrupts the reader, the last
	// ones are refused by the client after the go-away.
	for i := slowN; i < slowN+lateN; i++ {
		go send("/fast", i)
	}
	done := make(chan struct{})
	go func() {
		srvCfg.Shutdown(context.Background())
		close(done)
	}()
	for c.Alive() {
		if time.Now().After(deadline) {
			t.Fatal("no go-away reached the client")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	answered, notSent := 0, 0
	for i := 0; i < slowN+lateN; i++ {
		r := <-results
		mu.Lock()
		didRun := ran[r.n]
		mu.Unlock()
		switch {
		case r.err == nil:
			answered++
			if !didRun || r.resp.StatusCode != http.StatusOK {
				t.Errorf("request %s answered %d but ran=%v", r.n, r.resp.StatusCode, didRun)
			}
		case errors.Is(r.err, ErrNotSent):
			notSent++
			if didRun {
				t.Errorf("request %s reported not sent, but it ran", r.n)
			}
		default:
			t.Errorf("request %s: %v (in doubt)", r.n, r.err)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the last answer")
	}
	if answered < slowN {
		t.Fatalf("%d answered, want at least the %d slow ones", answered, slowN)
	}
	if n := srvCfg.Conns(); n != 0 {
		t.Fatalf("%d connections still served", n)
	}
	t.Logf("%d answered, %d not sent", answered, notSent)
}

// A client that sends requests but reads no answers is not served without
// bound: once its unread answers pass MaxBacklog the server stops reading
// its requests (as an HTTP/1.1 server does not read the next request of a
// client that does not read its answer), so it cannot make a node buffer
// answers until it runs out of memory. Other connections are unaffected.
func TestBacklogStopsReadingFromAClientThatDoesNotRead(t *testing.T) {
	var served atomic.Int64
	answer := bytes.Repeat([]byte("a"), 64<<10)
	srv := newMuxServer(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = w.Write(answer)
	}, &Server{MaxBacklog: 1 << 20})

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+MuxPath+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nConnection: Upgrade\r\nUpgrade: "+MuxProtocol+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	// 4000 requests of 16 KiB (64 MiB, far more than the sockets' buffers
	// hold) whose answers are 250 MiB; this client reads none.
	const n = 4000
	sent := make(chan error, 1)
	go func() {
		req := AppendRequest(nil, "POST", "/big", nil, bytes.Repeat([]byte("r"), 16<<10))
		var b []byte
		for i := uint64(1); i <= n; i++ {
			b = AppendFrame(b, FrameRequest, i, req)
		}
		_, err := conn.Write(b)
		sent <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for served.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no request served")
		}
		time.Sleep(time.Millisecond)
	}
	// The server must stop reading: the client's write cannot finish.
	select {
	case err := <-sent:
		t.Fatalf("the server read all %d requests of a client that reads no answer (write: %v); %d served", n, err, served.Load())
	case <-time.After(2 * time.Second):
	}
	if got := served.Load(); got >= n/2 {
		t.Fatalf("%d of %d requests served to a client that reads nothing", got, n)
	}
	// Another client is served meanwhile.
	c, err := Dial(context.Background(), srv.URL, MuxPath, MuxProtocol, "good")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.RoundTrip(context.Background(), AppendRequest(nil, "GET", "/big", nil, nil))
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("another client: %v %v", r, err)
	}
	t.Logf("%d requests served before the server stopped reading", served.Load())
}

// BenchmarkDecodeRequest decodes a worker's complete as a claw's mux
// request carries it.
func BenchmarkDecodeRequest(b *testing.B) {
	h := http.Header{}
	h.Set("Authorization", "Bearer claw-token-0123456789")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "spine-go/1")
	h.Set("X-Spine-Min-Index", "123456")
	body := []byte(`{"worker_id":"w-1","job_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","lease_token":"0123456789abcdef","attempt_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c","output":{"ok":true}}`)
	p := AppendRequest(nil, http.MethodPost, "/internal/worker/complete", h, body)
	b.ReportAllocs()
	for b.Loop() {
		r, err := DecodeRequest(p)
		if err != nil || r.Header.Get("X-Spine-Min-Index") != "123456" {
			b.Fatal(err)
		}
		got, ok := BodyBytes(r.Body)
		if !ok || len(got) != len(body) {
			b.Fatal("body")
		}
	}
}

// Clients that keep sending while the server shuts down (workers polling
// again at once, as a drained long poll tells them to) still get every
// request answered or proven not sent: requests still unread in the
// server's socket when it closes must not turn into a reset that destroys
// the go-away and the answers queued before it.
func TestShutdownUnderContinuousSendingLeavesNothingInDoubt(t *testing.T) {
	for round := 0; round < 20; round++ {
		srvCfg := &Server{}
		var ran sync.Map
		srv := newMuxServer(t, func(w http.ResponseWriter, r *http.Request) {
			ran.Store(r.URL.Query().Get("n"), true)
			_, _ = io.Copy(io.Discard, r.Body)
		}, srvCfg)
		c, err := Dial(context.Background(), srv.URL, MuxPath, MuxProtocol, "good")
		if err != nil {
			t.Fatal(err)
		}
		body := bytes.Repeat([]byte("x"), 16<<10) // fill the server's socket buffer quickly
		var wg sync.WaitGroup
		var mu sync.Mutex
		var doubts []string
		var started atomic.Int64
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 100000; i++ {
					key := fmt.Sprintf("%d-%d", g, i)
					started.Add(1)
					resp, err := c.RoundTrip(context.Background(), AppendRequest(nil, "POST", "/x?n="+key, nil, body))
					if err == nil {
						resp.Body.Close()
						continue
					}
					_, didRun := ran.Load(key)
					if !errors.Is(err, ErrNotSent) || didRun {
						mu.Lock()
						doubts = append(doubts, fmt.Sprintf("request %s: %v (ran=%v)", key, err, didRun))
						mu.Unlock()
					}
					return
				}
			}(g)
		}
		deadline := time.Now().Add(10 * time.Second)
		for started.Load() < 200 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		srvCfg.Shutdown(context.Background())
		wg.Wait()
		c.Close()
		for _, d := range doubts {
			t.Errorf("round %d: %s", round, d)
		}
		if t.Failed() {
			return
		}
	}
}
