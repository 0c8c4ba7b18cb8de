package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/internal/devca"
)

// testTLS makes a CA in dir/name and a certificate for 127.0.0.1 signed by
// it, and returns the node configuration LoadTLS builds from them.
func testTLS(t *testing.T, dir, name, node string) *tls.Config {
	t.Helper()
	caDir := filepath.Join(dir, name)
	if _, _, err := devca.CreateCA(caDir, name); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	cert, key, err := devca.CreateCert(devca.CertRequest{CADir: caDir, NodeID: node, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, OutDir: caDir})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := LoadTLS(filepath.Join(caDir, devca.CAFile), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// The stream layer completes a mutual handshake between two nodes of one
// CA, and refuses a dialer with another CA's certificate, one with no
// certificate, and a plain TCP client (which reads nothing).
func TestTLSStreamLayer(t *testing.T) {
	dir := t.TempDir()
	good := testTLS(t, dir, "ca", "n1")
	peer := testTLS(t, dir, "ca", "n2")
	other := testTLS(t, dir, "other", "n9")

	sl, err := newTLSStreamLayer("127.0.0.1:0", nil, good, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	addr := sl.Addr().String()
	type accepted struct {
		got string
		err error
	}
	acc := make(chan accepted, 8)
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 5)
				_, err := io.ReadFull(c, b)
				if err == nil {
					_, err = c.Write([]byte("pong!"))
				}
				acc <- accepted{string(b), err}
			}()
		}
	}()

	// Same CA: both sides verify, bytes flow.
	peerLayer := &tlsStreamLayer{conf: peer}
	c, err := peerLayer.Dial(raft.ServerAddress(addr), 2*time.Second)
	if err != nil {
		t.Fatalf("dial with a certificate of the cluster CA: %v", err)
	}
	if _, err := c.Write([]byte("ping!")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "pong!" {
		t.Fatalf("answer %q, %v", b, err)
	}
	c.Close()
	if a := <-acc; a.err != nil || a.got != "ping!" {
		t.Fatalf("server read %q, %v", a.got, a.err)
	}

	// Another CA: the client refuses the server's certificate, and the
	// server refuses the client's; the server reads nothing.
	otherLayer := &tlsStreamLayer{conf: other}
	if c, err := otherLayer.Dial(raft.ServerAddress(addr), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("a node of another CA completed a handshake")
	}
	if a := <-acc; a.err == nil {
		t.Fatalf("server accepted a peer of another CA: read %q", a.got)
	}
	// A client of another CA that trusts the cluster's CA (so only the
	// server's check of the client is left) is refused too.
	mixed := other.Clone()
	mixed.RootCAs = good.RootCAs
	conn, err := tls.Dial("tcp", addr, mixed)
	if err == nil {
		// TLS 1.3: the client may finish before the server's verdict
		// arrives; the server's alert ends the connection at once.
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Write([]byte("ping!"))
		if err == nil {
			_, err = io.ReadFull(conn, b)
		}
		conn.Close()
	}
	if err == nil {
		t.Fatal("a client certificate of another CA was answered")
	}
	if a := <-acc; a.err == nil {
		t.Fatalf("server accepted a client certificate of another CA: read %q", a.got)
	}
	// No client certificate.
	noCert := &tls.Config{RootCAs: good.RootCAs, MinVersion: tls.VersionTLS13}
	if conn, err := tls.Dial("tcp", addr, noCert); err == nil {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Write([]byte("ping!"))
		if err == nil {
			_, err = io.ReadFull(conn, b)
		}
		conn.Close()
		if err == nil {
			t.Fatal("a client with no certificate was answered")
		}
	}
	if a := <-acc; a.err == nil {
		t.Fatalf("server accepted a client with no certificate: read %q", a.got)
	}
	// Plain TCP: raft's bytes go nowhere, nothing comes back but the
	// server's alert and close.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = raw.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8})
	_ = raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, _ := io.ReadAll(raw)
	raw.Close()
	if strings.Contains(string(got), "pong") {
		t.Fatalf("plain TCP got an answer: %q", got)
	}
	if a := <-acc; a.err == nil {
		t.Fatalf("server read plain TCP as %q", a.got)
	}
}

// LoadTLS refuses a certificate another CA signed.
func TestLoadTLSRefusesAnotherCA(t *testing.T) {
	dir := t.TempDir()
	testTLS(t, dir, "ca", "n1")
	testTLS(t, dir, "other", "n2")
	_, err := LoadTLS(filepath.Join(dir, "ca", devca.CAFile), filepath.Join(dir, "other", "n2.pem"), filepath.Join(dir, "other", "n2-key.pem"))
	if err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("err = %v", err)
	}
}

// Two raft transports over TLS carry an AppendEntries; one of another CA
// gets none through.
func TestTLSTransportReplicates(t *testing.T) {
	for _, binary := range []bool{true, false} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) { testTLSTransportReplicates(t, binary) })
	}
}

// newTLSBinTransport is a node's transport with TLS; binary: it dials every
// peer with the binary protocol, else with msgpack.
func newTLSBinTransport(t *testing.T, conf *tls.Config, binary bool) *binTransport {
	t.Helper()
	sl, err := newTLSStreamLayerFor("127.0.0.1:0", conf, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	tr := newBinTransport(sl, raftMaxPool, raftTimeout, !binary, hclog.NewNullLogger())
	tr.setPeerBinary(func(raft.ServerID, raft.ServerAddress) bool { return true })
	t.Cleanup(func() { tr.Close() })
	return tr
}

func testTLSTransportReplicates(t *testing.T, binary bool) {
	dir := t.TempDir()
	confs := []*tls.Config{testTLS(t, dir, "ca", "n1"), testTLS(t, dir, "ca", "n2")}
	var trans []*binTransport
	for _, c := range confs {
		trans = append(trans, newTLSBinTransport(t, c, binary))
	}
	// One AppendEntries from n1 to n2 through the real transports.
	go func() {
		for rpc := range trans[1].Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()
	var resp raft.AppendEntriesResponse
	if err := trans[0].AppendEntries("n2", trans[1].LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte(trans[0].LocalAddr())}, Term: 1}, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatal("no success")
	}
	if got := trans[1].servedBinary.Load() > 0; got != binary {
		t.Fatalf("binary connection served: %v, want %v", got, binary)
	}
	// A transport of another CA gets no RPC through.
	bad := newTLSBinTransport(t, testTLS(t, dir, "other", "n3"), binary)
	if err := bad.AppendEntries("n2", trans[1].LocalAddr(), &raft.AppendEntriesRequest{Term: 9}, &resp); err == nil {
		t.Fatal("a transport of another CA delivered an AppendEntries")
	}
}

// A leader with TLS makes a node a voter only if its raft address
// completes a mutual handshake with a certificate of the cluster CA.
func TestCheckPeerTLS(t *testing.T) {
	dir := t.TempDir()
	leader := &Node{cfg: Config{TLS: testTLS(t, dir, "ca", "n1")}}
	for _, tc := range []struct {
		name string
		conf *tls.Config
		ok   bool
	}{
		{"same CA", testTLS(t, dir, "ca", "n2"), true},
		{"another CA", testTLS(t, dir, "other", "n9"), false},
	} {
		sl, err := newTLSStreamLayer("127.0.0.1:0", nil, tc.conf, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := sl.Accept()
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
			}
		}()
		err = leader.checkPeerTLS(context.Background(), Member{ID: "x", RaftAddr: sl.Addr().String()})
		sl.Close()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrPeerTLS)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A plain TCP listener is no node of this cluster either.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("not tls at all\n"))
			c.Close()
		}
	}()
	if err := leader.checkPeerTLS(context.Background(), Member{ID: "x", RaftAddr: ln.Addr().String()}); !errors.Is(err, ErrPeerTLS) {
		t.Errorf("plain TCP: %v", err)
	}
	// Without TLS there is nothing to check.
	if err := (&Node{}).checkPeerTLS(context.Background(), Member{RaftAddr: "127.0.0.1:1"}); err != nil {
		t.Error(err)
	}
}
