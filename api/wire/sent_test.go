package wire

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
)

// slowReturnConn hands its writes to the peer at once but returns from
// Write only when released: the peer can act on a frame before the writer
// learns its write completed.
type slowReturnConn struct {
	net.Conn
	release chan struct{}
}

func (c *slowReturnConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	<-c.release
	return n, err
}

// A request whose bytes reached the server is never reported "not sent",
// even when the connection breaks before the write's return is recorded:
// a caller would take ErrNotSent as leave to send it again.
func TestRequestReadByThePeerIsNotReportedUnsent(t *testing.T) {
	local, remote := net.Pipe()
	conn := &slowReturnConn{Conn: local, release: make(chan struct{})}
	defer close(conn.release)
	c := &Client{Conn: NewConn(conn, bufio.NewReader(conn)), pending: map[uint64]chan answer{}}
	go c.readLoop()
	done := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(context.Background(), AppendRequest(nil, "POST", "/claim", nil, []byte(`{}`)))
		done <- err
	}()
	// The server reads the whole frame, then the connection breaks.
	if _, _, _, err := ReadFrame(bufio.NewReader(remote), MaxFrame); err != nil {
		t.Fatal(err)
	}
	remote.Close()
	if err := <-done; !errors.Is(err, ErrLost) || errors.Is(err, ErrNotSent) {
		t.Fatalf("a request the server read: %v, want ErrLost", err)
	}
}
