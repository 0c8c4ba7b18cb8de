package cluster

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

func TestKeyringFileAndRotation(t *testing.T) {
	dir := t.TempDir()
	k1, _ := ParseGossipKey(GenerateGossipKey())
	k2, _ := ParseGossipKey(GenerateGossipKey())
	kr, err := openKeyring(dir, k1)
	if err != nil || kr == nil {
		t.Fatalf("open: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, keyringFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v %v", st, err)
	}
	n := &Node{keys: kr, logger: testLogger(t, "keyring")}
	for _, op := range []string{"install", "install", "use"} { // install is idempotent
		if err := n.KeyringChange(op, k2); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	if err := n.KeyringChange("remove", k2); err == nil {
		t.Fatal("the primary key was removed")
	}
	if err := n.KeyringChange("remove", k1); err != nil {
		t.Fatal(err)
	}
	// A restart with the old key in its configuration keeps the rotated
	// ring: the file wins.
	kr2, err := openKeyring(dir, k1)
	if err != nil {
		t.Fatal(err)
	}
	keys := kr2.ring.GetKeys()
	if len(keys) != 1 || base64.StdEncoding.EncodeToString(keys[0]) != base64.StdEncoding.EncodeToString(k2) || !kr2.ignored {
		t.Fatalf("after a restart the ring is %d keys, ignored=%v", len(keys), kr2.ignored)
	}
	// Without a key and without a file: no encryption.
	if kr3, err := openKeyring(t.TempDir(), nil); err != nil || kr3 != nil {
		t.Fatalf("no key: %v %v", kr3, err)
	}
	if _, err := ParseGossipKey(base64.StdEncoding.EncodeToString([]byte("short"))); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func TestJoinProof(t *testing.T) {
	k1, _ := ParseGossipKey(GenerateGossipKey())
	k2, _ := ParseGossipKey(GenerateGossipKey())
	kr, err := openKeyring(t.TempDir(), k1)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{keys: kr}
	if err := n.checkJoinProof(Member{ID: "n4", GossipProof: JoinProof(k1, "n4")}); err != nil {
		t.Fatalf("the right key's proof: %v", err)
	}
	for name, m := range map[string]Member{
		"no proof":             {ID: "n4"},
		"another key":          {ID: "n4", GossipProof: JoinProof(k2, "n4")},
		"another node's proof": {ID: "n4", GossipProof: JoinProof(k1, "n5")},
	} {
		if err := n.checkJoinProof(m); err == nil {
			t.Errorf("%s: admitted", name)
		}
	}
	if err := (&Node{}).checkJoinProof(Member{ID: "n4"}); err != nil {
		t.Fatalf("without encryption a join needs no proof: %v", err)
	}
}
