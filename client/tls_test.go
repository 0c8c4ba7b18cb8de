package client

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// WithCACertFile trusts a cluster's own CA for https nodes; without it the
// system's roots refuse the node's certificate; a bad file fails New.
func TestWithCACertFile(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","node_id":"n1","leader_id":"n1"}`))
	}))
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := New([]string{ts.URL}, WithCACertFile(ca), WithRetry(RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(context.Background(), ts.URL); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	c, err = New([]string{ts.URL}, WithRetry(RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(context.Background(), ts.URL); err == nil {
		t.Fatal("without the CA the node's certificate was trusted")
	}
	if _, err := New([]string{ts.URL}, WithCACertFile(filepath.Join(t.TempDir(), "none.pem"))); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
