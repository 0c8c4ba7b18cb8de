// Package devca makes a development certificate authority and node
// certificates for a Spine cluster's mutual TLS (spine tls), with the
// standard library only: ECDSA P-256 keys, PEM files, private keys 0600.
package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names in a CA directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// Validity periods.
const (
	CAValidity   = 5 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
)

// CreateCA writes a new self-signed CA (ca.pem, ca-key.pem) into dir,
// creating dir if needed. It refuses to overwrite an existing CA. It
// returns the paths of the certificate and the key.
func CreateCA(dir, commonName string) (certPath, keyPath string, err error) {
	if commonName == "" {
		commonName = "Spine dev CA"
	}
	certPath, keyPath = filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := serialNumber()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Spine"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// CertRequest describes a node certificate.
type CertRequest struct {
	// CADir holds ca.pem and ca-key.pem (CreateCA).
	CADir string
	// NodeID is the certificate's common name and its files' name.
	NodeID string
	// IPs and DNSNames are its subject alternative names: every address
	// peers and clients reach the node at. At least one is required.
	IPs      []net.IP
	DNSNames []string
	// OutDir receives <NodeID>.pem and <NodeID>-key.pem.
	OutDir string
	// Validity defaults to CertValidity.
	Validity time.Duration
}

// CreateCert writes a node certificate signed by the CA, valid for server
// and client authentication, and its key. It refuses to overwrite existing
// files. It returns the paths of the certificate and the key.
func CreateCert(r CertRequest) (certPath, keyPath string, err error) {
	if r.NodeID == "" {
		return "", "", errors.New("a node id is required")
	}
	if filepath.Base(r.NodeID) != r.NodeID || r.NodeID == "." || r.NodeID == ".." {
		return "", "", fmt.Errorf("node id %q cannot name a file", r.NodeID)
	}
	if len(r.IPs) == 0 && len(r.DNSNames) == 0 {
		return "", "", errors.New("at least one IP address or DNS name is required: the addresses the node is reached at")
	}
	if r.Validity <= 0 {
		r.Validity = CertValidity
	}
	caCert, caKey, err := LoadCA(r.CADir)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(r.OutDir, r.NodeID+".pem"), filepath.Join(r.OutDir, r.NodeID+"-key.pem")
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := serialNumber()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	notAfter := now.Add(r.Validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: r.NodeID, Organization: []string{"Spine"}},
		NotBefore:      now.Add(-time.Hour),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:    r.IPs,
		DNSNames:       r.DNSNames,
		SubjectKeyId:   keyID(&key.PublicKey),
		AuthorityKeyId: caCert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(r.OutDir, 0o755); err != nil {
		return "", "", err
	}
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// LoadCA reads dir's ca.pem and ca-key.pem.
func LoadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, CAFile))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", filepath.Join(dir, CAFile))
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM key", filepath.Join(dir, CAKeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("the CA key does not match the CA certificate")
	}
	return cert, key, nil
}

func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists; remove it first or choose another directory", p)
		}
	}
	return nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(b)
	return sum[:20]
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil { // past the umask
		f.Close()
		return err
	}
	return f.Close()
}
