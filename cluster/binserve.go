package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// listen accepts connections on the stream layer; each is sniffed and
// served on a goroutine of its own (a slow peer holds up no other).
func (t *binTransport) listen() {
	const baseDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := t.stream.Accept()
		if err != nil {
			if t.isShutdown() {
				return
			}
			delay = min(max(2*delay, baseDelay), maxDelay)
			t.logger.Error("failed to accept connection", "error", err)
			select {
			case <-t.shutdownCh:
				return
			case <-time.After(delay):
				continue
			}
		}
		delay = 0
		go t.serve(conn)
	}
}

// serve reads a connection's first byte: binMagic opens the binary
// protocol; anything else is NetworkTransport's, which gets the connection
// with that byte put back.
func (t *binTransport) serve(conn net.Conn) {
	// Tracked from the start, so that Close ends a connection that has
	// sent nothing yet.
	t.connsMu.Lock()
	if t.isShutdown() {
		t.connsMu.Unlock()
		conn.Close()
		return
	}
	t.conns[conn] = struct{}{}
	t.connsMu.Unlock()
	untrack := func() {
		t.connsMu.Lock()
		delete(t.conns, conn)
		t.connsMu.Unlock()
	}
	var first [1]byte
	if _, err := io.ReadFull(conn, first[:]); err != nil {
		untrack()
		conn.Close()
		return
	}
	if first[0] != binMagic {
		untrack() // the NetworkTransport's from here
		t.servedMsgpack.Add(1)
		t.legacyL.handoff(&prefixConn{Conn: conn, first: first[0]})
		return
	}
	defer func() {
		untrack()
		conn.Close()
	}()
	t.servedBinary.Add(1)

	r := bufio.NewReaderSize(conn, binConnRecvBuffer)
	w := bufio.NewWriter(conn)
	if v, err := r.ReadByte(); err != nil || v != binVersion {
		if err == nil {
			t.logger.Warn("refused a raft connection: unknown binary protocol version", "remote", conn.RemoteAddr().String(), "version", v)
		}
		return
	}
	var enc binEnc
	for {
		last, err := t.handleCommand(r, &enc)
		if err == nil {
			err = writeFrame(w, -1, enc.b)
		}
		if cap(enc.b) > binEncKeep {
			enc.b = nil
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !t.isShutdown() {
				t.logger.Error("failed to serve a binary raft connection", "remote", conn.RemoteAddr().String(), "error", err)
			}
			return
		}
		if last {
			return
		}
	}
}

// handleCommand reads one request, hands it to raft and encodes raft's
// answer into enc. last reports an InstallSnapshot, after which the
// connection is done.
func (t *binTransport) handleCommand(r *bufio.Reader, enc *binEnc) (last bool, err error) {
	typ, err := r.ReadByte()
	if err != nil {
		return false, err
	}
	payload, err := readFramePayload(r)
	if err != nil {
		return false, err
	}
	cmd, err := decodeRequest(typ, payload)
	if err != nil {
		return false, err
	}
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, RespChan: respCh}
	if s, ok := cmd.(*raft.InstallSnapshotRequest); ok {
		rpc.Reader = io.LimitReader(r, s.Size)
		last = true
	}
	// NetworkTransport's heartbeat fast path (which guardTransport
	// refuses, see transport.go).
	dispatched := false
	if a, ok := cmd.(*raft.AppendEntriesRequest); ok && isRaftHeartbeat(a) {
		t.heartbeatMu.Lock()
		fn := t.heartbeatFn
		t.heartbeatMu.Unlock()
		if fn != nil {
			fn(rpc)
			dispatched = true
		}
	}
	if !dispatched {
		select {
		case t.consumeCh <- rpc:
		case <-t.shutdownCh:
			return false, raft.ErrTransportShutdown
		}
	}
	select {
	case resp := <-respCh:
		enc.b = enc.b[:0]
		return last, encodeResponse(enc, typ, resp.Error, resp.Response)
	case <-t.shutdownCh:
		return false, raft.ErrTransportShutdown
	}
}

// isRaftHeartbeat is NetworkTransport's test for a heartbeat.
func isRaftHeartbeat(a *raft.AppendEntriesRequest) bool {
	leader := a.RPCHeader.Addr
	if len(leader) == 0 {
		leader = a.Leader
	}
	return a.Term != 0 && leader != nil && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

// handoffListener is the stream layer of the NetworkTransport inside a
// binTransport: it accepts the msgpack connections binTransport.serve
// hands it, and dials through the real stream layer.
type handoffListener struct {
	stream raft.StreamLayer
	ch     chan net.Conn
	closed chan struct{}
}

func (l *handoffListener) handoff(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close is called once, by the NetworkTransport's Close.
func (l *handoffListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.stream.Addr() }

func (l *handoffListener) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return l.stream.Dial(address, timeout)
}

// prefixConn is a connection whose first byte was already read.
type prefixConn struct {
	net.Conn
	first byte
	used  bool
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if !c.used && len(b) > 0 {
		c.used = true
		b[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(b)
}

// tcpStreamLayer is raft's TCPStreamLayer (whose constructor is not
// exported on its own).
type tcpStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
}

func newTCPStreamLayer(bind string, advertise net.Addr) (*tcpStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft: %v is not an address peers can reach", advertise)
	}
	return &tcpStreamLayer{ln: ln, advertise: advertise}, nil
}

func (s *tcpStreamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tcpStreamLayer) Close() error              { return s.ln.Close() }
func (s *tcpStreamLayer) Addr() net.Addr            { return s.advertise }
func (s *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return (&net.Dialer{Timeout: timeout}).Dial("tcp", string(address))
}
