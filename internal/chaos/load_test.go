package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// net/http replays a POST with an Idempotency-Key (the Go client's create)
// on a new connection when the reused one it was written on breaks, and
// reports the new connection's dial error. The create may have been applied
// (a chaos run found one answered "dup" by its next try): it is unknown,
// not "not sent".
func TestReplayedCreateIsUnknown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		// The node dies with the request read: nothing listens any more.
		ln.Close()
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	hc, closeFn := newHTTP(false)
	defer closeFn()
	url := "http://" + ln.Addr().String() + "/jobs"
	post := func() (*capture, error) {
		cp := &capture{}
		ctx, cancel := context.WithTimeout(withTrace(context.WithValue(context.Background(), captureKey{}, cp), cp), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"payload":1}`)))
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return cp, err
	}
	if _, err := post(); err != nil {
		t.Fatal(err)
	}
	cp, err := post()
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" {
		t.Skipf("net/http did not replay the request on a new connection (err %v): nothing to check", err)
	}
	if o, _ := classifyTransport(err); o != Refused {
		t.Fatalf("the dial error alone reads %v", o)
	}
	if o, code := classifyError(err, cp); o != Unknown || !strings.HasPrefix(code, "written, then") {
		t.Fatalf("a replayed create reads %v %q, want unknown", o, code)
	}
	// A dial error with nothing written before is still "not sent".
	if o, _ := classifyError(fmt.Errorf("post: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), &capture{}); o != Refused {
		t.Fatalf("a first dial error reads %v", o)
	}
}
