package systemtest

import (
	"testing"
	"time"
)

func TestClusterStarts(t *testing.T) {
	c := startCluster(t, 3, nil)
	l, err := c.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(l); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if nl == l {
		t.Fatal("dead node is leader")
	}
}
