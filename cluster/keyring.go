package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/memberlist"

	"github.com/spine-queue/spine/internal/durable"
)

// Gossip encryption. With a key, memberlist encrypts and authenticates
// every gossip message (AES-GCM) and drops any it cannot open: a node
// started with another key never joins the gossip ring. A node's keys are
// its own secret configuration, like a certificate, not replicated state: a
// key in the raft log would sit in every snapshot and backup. They live in
// DataDir/keyring.json (0600): the primary (used to send) first, then the
// others (accepted on receipt), so a rotation survives a restart:
//
//	install the new key on every node; use it on every node; remove the old.
//
// A node that joins through another proves it holds a key of the ring (an
// HMAC of its id under its primary key): one that does not is not added to
// raft either.

// keyringFile is the keyring's file in the data directory.
const keyringFile = "keyring.json"

// GenerateGossipKey returns a new random 32-byte key, base64.
func GenerateGossipKey() string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

// KeyFingerprint names a key without revealing it: the first 16 hex digits
// of its SHA-256.
func KeyFingerprint(k []byte) string {
	s := sha256.Sum256(k)
	return hex.EncodeToString(s[:8])
}

// keyring is the node's gossip keys and their file.
type keyring struct {
	mu   sync.Mutex
	path string
	ring *memberlist.Keyring
	// ignored: the key given at start is not in the file's ring, which won.
	ignored bool
}

type keyringJSON struct {
	Keys []string `json:"keys"` // base64; the primary first
}

// openKeyring loads DataDir/keyring.json, or starts one from key (nil: no
// encryption, unless the file has keys). Once the file has keys it wins
// over the key given at start: after a rotation, every node's configuration
// still names the old key, and a restart must not bring it back. (A node
// is moved to a new key with spine keyring, or by deleting its file.)
func openKeyring(dir string, key []byte) (*keyring, error) {
	path := filepath.Join(dir, keyringFile)
	var keys [][]byte
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var kj keyringJSON
		if err := json.Unmarshal(b, &kj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, s := range kj.Keys {
			k, err := ParseGossipKey(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			keys = append(keys, k)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	ignored := false
	if key != nil {
		if len(keys) == 0 {
			keys = [][]byte{key}
		} else {
			ignored = !slices.ContainsFunc(keys, func(k []byte) bool { return hmac.Equal(k, key) })
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	ring, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, err
	}
	kr := &keyring{path: path, ring: ring, ignored: ignored}
	if err := kr.save(); err != nil {
		return nil, err
	}
	return kr, nil
}

// mustRing is a ring of one key, for a node without a data directory.
func mustRing(key []byte) *memberlist.Keyring {
	r, err := memberlist.NewKeyring(nil, key)
	if err != nil {
		panic(err)
	}
	return r
}

// save writes the ring to its file (atomically, 0600); a ring without a
// file (no data directory) is kept in memory only.
func (kr *keyring) save() error {
	if kr.path == "" {
		return nil
	}
	keys := kr.ring.GetKeys() // the primary first
	kj := keyringJSON{}
	for _, k := range keys {
		kj.Keys = append(kj.Keys, base64.StdEncoding.EncodeToString(k))
	}
	b, err := json.MarshalIndent(kj, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(kr.path, b, 0o600)
}

// Keyring lists this node's gossip keys by fingerprint, the primary first;
// ErrNoEncryption when gossip is not encrypted.
func (n *Node) Keyring() ([]KeyInfo, error) {
	kr := n.keys
	if kr == nil {
		return nil, ErrNoEncryption
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	primary := kr.ring.GetPrimaryKey()
	var out []KeyInfo
	for _, k := range kr.ring.GetKeys() {
		out = append(out, KeyInfo{Fingerprint: KeyFingerprint(k), Primary: hmac.Equal(k, primary)})
	}
	return out, nil
}

// KeyringChange installs, uses (makes primary) or removes a key of this
// node's ring, and saves the ring.
func (n *Node) KeyringChange(op string, key []byte) error {
	kr := n.keys
	if kr == nil {
		return ErrNoEncryption
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	var err error
	switch op {
	case "install":
		err = kr.ring.AddKey(key)
	case "use":
		if !slices.ContainsFunc(kr.ring.GetKeys(), func(k []byte) bool { return hmac.Equal(k, key) }) {
			return fmt.Errorf("%w: install the key before using it", ErrInvalidConfig)
		}
		err = kr.ring.UseKey(key)
	case "remove":
		if hmac.Equal(kr.ring.GetPrimaryKey(), key) {
			return fmt.Errorf("%w: the primary key cannot be removed; use another first", ErrInvalidConfig)
		}
		err = kr.ring.RemoveKey(key)
	default:
		return fmt.Errorf("%w: keyring operation %q (install, use or remove)", ErrInvalidConfig, op)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	n.logger.Info("gossip keyring changed", "op", op, "key", KeyFingerprint(key))
	return kr.save()
}

// joinProof proves to the cluster that this node holds a gossip key of its
// ring: an HMAC of the node id under the primary key ("" without one).
func (n *Node) joinProof() string {
	if n.keys == nil {
		return ""
	}
	n.keys.mu.Lock()
	k := n.keys.ring.GetPrimaryKey()
	n.keys.mu.Unlock()
	return proofOf(k, n.cfg.NodeID)
}

func proofOf(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("spine-join:" + id))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// checkJoinProof accepts m when gossip is not encrypted here, or when its
// proof is the HMAC of its id under one of this node's keys.
func (n *Node) checkJoinProof(m Member) error {
	if n.keys == nil {
		return nil
	}
	n.keys.mu.Lock()
	keys := n.keys.ring.GetKeys()
	n.keys.mu.Unlock()
	for _, k := range keys {
		if hmac.Equal([]byte(proofOf(k, m.ID)), []byte(m.GossipProof)) {
			return nil
		}
	}
	return ErrJoinProof
}

// JoinProof is what `spine cluster join --gossip-key` sends for a node the
// operator adds: the proof that node would send itself.
func JoinProof(key []byte, id string) string { return proofOf(key, id) }
