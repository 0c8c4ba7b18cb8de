package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Fuzz targets for everything that reads the wire protocol's bytes: frame
// payloads (DecodeRequest, DecodeResponse), frames (ReadFrame), and the
// two ends of a connection reading a peer's stream (Server.Serve, the
// client's read loop). `make fuzz` runs each for a fixed time; `make test`
// runs their seeds.

// requestSeeds are request frame payloads as clients write them.
func requestSeeds() [][]byte {
	h := http.Header{"Authorization": {"Bearer head-secret"}, "Content-Type": {"application/json"}}
	multi := http.Header{"X-Spine-Min-Index": {"7"}, "Accept": {"a", "b", ""}, "Connection": {"close"}, "": {""}}
	return [][]byte{
		AppendRequest(nil, "GET", "/jobs?status=queued&limit=5", h, nil),
		AppendRequest(nil, "POST", "/jobs", h, []byte(`{"payload":{"n":1}}`)),
		AppendRequest(nil, "POST", "/internal/worker/claim", multi, []byte{}),
		AppendRequest(nil, "PATCH", "http://n1.test:36725/x?y#z", nil, bytes.Repeat([]byte{0}, 40)),
		AppendRequest(nil, "DELETE", "*", nil, nil),
	}
}

func responseSeeds() [][]byte {
	h := http.Header{"Content-Type": {"application/json"}, "X-Spine-Index": {"12"}, "Set-Cookie": {"a=1", "b=2"}}
	return [][]byte{
		AppendResponse(nil, 200, h, []byte(`{"id":"j1"}`)),
		AppendResponse(nil, 404, nil, nil),
		AppendResponse(nil, 101, http.Header{"Upgrade": {"x"}}, []byte{}),
		AppendResponse(nil, 999, h, bytes.Repeat([]byte("x"), 100)),
	}
}

// withoutHop is h without the headers a frame never carries.
func withoutHop(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		if !HopHeaders[k] {
			out[k] = vs
		}
	}
	return out
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzDecodeRequest: any payload decodes or is refused with an error,
// allocating in proportion to its size; a decoded request re-encodes
// (AppendRequest) to a payload that decodes to the same method, URI,
// headers (less the hop-by-hop ones, which a frame never carries) and body.
func FuzzDecodeRequest(f *testing.F) {
	for _, p := range requestSeeds() {
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add([]byte{3, 'G', 'E', 'T', 1, '/', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, p []byte) {
		var req *http.Request
		var err error
		if n := allocated(func() { req, err = DecodeRequest(p) }); n > 64<<10+16*uint64(len(p)) {
			t.Fatalf("decoding a %d-byte payload allocated %d bytes", len(p), n)
		}
		if err != nil {
			return
		}
		body, ok := BodyBytes(req.Body)
		if !ok || int64(len(body)) != req.ContentLength {
			t.Fatalf("body: %v, %d bytes, ContentLength %d", ok, len(body), req.ContentLength)
		}
		if read, _ := io.ReadAll(req.Body); !bytes.Equal(read, body) {
			t.Fatal("the body reads differently from BodyBytes")
		}
		again, err := DecodeRequest(AppendRequest(nil, req.Method, req.RequestURI, req.Header, body))
		if err != nil {
			t.Fatalf("re-encoded request refused: %v", err)
		}
		body2, _ := BodyBytes(again.Body)
		if again.Method != req.Method || again.RequestURI != req.RequestURI || !bytes.Equal(body2, body) ||
			again.URL.String() != req.URL.String() || again.Host != req.Host {
			t.Fatalf("round trip: %q %q %q -> %q %q %q", req.Method, req.RequestURI, body, again.Method, again.RequestURI, body2)
		}
		if want := withoutHop(req.Header); !reflect.DeepEqual(again.Header, want) {
			t.Fatalf("headers: %q -> %q", want, again.Header)
		}
	})
}

// FuzzDecodeResponse: as FuzzDecodeRequest, for answers; a decoded status
// is always a three-digit one.
func FuzzDecodeResponse(f *testing.F) {
	for _, p := range responseSeeds() {
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add([]byte{0xc8, 0x01, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		var resp *http.Response
		var err error
		if n := allocated(func() { resp, err = DecodeResponse(p) }); n > 64<<10+16*uint64(len(p)) {
			t.Fatalf("decoding a %d-byte payload allocated %d bytes", len(p), n)
		}
		if err != nil {
			return
		}
		if resp.StatusCode < 100 || resp.StatusCode > 999 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || int64(len(body)) != resp.ContentLength {
			t.Fatalf("body: %v, %d bytes, ContentLength %d", err, len(body), resp.ContentLength)
		}
		again, err := DecodeResponse(AppendResponse(nil, resp.StatusCode, resp.Header, body))
		if err != nil {
			t.Fatalf("re-encoded answer refused: %v", err)
		}
		body2, _ := io.ReadAll(again.Body)
		if again.StatusCode != resp.StatusCode || !bytes.Equal(body2, body) {
			t.Fatalf("round trip: %d %q -> %d %q", resp.StatusCode, body, again.StatusCode, body2)
		}
		if want := withoutHop(resp.Header); !reflect.DeepEqual(again.Header, want) {
			t.Fatalf("headers: %q -> %q", want, again.Header)
		}
	})
}

// FuzzReadFrame: a stream of bytes reads as frames until an error; no
// frame's payload is over the bound (a server's, MaxRequestFrame), none
// allocates more than the bound whatever its length says, and the frames
// read re-encode (AppendFrame) to exactly the bytes they were read from.
func FuzzReadFrame(f *testing.F) {
	var stream []byte
	for i, p := range requestSeeds() {
		stream = AppendFrame(stream, FrameRequest, uint64(i+1), p)
	}
	stream = AppendFrame(stream, FrameCancel, 3, nil)
	stream = AppendFrame(stream, FrameGoAway, 2, nil)
	f.Add(stream)
	f.Add(AppendFrame(nil, FrameResponse, 1<<63, responseSeeds()[0]))
	f.Add([]byte{0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0, 1})             // length under the header's
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 1}) // length over the bound
	f.Add([]byte{0, 0x11, 0x00, 0x09, 3, 0, 0, 0, 0, 0, 0, 0, 1})    // at the bound, cut short
	const max = MaxRequestFrame
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		var again []byte
		for {
			var (
				kind    byte
				id      uint64
				payload []byte
				err     error
			)
			if n := allocated(func() { kind, id, payload, err = ReadFrame(br, max) }); n > max+64<<10 {
				t.Fatalf("reading a frame allocated %d bytes (bound %d)", n, max)
			}
			if err != nil {
				break
			}
			if len(payload) > max {
				t.Fatalf("a %d-byte payload over the bound %d", len(payload), max)
			}
			again = AppendFrame(again, kind, id, payload)
		}
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("frames re-encode to other bytes:\n%x\n%x", again, data[:min(len(data), len(again))])
		}
	})
}

// streamConn is a net.Conn whose peer sent in and then closed; what is
// written to it is kept.
type streamConn struct {
	in *bytes.Reader

	mu     sync.Mutex
	out    []byte
	closed bool
}

func newStreamConn(in []byte) *streamConn { return &streamConn{in: bytes.NewReader(in)} }

func (c *streamConn) Read(p []byte) (int, error) { return c.in.Read(p) }
func (c *streamConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.out = append(c.out, p...)
	return len(p), nil
}
func (c *streamConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (c *streamConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.out...)
}
func (c *streamConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *streamConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzServer is shared by the iterations of FuzzServeConn (its pooled
// goroutines outlive a connection); served counts its handlers running.
var (
	fuzzServerOnce sync.Once
	fuzzServer     *Server
	served         sync.WaitGroup
)

func echoServer() *Server {
	fuzzServerOnce.Do(func() {
		fuzzServer = &Server{MaxFrame: 4096, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer served.Done()
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Method", r.Method)
			w.WriteHeader(http.StatusAccepted)
			w.Write(body)
		}), Prepare: func(*http.Request) { served.Add(1) }}
	})
	return fuzzServer
}

// FuzzServeConn: a server reading any stream (a peer's requests, cancels,
// garbage) ends with an error when the stream ends, never panics, and
// writes only well-formed answer frames, each to a request it read.
func FuzzServeConn(f *testing.F) {
	var stream []byte
	for i, p := range requestSeeds() {
		stream = AppendFrame(stream, FrameRequest, uint64(i+1), p)
	}
	f.Add(stream)
	f.Add(AppendFrame(AppendFrame(nil, FrameRequest, 9, requestSeeds()[1]), FrameCancel, 9, nil))
	f.Add(AppendFrame(nil, FrameRequest, 1, []byte{1, 'G', 0xff, 0x01}))
	f.Add(AppendFrame(nil, FrameResponse, 1, responseSeeds()[0]))
	f.Add([]byte{0, 0, 0x10, 0x0a, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := echoServer()
		conn := newStreamConn(data)
		c := NewConn(conn, bufio.NewReader(conn))
		requested := map[uint64]bool{}
		br := bufio.NewReader(bytes.NewReader(data))
		for {
			kind, id, payload, err := ReadFrame(br, s.MaxFrame)
			if err != nil || kind != FrameRequest && kind != FrameCancel {
				break
			}
			if _, err := DecodeRequest(payload); err != nil {
				break
			}
			if kind == FrameRequest {
				requested[id] = true
			}
		}
		if err := s.Serve(c); err == nil {
			t.Fatal("Serve returned no error at the end of the stream")
		}
		served.Wait()
		out := bufio.NewReader(bytes.NewReader(conn.written()))
		for {
			kind, id, payload, err := ReadFrame(out, MaxFrame)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the server wrote a broken frame: %v", err)
			}
			if kind != FrameResponse || !requested[id] {
				t.Fatalf("the server wrote a frame of kind %d for id %d (requests: %v)", kind, id, requested)
			}
			resp, err := DecodeResponse(payload)
			if err != nil || resp.StatusCode != http.StatusAccepted {
				t.Fatalf("answer %d: %v %v", id, resp, err)
			}
		}
	})
}

// FuzzClientConn: a client reading any stream from its server gives each
// request waiting on the connection exactly one outcome (an answer, or an
// error once the stream ends or the server goes away), never two, and
// never panics.
func FuzzClientConn(f *testing.F) {
	f.Add(AppendFrame(AppendFrame(nil, FrameResponse, 1, responseSeeds()[0]), FrameResponse, 2, responseSeeds()[1]))
	f.Add(AppendFrame(AppendFrame(nil, FrameGoAway, 1, nil), FrameResponse, 1, responseSeeds()[2]))
	f.Add(AppendFrame(AppendFrame(nil, FrameResponse, 3, []byte{0}), FrameResponse, 3, responseSeeds()[3]))
	f.Add(AppendFrame(nil, FrameRequest, 1, requestSeeds()[0]))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		conn := newStreamConn(data)
		c := &Client{Conn: NewConn(conn, bufio.NewReader(conn)), pending: map[uint64]chan answer{}}
		chans := map[uint64]chan answer{}
		for id := uint64(1); id <= 3; id++ {
			chans[id] = make(chan answer, 2)
			c.pending[id] = chans[id]
		}
		c.readLoop() // returns once the stream ends
		if len(c.pending) != 0 {
			t.Fatalf("requests left waiting: %v", c.pending)
		}
		for id, ch := range chans {
			if n := len(ch); n != 1 {
				t.Fatalf("request %d got %d outcomes", id, n)
			}
			a := <-ch
			if (a.payload == nil) == (a.err == nil) {
				t.Fatalf("request %d: answer %q and error %v", id, a.payload, a.err)
			}
			if a.payload != nil {
				if resp, err := DecodeResponse(a.payload); err == nil && (resp.StatusCode < 100 || resp.StatusCode > 999) {
					t.Fatalf("request %d: status %d", id, resp.StatusCode)
				}
			}
		}
		if c.Alive() {
			t.Fatal("the connection is alive after its stream ended")
		}
	})
}
