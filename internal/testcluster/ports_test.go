package testcluster

import (
	"net"
	"testing"
)

// No port is handed out twice, and a gossip port is free for UDP too.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		addr, err := FreePort(i%3 == 2)
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("port %s handed out twice", addr)
		}
		seen[addr] = true
		if i%3 == 2 {
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				t.Fatalf("gossip port %s not free for UDP: %v", addr, err)
			}
			u.Close()
		}
	}
}
