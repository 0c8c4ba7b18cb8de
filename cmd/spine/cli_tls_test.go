package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

// spine tls ca create and cert create write a P-256 CA valid five years and
// a node certificate it signed, for server and client auth, with the SANs
// asked for; keys are 0600; nothing is overwritten; the pair works in a
// mutual TLS handshake.
func TestTLSCACertCreate(t *testing.T) {
	dir := t.TempDir()
	caDir := filepath.Join(dir, "ca")
	code, out, errOut := cliRunTokens(t, nil, "", "tls", "ca", "create", "--out", caDir)
	if code != exitOK {
		t.Fatalf("ca create: exit %d: %s%s", code, out, errOut)
	}
	ca := readCert(t, filepath.Join(caDir, "ca.pem"))
	checkMode(t, filepath.Join(caDir, "ca-key.pem"), 0o600)
	if !ca.IsCA || ca.CheckSignatureFrom(ca) != nil {
		t.Fatalf("ca.pem is not a self-signed CA")
	}
	if pub, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("CA key is %T, want ECDSA P-256", ca.PublicKey)
	}
	if life := ca.NotAfter.Sub(time.Now()); life < 5*365*24*time.Hour-2*time.Hour || life > 5*366*24*time.Hour {
		t.Errorf("CA valid for %v, want five years", life)
	}
	if code, _, errOut := cliRunTokens(t, nil, "", "tls", "ca", "create", "--out", caDir); code == exitOK || !strings.Contains(errOut, "exists") {
		t.Errorf("a second ca create into the same directory: exit %d, %q; want a refusal", code, errOut)
	}

	certDir := filepath.Join(dir, "nodes")
	code, out, errOut = cliRunTokens(t, nil, "", "tls", "cert", "create", "--ca", caDir, "--node-id", "n1",
		"--ip", "127.0.0.1", "--ip", "::1", "--dns", "n1.spine.test", "--out", certDir)
	if code != exitOK {
		t.Fatalf("cert create: exit %d: %s%s", code, out, errOut)
	}
	leaf := readCert(t, filepath.Join(certDir, "n1.pem"))
	checkMode(t, filepath.Join(certDir, "n1-key.pem"), 0o600)
	if leaf.Subject.CommonName != "n1" || len(leaf.IPAddresses) != 2 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) ||
		len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "n1.spine.test" {
		t.Errorf("SANs: cn %q ips %v dns %v", leaf.Subject.CommonName, leaf.IPAddresses, leaf.DNSNames)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u}, DNSName: "n1.spine.test"}); err != nil {
			t.Errorf("node certificate does not verify for usage %v: %v", u, err)
		}
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(certDir, "n1.pem"), filepath.Join(certDir, "n1-key.pem")); err != nil {
		t.Errorf("certificate and key do not pair: %v", err)
	}

	// Refusals: an existing certificate, no SAN, a bad IP, a missing CA.
	for _, args := range [][]string{
		{"--ca", caDir, "--node-id", "n1", "--ip", "127.0.0.1", "--out", certDir},
		{"--ca", caDir, "--node-id", "n2", "--out", certDir},
		{"--ca", caDir, "--node-id", "n2", "--ip", "not-an-ip", "--out", certDir},
		{"--ca", filepath.Join(dir, "none"), "--node-id", "n2", "--ip", "127.0.0.1", "--out", certDir},
		{"--ca", caDir, "--node-id", "../n2", "--ip", "127.0.0.1", "--out", certDir},
	} {
		if code, _, _ := cliRunTokens(t, nil, "", append([]string{"tls", "cert", "create"}, args...)...); code == exitOK {
			t.Errorf("cert create %v succeeded", args)
		}
	}
	if _, err := os.Stat(filepath.Join(certDir, "n2.pem")); err == nil {
		t.Error("a refused cert create wrote n2.pem")
	}
}

// The --tls-* flags (or SPINE_TLS_*) go together; with them the advertised
// URL and join URLs default to https, and http ones are refused.
func TestServeTLSFlags(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	base := []string{"--node-id", "n1", "--http-addr", "127.0.0.1:1"}
	tlsArgs := []string{"--tls-ca", "ca.pem", "--tls-cert", "n1.pem", "--tls-key", "n1-key.pem"}
	c, err := parseServe(base)
	if err != nil || c.AdvertiseHTTP != "http://127.0.0.1:1" || c.TLSCA != "" {
		t.Fatalf("no TLS: %+v, %v", c, err)
	}
	c, err = parseServe(append(append(base, tlsArgs...), "--join", "127.0.0.1:2,https://127.0.0.1:3"))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdvertiseHTTP != "https://127.0.0.1:1" || c.Join[0] != "https://127.0.0.1:2" || c.Join[1] != "https://127.0.0.1:3" ||
		c.TLSCA != "ca.pem" || c.TLSCert != "n1.pem" || c.TLSKey != "n1-key.pem" {
		t.Fatalf("with TLS: %+v", c)
	}
	for _, args := range [][]string{
		append(base, "--tls-ca", "ca.pem"),
		append(base, "--tls-cert", "n1.pem", "--tls-key", "n1-key.pem"),
		append(append(base, tlsArgs...), "--join", "http://127.0.0.1:2"),
		append(append(base, tlsArgs...), "--advertise-http", "http://127.0.0.1:1"),
	} {
		if _, err := parseServe(args); err == nil {
			t.Errorf("parseServe(%v) accepted", args)
		} else if !strings.Contains(err.Error(), "tls") {
			t.Errorf("parseServe(%v): %v does not name the TLS flags", args, err)
		}
	}
	t.Setenv("SPINE_TLS_CA", "env-ca.pem")
	if _, err := parseServe(base); err == nil || !strings.Contains(err.Error(), "all three or none") {
		t.Errorf("SPINE_TLS_CA alone: %v", err)
	}
	t.Setenv("SPINE_TLS_CERT", "env.pem")
	t.Setenv("SPINE_TLS_KEY", "env-key.pem")
	if c, err := parseServe(base); err != nil || c.TLSCA != "env-ca.pem" || c.AdvertiseHTTP != "https://127.0.0.1:1" {
		t.Errorf("SPINE_TLS_*: %+v, %v", c, err)
	}
}
