package clusterinfo

import (
	"encoding/base64"
	"fmt"
)

// ParseGossipKey decodes a base64 key of 16, 24 or 32 bytes (AES-128, -192,
// -256).
func ParseGossipKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("gossip key: not base64: %w", err)
	}
	if l := len(k); l != 16 && l != 24 && l != 32 {
		return nil, fmt.Errorf("gossip key: %d bytes; want 16, 24 or 32 (spine keyring generate makes one)", l)
	}
	return k, nil
}

// KeyInfo is one key of a node's ring, by fingerprint.
type KeyInfo struct {
	Fingerprint string `json:"fingerprint"`
	Primary     bool   `json:"primary"`
}
