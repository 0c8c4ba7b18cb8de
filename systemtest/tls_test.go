package systemtest

// Mutual TLS between nodes (spine serve --tls-*): a cluster forms and works
// over it, a node with another CA's certificate is not admitted and gets no
// raft RPC through, plain TCP gets nothing.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/devca"
	"github.com/spine-queue/spine/internal/testcluster"
)

// tlsFiles makes a CA in dir and a 127.0.0.1 certificate for each id.
func tlsFiles(t *testing.T, dir string, ids ...string) (caFile string) {
	t.Helper()
	caFile, _, err := devca.CreateCA(dir, filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, _, err := devca.CreateCert(devca.CertRequest{CADir: dir, NodeID: id, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, OutDir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	return caFile
}

func tlsArgs(dir, caFile, id string) []string {
	return []string{"--tls-ca", caFile, "--tls-cert", filepath.Join(dir, id+".pem"), "--tls-key", filepath.Join(dir, id+"-key.pem")}
}

// tlsRoots trusts caFile; with id, it also presents that certificate.
func tlsConfig(t *testing.T, caFile, dir, id string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if id != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

func tlsDo(hc *http.Client, method, u, token string, body []byte, hdr ...string) (*apiResp, error) {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &apiResp{Method: method, URL: u, Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// tlsRefused reports whether a connection made with conf to addr is refused:
// the handshake fails, or the server ends the connection before answering
// anything (TLS 1.3 clients may finish before the server's verdict).
func tlsRefused(addr string, conf *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return nil
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte{0, 0, 0, 0}); err != nil {
		return nil
	}
	b := make([]byte, 1)
	if _, err := conn.Read(b); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return fmt.Errorf("the handshake with %s was accepted (the connection stayed open)", addr)
		}
		return nil
	}
	return fmt.Errorf("%s answered a connection it should have refused", addr)
}

func TestTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	dir := t.TempDir()
	certs, otherCerts := filepath.Join(dir, "certs"), filepath.Join(dir, "other")
	caFile := tlsFiles(t, certs, "n1", "n2", "n3")
	otherCA := tlsFiles(t, otherCerts, "n4")
	roots := tlsConfig(t, caFile, "", "")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: roots},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: filepath.Join(dir, "cluster"), Nodes: 3, Logf: t.Logf,
		TLS: roots, NodeArgs: func(id string) []string { return tlsArgs(certs, caFile, id) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCluster(t, c) })

	// Every node serves HTTPS only and advertises https URLs; the CLI
	// reads the status with --ca-cert, and not without it.
	leader, followers := apiRoles(t, c)
	code, out, errOut := coreCLI(t, "cluster", "status", "--addr", followers[0].URL, "--token", apiHead, "--ca-cert", caFile)
	if code != 0 {
		t.Fatalf("cluster status over https: exit %d: %s", code, errOut)
	}
	var st coreStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.voters()) != 3 || !strings.HasPrefix(st.Leader.HTTPAddr, "https://") {
		t.Fatalf("status over https: %s", out)
	}
	for _, n := range st.Nodes {
		if !strings.HasPrefix(n.HTTPAddr, "https://") {
			t.Errorf("%s advertises %s", n.ID, n.HTTPAddr)
		}
	}
	if code, _, errOut := coreCLI(t, "cluster", "status", "--addr", followers[0].URL, "--token", apiHead, "--retry-for", "0"); code == 0 ||
		!strings.Contains(errOut, "certificate") {
		t.Errorf("cluster status without --ca-cert: exit %d, %s; want a certificate error", code, errOut)
	}
	// The Go client with the CA: its requests ride one multiplexed
	// connection (spine-mux/1 over TLS).
	gc, err := client.New([]string{followers[0].URL}, client.WithCACertFile(caFile), client.WithToken(apiHead))
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := gc.ClusterStatus(context.Background()); err != nil || len(cs.Nodes) != 3 {
		t.Fatalf("Go client over https: %+v, %v", cs, err)
	}
	if r, err := tlsDo(hc, "GET", followers[0].URL+"/health", "", nil); err != nil || !strings.Contains(string(r.Body), `"mux_connections":1`) {
		t.Errorf("the Go client's mux over TLS: %v %v", r, err)
	}
	if r, err := apiRequest("GET", "http://"+leader.HTTPAddr+"/health", "", nil); err == nil && r.Status == 200 {
		t.Errorf("plain HTTP to a TLS node answered: %s", r)
	}

	// Writes through a follower: over the relay (jobs) and as HTTP
	// exchanges (blobs), both on mutual TLS.
	var (
		mu    sync.Mutex
		acked []string
	)
	create := func(n *testcluster.Node, i int) error {
		r, err := tlsDo(hc, "POST", n.URL+"/jobs", apiHead, []byte(fmt.Sprintf(`{"stream":"tls","payload":{"i":%d}}`, i)))
		if err != nil {
			return err
		}
		if r.Status != http.StatusCreated {
			return fmt.Errorf("%s", r)
		}
		var j apiJob
		if err := json.Unmarshal(r.Body, &j); err != nil || j.ID == "" {
			return fmt.Errorf("%s", r)
		}
		mu.Lock()
		acked = append(acked, j.ID)
		mu.Unlock()
		return nil
	}
	for i := 0; i < 20; i++ {
		if err := create(followers[i%2], i); err != nil {
			t.Fatalf("create through follower: %v", err)
		}
	}
	blob, ctype := apiMultipart(t, "file", "b.txt", "text/plain", []byte("blob over a forwarded exchange"))
	r, err := tlsDo(hc, "POST", followers[0].URL+"/blobs", apiHead, blob, "Content-Type", ctype)
	if err != nil || r.Status/100 != 2 || r.Header.Get(api.HeaderNode) != followers[0].ID {
		t.Fatalf("blob through follower: %v %v", r, err)
	}

	// Node-only paths need a node's certificate: the relay upgrade and a
	// request marked forwarded, from a caller without one, are refused.
	r, err = tlsDo(hc, "GET", leader.URL+wire.RelayPath, apiHead, nil, "Connection", "Upgrade", "Upgrade", wire.RelayProtocol)
	if err != nil || r.Status != http.StatusForbidden {
		t.Errorf("relay upgrade without a client certificate: %v %v", r, err)
	}
	r, err = tlsDo(hc, "POST", leader.URL+"/jobs", apiHead, []byte(`{"stream":"tls"}`), api.HeaderForwardedBy, "n2")
	if err != nil || r.Status != http.StatusForbidden {
		t.Errorf("forwarded-marked request without a client certificate: %v %v", r, err)
	}
	nodeClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(t, caFile, certs, "n2")}}
	if r, err := tlsDo(nodeClient, "GET", leader.URL+"/jobs?stream=tls&limit=1", apiHead, nil, api.HeaderForwardedBy, "n2"); err != nil || r.Status != 200 {
		t.Errorf("forwarded-marked read with a node certificate: %v %v", r, err)
	}

	// A node with another CA's certificate asks to join: it is not added.
	httpAddr, raftAddr, gossipAddr := apiFreeAddr(t), apiFreeAddr(t), apiFreeAddr(t)
	logPath := filepath.Join(dir, "n4.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	n4 := exec.Command(binary, append([]string{"serve", "--node-id", "n4", "--data-dir", filepath.Join(dir, "n4"), "--http-addr", httpAddr,
		"--raft-addr", raftAddr, "--gossip-addr", gossipAddr, "--join", leader.URL}, tlsArgs(otherCerts, otherCA, "n4")...)...)
	n4.Env = append(os.Environ(), "HEAD_TOKEN="+apiHead, "LEFT_CLAW_TOKEN="+apiLeft, "RIGHT_CLAW_TOKEN="+apiRight, "SPINE_LOG_LEVEL=debug")
	n4.Stdout, n4.Stderr = logf, logf
	n4.SysProcAttr = testcluster.NodeProcAttr()
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	n4done := make(chan struct{})
	go func() { _ = n4.Wait(); logf.Close(); close(n4done) }()
	t.Cleanup(func() {
		_ = n4.Process.Signal(syscall.SIGKILL) // by pid
		<-n4done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("==== n4 ====\n%s", b)
		}
	})
	apiEventually(t, 20*time.Second, "n4 tries to join and is refused", func() error {
		b, _ := os.ReadFile(logPath)
		if n := strings.Count(string(b), "join attempt failed"); n < 2 {
			return fmt.Errorf("%d join attempts in n4's log", n)
		}
		return nil
	})
	// An operator's join of that node is refused too: the leader's
	// handshake with its raft address fails.
	code, _, errOut = coreCLI(t, "cluster", "join", "--addr", leader.URL, "--token", apiHead, "--ca-cert", caFile, "--retry-for", "0",
		"--node-id", "n4", "--raft-addr", raftAddr, "--http-addr", "https://"+httpAddr, "--gossip-addr", gossipAddr)
	if code == 0 || !strings.Contains(errOut, "certificate of the cluster CA") {
		t.Errorf("spine cluster join of n4: exit %d, %s; want a refusal naming the CA", code, errOut)
	}
	if st := coreCLIStatusTLS(t, leader.URL, caFile); len(st.Nodes) != 3 {
		t.Fatalf("the cluster has %d members after n4 tried to join: %+v", len(st.Nodes), st.Nodes)
	}
	for _, n := range c.Nodes {
		b, _ := os.ReadFile(n.LogPath)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "adding voter") && strings.Contains(line, "id=n4") {
				t.Errorf("%s: %s", n.ID, line)
			}
		}
	}

	// The raft ports refuse n4's certificate, with or without trusting
	// the cluster CA, and a client with no certificate; the leader logs it.
	n4conf := tlsConfig(t, otherCA, otherCerts, "n4")
	mixed := n4conf.Clone()
	mixed.RootCAs = roots.RootCAs
	for _, n := range c.Nodes {
		for what, conf := range map[string]*tls.Config{"n4's own CA": n4conf, "n4 trusting the cluster CA": mixed, "no certificate": roots} {
			if err := tlsRefused(n.RaftAddr, conf); err != nil {
				t.Errorf("%s raft port, %s: %v", n.ID, what, err)
			}
		}
	}
	apiEventually(t, 10*time.Second, "the leader logs the refused raft connections", func() error {
		b, _ := os.ReadFile(leader.LogPath)
		if !strings.Contains(string(b), "refused a raft connection") {
			return fmt.Errorf("not in %s's log", leader.ID)
		}
		return nil
	})
	// Plain TCP to a raft port: raft's bytes get no answer (at most a TLS
	// alert record, type 21).
	raw, err := net.DialTimeout("tcp", leader.RaftAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = raw.Write([]byte{0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 1})
	_ = raw.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, _ := io.ReadAll(raw)
	raw.Close()
	if len(got) > 0 && got[0] != 21 {
		t.Errorf("plain TCP to the raft port got % x", got)
	}

	// SIGKILL the leader under load: every acknowledged job survives.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = create(c.Nodes[(g+i)%3], 1000*g+i) // errors while the leader is gone are fine: only acks count
			}
		}(g)
	}
	time.Sleep(500 * time.Millisecond)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	newLeader, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	for i := 0; i < 5; i++ {
		var surv *testcluster.Node
		for _, n := range c.Nodes {
			if n != newLeader && n.Running() {
				surv = n
			}
		}
		if err := create(surv, 5000+i); err != nil {
			t.Fatalf("create through the surviving follower after failover: %v", err)
		}
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	mu.Lock()
	want := append([]string(nil), acked...)
	mu.Unlock()
	for _, n := range c.Nodes {
		got := map[string]bool{}
		next := ""
		for {
			u := n.URL + "/jobs?stream=tls&limit=1000"
			if next != "" {
				u += "&cursor=" + url.QueryEscape(next)
			}
			r, err := tlsDo(hc, "GET", u, apiHead, nil)
			if err != nil || r.Status != 200 {
				t.Fatalf("list on %s: %v %v", n.ID, r, err)
			}
			var l apiList
			if err := json.Unmarshal(r.Body, &l); err != nil {
				t.Fatal(err)
			}
			for _, j := range l.Jobs {
				got[j.ID] = true
			}
			if l.NextCursor == nil || *l.NextCursor == "" {
				break
			}
			next = *l.NextCursor
		}
		missing := 0
		for _, id := range want {
			if !got[id] {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s is missing %d of %d acknowledged jobs", n.ID, missing, len(want))
		}
	}
	t.Logf("%d acknowledged jobs, all on every node after the leader's SIGKILL and restart", len(want))
}

// coreCLIStatusTLS is coreCLIStatus against an https node.
func coreCLIStatusTLS(t *testing.T, addr, caFile string) coreStatus {
	t.Helper()
	code, out, errOut := coreCLI(t, "cluster", "status", "--addr", addr, "--token", apiHead, "--ca-cert", caFile)
	if code != 0 {
		t.Fatalf("cluster status: exit %d: %s", code, errOut)
	}
	var st coreStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster status output is not JSON: %v\n%s", err, out)
	}
	return st
}
