package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// binTransport is the raft transport of a node: hashicorp/raft's RPCs in
// a hand-coded binary encoding (bincodec.go) instead of NetworkTransport's
// reflective msgpack, with NetworkTransport's connection handling: a pool
// of up to maxPool idle connections per peer, one RPC at a time on a
// connection, pipelined AppendEntries on a connection of their own, I/O
// deadlines of timeout (scaled by size for InstallSnapshot, whose
// connection is never reused), and a connection that fails an RPC closed.
//
// Its listener serves both protocols on the one port (binserve.go): a
// connection whose first byte is binMagic speaks the binary protocol, any
// other goes to a NetworkTransport (legacy) that serves it exactly as
// before. It dials a peer with the binary protocol only when the peer's
// gossip says it serves it (nodeMeta.Transport, checked by peerBinary);
// every other peer, and every peer when msgpackOnly is set, is dialled by
// the NetworkTransport (docs/design.md, "The raft transport").
type binTransport struct {
	stream  raft.StreamLayer
	legacy  *raft.NetworkTransport
	legacyL *handoffListener
	logger  hclog.Logger
	maxPool int
	timeout time.Duration

	consumeCh   chan raft.RPC
	heartbeatMu sync.Mutex
	heartbeatFn func(raft.RPC)

	// peerBinary reports whether the peer id at addr serves the binary
	// protocol; nil (the default) means no peer is known to.
	peerBinary  atomic.Pointer[func(raft.ServerID, raft.ServerAddress) bool]
	msgpackOnly bool

	poolMu sync.Mutex
	pool   map[raft.ServerAddress][]*binConn

	connsMu sync.Mutex
	conns   map[net.Conn]struct{} // served binary connections, closed on Close

	shutdownCh   chan struct{}
	shutdownOnce sync.Once

	// Connections opened, by protocol (tests and the status page).
	dialedBinary, servedBinary, servedMsgpack atomic.Uint64
}

const (
	binConnSendBuffer = 256 << 10 // as NetworkTransport
	binConnRecvBuffer = 256 << 10
	binEncKeep        = 4 << 20 // an encode buffer larger than this is dropped after use
)

// What raft asks of a transport beyond raft.Transport.
var (
	_ raft.WithPreVote = (*binTransport)(nil)
	_ raft.WithClose   = (*binTransport)(nil)
)

var errBinUpgrade = errors.New("raft transport: the peer serves the binary protocol now; the msgpack pipeline is reopened on it")

// newBinTransport serves and dials over stream. msgpackOnly dials every
// peer with msgpack.
func newBinTransport(stream raft.StreamLayer, maxPool int, timeout time.Duration, msgpackOnly bool, logger hclog.Logger) *binTransport {
	t := &binTransport{
		stream: stream, logger: logger, maxPool: maxPool, timeout: timeout, msgpackOnly: msgpackOnly,
		consumeCh:  make(chan raft.RPC),
		pool:       map[raft.ServerAddress][]*binConn{},
		conns:      map[net.Conn]struct{}{},
		shutdownCh: make(chan struct{}),
	}
	t.legacyL = &handoffListener{stream: stream, ch: make(chan net.Conn), closed: make(chan struct{})}
	t.legacy = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: t.legacyL, MaxPool: maxPool, Timeout: timeout, Logger: logger,
	})
	go t.forwardLegacy()
	go t.listen()
	return t
}

// setPeerBinary installs the check of which peers serve the binary
// protocol.
func (t *binTransport) setPeerBinary(f func(raft.ServerID, raft.ServerAddress) bool) {
	t.peerBinary.Store(&f)
}

func (t *binTransport) binary(id raft.ServerID, target raft.ServerAddress) bool {
	if t.msgpackOnly {
		return false
	}
	f := t.peerBinary.Load()
	return f != nil && (*f)(id, target)
}

// forwardLegacy hands the RPCs the NetworkTransport decoded to raft.
func (t *binTransport) forwardLegacy() {
	in := t.legacy.Consumer()
	for {
		select {
		case rpc := <-in:
			select {
			case t.consumeCh <- rpc:
			case <-t.shutdownCh:
				return
			}
		case <-t.shutdownCh:
			return
		}
	}
}

func (t *binTransport) Consumer() <-chan raft.RPC { return t.consumeCh }
func (t *binTransport) LocalAddr() raft.ServerAddress {
	return raft.ServerAddress(t.stream.Addr().String())
}
func (t *binTransport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }
func (t *binTransport) EncodePeer(_ raft.ServerID, a raft.ServerAddress) []byte {
	return []byte(a)
}

func (t *binTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.heartbeatMu.Lock()
	t.heartbeatFn = cb
	t.heartbeatMu.Unlock()
	t.legacy.SetHeartbeatHandler(cb)
}

func (t *binTransport) isShutdown() bool {
	select {
	case <-t.shutdownCh:
		return true
	default:
		return false
	}
}

// Close stops serving and dialling; raft calls it at shutdown.
func (t *binTransport) Close() error {
	t.shutdownOnce.Do(func() {
		close(t.shutdownCh)
		t.legacy.Close()
		t.stream.Close()
		t.poolMu.Lock()
		for k, cs := range t.pool {
			for _, c := range cs {
				c.conn.Close()
			}
			delete(t.pool, k)
		}
		t.poolMu.Unlock()
		t.connsMu.Lock()
		for c := range t.conns {
			c.Close()
		}
		t.connsMu.Unlock()
	})
	return nil
}

// binConn is a dialled binary connection.
type binConn struct {
	target raft.ServerAddress
	conn   net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	enc    binEnc
}

func (t *binTransport) getConn(target raft.ServerAddress) (*binConn, error) {
	t.poolMu.Lock()
	if cs := t.pool[target]; len(cs) > 0 {
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.pool[target] = cs[:len(cs)-1]
		t.poolMu.Unlock()
		return c, nil
	}
	t.poolMu.Unlock()
	if t.isShutdown() {
		return nil, raft.ErrTransportShutdown
	}
	conn, err := t.stream.Dial(target, t.timeout)
	if err != nil {
		return nil, err
	}
	c := &binConn{target: target, conn: conn, r: bufio.NewReaderSize(conn, binConnRecvBuffer), w: bufio.NewWriterSize(conn, binConnSendBuffer)}
	// The preamble goes out with the first request.
	c.w.WriteByte(binMagic)
	c.w.WriteByte(binVersion)
	t.dialedBinary.Add(1)
	return c, nil
}

func (t *binTransport) returnConn(c *binConn) {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	if cs := t.pool[c.target]; !t.isShutdown() && len(cs) < t.maxPool {
		t.pool[c.target] = append(cs, c)
		return
	}
	c.conn.Close()
}

// send writes a request frame and flushes it; on error the connection is
// closed.
func (c *binConn) send(req interface{}) error {
	c.enc.b = c.enc.b[:0]
	typ, err := encodeRequest(&c.enc, req)
	if err == nil {
		err = writeFrame(c.w, int(typ), c.enc.b)
	}
	if cap(c.enc.b) > binEncKeep {
		c.enc.b = nil
	}
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.conn.Close()
	}
	return err
}

// recv reads an answer into resp. err is a failed connection (closed);
// rpcErr is the error raft's handler returned.
func (c *binConn) recv(resp interface{}) (rpcErr, err error) {
	payload, err := readFramePayload(c.r)
	if err == nil {
		rpcErr, err = decodeResponse(payload, resp)
	}
	if err != nil {
		c.conn.Close()
	}
	return rpcErr, err
}

func (t *binTransport) genericRPC(target raft.ServerAddress, req, resp interface{}) error {
	c, err := t.getConn(target)
	if err != nil {
		return err
	}
	if t.timeout > 0 {
		c.conn.SetDeadline(time.Now().Add(t.timeout))
	}
	if err := c.send(req); err != nil {
		return err
	}
	rpcErr, err := c.recv(resp)
	if err != nil {
		return err
	}
	t.returnConn(c)
	return rpcErr
}

func (t *binTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if !t.binary(id, target) {
		return t.legacy.AppendEntries(id, target, args, resp)
	}
	return t.genericRPC(target, args, resp)
}

func (t *binTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if !t.binary(id, target) {
		return t.legacy.RequestVote(id, target, args, resp)
	}
	return t.genericRPC(target, args, resp)
}

func (t *binTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if !t.binary(id, target) {
		return t.legacy.RequestPreVote(id, target, args, resp)
	}
	return t.genericRPC(target, args, resp)
}

func (t *binTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if !t.binary(id, target) {
		return t.legacy.TimeoutNow(id, target, args, resp)
	}
	return t.genericRPC(target, args, resp)
}

// InstallSnapshot sends the request, then the snapshot's Size bytes, on a
// connection of its own that is closed afterwards.
func (t *binTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if !t.binary(id, target) {
		return t.legacy.InstallSnapshot(id, target, args, resp, data)
	}
	c, err := t.getConn(target)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	if t.timeout > 0 {
		timeout := t.timeout * time.Duration(args.Size/int64(raft.DefaultTimeoutScale))
		c.conn.SetDeadline(time.Now().Add(max(timeout, t.timeout)))
	}
	if err := c.send(args); err != nil {
		return err
	}
	n, err := io.Copy(c.w, io.LimitReader(data, args.Size))
	if err == nil && n != args.Size {
		err = fmt.Errorf("raft binary transport: snapshot has %d bytes, its size says %d", n, args.Size)
	}
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		return err
	}
	rpcErr, err := c.recv(resp)
	if err != nil {
		return err
	}
	return rpcErr
}

// AppendEntriesPipeline opens a pipeline to a peer: on a binary
// connection of its own, or NetworkTransport's for a msgpack peer (which
// refuses further requests once the peer is known to serve the binary
// protocol, so that raft reopens it on that).
func (t *binTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if !t.binary(id, target) {
		p, err := t.legacy.AppendEntriesPipeline(id, target)
		if err != nil || t.msgpackOnly {
			return p, err
		}
		return &legacyPipeline{AppendPipeline: p, t: t, id: id, target: target}, nil
	}
	c, err := t.getConn(target)
	if err != nil {
		return nil, err
	}
	p := &binPipeline{t: t, c: c, inprogress: make(chan *binFuture), done: make(chan raft.AppendFuture), shutdownCh: make(chan struct{})}
	go p.decodeResponses()
	return p, nil
}

type legacyPipeline struct {
	raft.AppendPipeline
	t      *binTransport
	id     raft.ServerID
	target raft.ServerAddress
}

func (p *legacyPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if p.t.binary(p.id, p.target) {
		return nil, errBinUpgrade
	}
	return p.AppendPipeline.AppendEntries(args, resp)
}

// binPipeline is NetworkTransport's pipeline on a binary connection: a
// request is written, then handed to the goroutine reading the answers
// in order; with unbuffered channels (NetworkTransport's default of two
// RPCs in flight) a send waits until the previous request's answer is
// being read.
type binPipeline struct {
	t          *binTransport
	c          *binConn
	inprogress chan *binFuture
	done       chan raft.AppendFuture
	shutdownMu sync.Mutex
	shutdown   bool
	shutdownCh chan struct{}
}

type binFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	ready chan struct{}
}

func (f *binFuture) Error() error                          { <-f.ready; return f.err }
func (f *binFuture) Start() time.Time                      { return f.start }
func (f *binFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *binFuture) Response() *raft.AppendEntriesResponse { return f.resp }
func (p *binPipeline) Consumer() <-chan raft.AppendFuture  { return p.done }

func (p *binPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &binFuture{start: time.Now(), args: args, resp: resp, ready: make(chan struct{})}
	if p.t.timeout > 0 {
		p.c.conn.SetWriteDeadline(time.Now().Add(p.t.timeout))
	}
	if err := p.c.send(args); err != nil {
		return nil, err
	}
	select {
	case p.inprogress <- f:
		return f, nil
	case <-p.shutdownCh:
		return nil, raft.ErrPipelineShutdown
	}
}

func (p *binPipeline) decodeResponses() {
	for {
		select {
		case f := <-p.inprogress:
			if p.t.timeout > 0 {
				p.c.conn.SetReadDeadline(time.Now().Add(p.t.timeout))
			}
			rpcErr, err := p.c.recv(f.resp)
			if err == nil {
				err = rpcErr
			}
			f.err = err
			close(f.ready)
			select {
			case p.done <- f:
			case <-p.shutdownCh:
				return
			}
		case <-p.shutdownCh:
			return
		}
	}
}

func (p *binPipeline) Close() error {
	p.shutdownMu.Lock()
	defer p.shutdownMu.Unlock()
	if !p.shutdown {
		p.shutdown = true
		p.c.conn.Close()
		close(p.shutdownCh)
	}
	return nil
}
