package netns

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// needNet makes a Net of n hosts, or skips when this machine cannot
// (unless SPINE_REQUIRE_FAULTS=1, as in CI, where that is a failure).
func needNet(t *testing.T, n int) *Net {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("SPINE_REQUIRE_FAULTS") == "1" {
			t.Fatalf("network namespaces: %v", err)
		}
		t.Skipf("network namespaces: %v", err)
	}
	nt, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Error(err)
		}
	})
	return nt
}

// listen starts a TCP listener and a UDP socket on host i's port 9000 that
// accept and count.
type host struct {
	tcp net.Listener
	udp net.PacketConn
	got chan string
}

func listen(t *testing.T, nt *Net, i int) *host {
	t.Helper()
	h := &host{got: make(chan string, 100)}
	err := nt.Do(i, func() error {
		var err error
		if h.tcp, err = net.Listen("tcp", nt.IP(i)+":9000"); err != nil {
			return err
		}
		h.udp, err = net.ListenPacket("udp", nt.IP(i)+":9000")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.tcp.Close(); h.udp.Close() })
	go func() {
		for {
			c, err := h.tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 100)
		for {
			n, _, err := h.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			h.got <- string(buf[:n])
		}
	}()
	return h
}

// dial connects over TCP from host from to host to.
func dial(nt *Net, from, to int) error {
	return nt.Do(from, func() error {
		c, err := net.DialTimeout("tcp", nt.IP(to)+":9000", 700*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// eventually polls fn for up to 10 s.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPartitionCutsAndHeals(t *testing.T) {
	nt := needNet(t, 3)
	for i := 0; i < 3; i++ {
		listen(t, nt, i)
	}
	for from := 0; from < 3; from++ {
		for to := 0; to < 3; to++ {
			if from != to {
				eventually(t, "hosts reach each other", func() error { return dial(nt, from, to) })
			}
		}
	}
	root := func(i int) error {
		c, err := net.DialTimeout("tcp", nt.IP(i)+":9000", time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
	eventually(t, "the root namespace reaches a host", func() error { return root(0) })

	// Host 0 isolated: no link to or from it, the rest untouched, and the
	// root namespace (the test's clients) still reaches it.
	if err := nt.Partition([]int{0}, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]int{{0, 1}, {0, 2}, {1, 0}, {2, 0}} {
		if err := dial(nt, l[0], l[1]); err == nil {
			t.Errorf("%d reached %d across the partition", l[0], l[1])
		}
	}
	if err := dial(nt, 1, 2); err != nil {
		t.Errorf("hosts on one side lost each other: %v", err)
	}
	if err := root(0); err != nil {
		t.Errorf("the root namespace lost the isolated host: %v", err)
	}
	if got := nt.Cuts(); len(got) != 4 {
		t.Errorf("cuts %v, want 4", got)
	}
	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healed", func() error { return errors.Join(dial(nt, 0, 1), dial(nt, 2, 0)) })
	if got := nt.Cuts(); len(got) != 0 {
		t.Errorf("cuts %v after Heal", got)
	}
}

// A one-way cut drops what 0 sends to 1 only: 1's datagrams still reach 0.
// (TCP needs both ways, so it fails across either.)
func TestOneWayCut(t *testing.T) {
	nt := needNet(t, 2)
	h0, h1 := listen(t, nt, 0), listen(t, nt, 1)
	if err := nt.Cut(0, 1); err != nil {
		t.Fatal(err)
	}
	send := func(from, to int) {
		_ = nt.Do(from, func() error {
			c, err := net.Dial("udp", nt.IP(to)+":9000")
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("hello"))
			return err
		})
	}
	eventually(t, "1 -> 0 datagrams arrive", func() error {
		send(1, 0)
		select {
		case <-h0.got:
			return nil
		case <-time.After(200 * time.Millisecond):
			return errors.New("nothing arrived")
		}
	})
	for range 5 {
		send(0, 1)
	}
	select {
	case m := <-h1.got:
		t.Fatalf("host 1 got %q across the cut 0 -> 1", m)
	case <-time.After(500 * time.Millisecond):
	}
	if err := dial(nt, 1, 0); err == nil {
		t.Error("a TCP handshake completed across a one-way cut")
	}
	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "0 -> 1 after Heal", func() error { return dial(nt, 0, 1) })
}
