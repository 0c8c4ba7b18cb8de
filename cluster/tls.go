package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// LoadTLS reads a cluster CA certificate (PEM) and this node's certificate
// and key, and returns the mutual-TLS configuration nodes use with each
// other: this node's certificate offered on both sides of a connection,
// peers' certificates required and verified against the CA (as servers
// and as clients), TLS 1.3 only. The raft transport uses it as it is; the
// HTTP API's listener clones it and relaxes ClientAuth (ordinary clients
// present no certificate).
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls CA: %s holds no PEM certificate", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s / key %s: %w", certFile, keyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s: %w", certFile, err)
	}
	// A certificate the CA did not sign would be refused by every peer:
	// say so at startup instead.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("tls certificate %s does not verify against the CA %s: %w", certFile, caFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// tlsStreamLayer is the raft.StreamLayer of a node with TLS: it accepts
// only connections whose client presents a certificate from the cluster CA
// and dials only peers whose server certificate does. A connection that
// fails the handshake is closed before raft reads a byte of it.
type tlsStreamLayer struct {
	ln        net.Listener // tls.Listen
	advertise net.Addr
	conf      *tls.Config
	logger    hclog.Logger
}

// newTLSStreamLayer listens on bind with conf (see LoadTLS). advertise is
// the address peers dial; nil means the listener's own.
func newTLSStreamLayer(bind string, advertise net.Addr, conf *tls.Config, logger hclog.Logger) (*tlsStreamLayer, error) {
	if conf == nil || conf.ClientAuth != tls.RequireAndVerifyClientCert || conf.ClientCAs == nil || conf.RootCAs == nil {
		return nil, errors.New("raft TLS: the configuration must require and verify peer certificates (cluster.LoadTLS)")
	}
	ln, err := tls.Listen("tcp", bind, conf)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft TLS: %v is not an address peers can reach", advertise)
	}
	return &tlsStreamLayer{ln: ln, advertise: advertise, conf: conf, logger: logger}, nil
}

// tlsHandshakeTimeout bounds an incoming connection's handshake.
const tlsHandshakeTimeout = 10 * time.Second

// Accept returns the next connection. Its handshake runs on the first read
// (in raft's goroutine for that connection, so a slow peer holds up no
// other); a refused one is logged and the connection fails.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c.(*tls.Conn), logger: s.logger}, nil
}

func (s *tlsStreamLayer) Close() error   { return s.ln.Close() }
func (s *tlsStreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and completes the handshake, verifying the
// peer's certificate against the CA and the address dialled.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.conf}
	c, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft TLS dial %s: %w", address, err)
	}
	return c, nil
}

// handshakeConn completes the server handshake before the first read and
// logs a refused peer. (Raft reads a request before it writes; a write
// before any read would handshake inside tls.Conn, unlogged.)
type handshakeConn struct {
	*tls.Conn
	logger hclog.Logger
	once   sync.Once
	err    error
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		defer cancel()
		if err := c.HandshakeContext(ctx); err != nil {
			c.err = fmt.Errorf("raft TLS handshake: %w", err)
			c.logger.Warn("refused a raft connection: TLS handshake failed", "remote", c.RemoteAddr().String(), "error", err)
			c.Conn.Close()
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}

// newTLSStreamLayerFor is the raft stream layer of a node with TLS.
func newTLSStreamLayerFor(bind string, conf *tls.Config, logger hclog.Logger) (*tlsStreamLayer, error) {
	var advertise net.Addr
	if _, port, err := net.SplitHostPort(bind); err == nil && port != "0" {
		a, err := net.ResolveTCPAddr("tcp", bind)
		if err != nil {
			return nil, fmt.Errorf("resolve RaftAddr: %w", err)
		}
		advertise = a
	}
	return newTLSStreamLayer(bind, advertise, conf, logger)
}

// peerProbeTimeout bounds checkPeerTLS's dial and handshake.
const peerProbeTimeout = 3 * time.Second

// checkPeerTLS, on a node with TLS, dials m's raft address and completes a
// handshake: the node's certificate must verify against the CA for that
// address (and it must accept this node's), so a node with another CA's
// certificate is never made a voter, even by an operator's join.
func (n *Node) checkPeerTLS(ctx context.Context, m Member) error {
	if n.cfg.TLS == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	c, err := (&tls.Dialer{NetDialer: &net.Dialer{}, Config: n.cfg.TLS}).DialContext(ctx, "tcp", m.RaftAddr)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrPeerTLS, m.RaftAddr, err)
	}
	// TLS 1.3: the server's verdict on this node's certificate comes
	// after the client's side is done; wait briefly for an alert.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	c.Close()
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s: %v", ErrPeerTLS, m.RaftAddr, err)
	}
	return nil
}
