package httpapi

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/internal/devca"
)

// nodeTLS makes (or reuses) a CA in dir/name and a 127.0.0.1 certificate
// for node, and returns LoadTLS's configuration.
func nodeTLS(t *testing.T, dir, name, node string) *tls.Config {
	t.Helper()
	caDir := filepath.Join(dir, name)
	if _, _, err := devca.CreateCA(caDir, name); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	cert, key, err := devca.CreateCert(devca.CertRequest{CADir: caDir, NodeID: node, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, OutDir: caDir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.LoadTLS(filepath.Join(caDir, devca.CAFile), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func withNodeTLS(c *tls.Config) option { return func(e *envConfig) { e.NodeTLS = c } }

// tlsLeader serves leader's handler over HTTPS as spine serve does: the
// node certificate, client certificates verified if given.
func tlsLeader(t *testing.T, leader *env, conf *tls.Config) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(leader.h)
	ts.TLS = conf.Clone()
	ts.TLS.ClientAuth = tls.VerifyClientCertIfGiven
	ts.TLS.NextProtos = []string{"http/1.1"}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// With NodeTLS a follower relays to an https leader over mutual TLS; a
// follower whose certificate is another CA's gets nothing through.
func TestRelayOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	leaderConf := nodeTLS(t, dir, "ca", "n1")
	leader := newEnv(t, withNodeTLS(leaderConf))
	ts := tlsLeader(t, leader, leaderConf)

	follower := newEnv(t, withNodeTLS(nodeTLS(t, dir, "ca", "n2")))
	follower.fc.id = "n2"
	follower.fc.setFollower("n1", ts.URL)
	if r := follower.do("POST", "/jobs", headTok, `{"payload":{"i":1}}`); r.Code != http.StatusCreated {
		t.Fatalf("create through a TLS follower: %d %s", r.Code, r.Body)
	}
	if relays, _, _ := follower.srv.relay.Stats(); relays != 1 {
		t.Fatalf("follower holds %d relay connections, want 1", relays)
	}
	// A blob goes as its own HTTPS exchange, with the node's certificate.
	ctype, body := multipartBody(t, "file", "text/plain", []byte("blob"))
	if r := follower.do("POST", "/blobs", headTok, body, "Content-Type", ctype); r.Code/100 != 2 {
		t.Fatalf("blob through a TLS follower: %d %s", r.Code, r.Body)
	}

	stranger := newEnv(t, withNodeTLS(nodeTLS(t, dir, "other", "n9")))
	stranger.fc.id = "n9"
	stranger.fc.setFollower("n1", ts.URL)
	if r := stranger.do("POST", "/jobs", headTok, `{"payload":{"i":2}}`); r.Code == http.StatusCreated {
		t.Fatalf("a follower of another CA got a create through: %s", r.Body)
	}
	if relays, _, _ := stranger.srv.relay.Stats(); relays != 0 {
		t.Fatalf("a follower of another CA holds %d relay connections", relays)
	}
	counts, err := leader.fc.fsm.Read().Counts()
	if err != nil {
		t.Fatal(err)
	}
	if counts["queued"] != 1 {
		t.Fatalf("leader holds %d queued jobs, want 1", counts["queued"])
	}

	// Without a client certificate: ordinary requests are served, the
	// node-only ones refused.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: leaderConf.RootCAs}}}
	do := func(method, path string, hdr ...string) int {
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+headTok)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do("GET", "/jobs"); code != http.StatusOK {
		t.Errorf("a client without a certificate: GET /jobs %d", code)
	}
	if code := do("GET", "/jobs", api.HeaderForwardedBy, "n2"); code != http.StatusForbidden {
		t.Errorf("a request marked forwarded without a node certificate: %d, want 403", code)
	}
	if code := do("GET", wire.RelayPath, "Connection", "Upgrade", "Upgrade", wire.RelayProtocol); code != http.StatusForbidden {
		t.Errorf("a relay upgrade without a node certificate: %d, want 403", code)
	}
}
