package client

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// pick chooses the base URL of the next try.
func (c *Client) pick(req *request) string {
	if req.addr != "" {
		return req.addr
	}
	c.mu.Lock()
	stale, seed := c.leaderStale, c.addrs[c.cur]
	c.mu.Unlock()
	if req.write && stale {
		c.lookupLeader(seed)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.write && c.leaderAddr != "" {
		return c.leaderAddr
	}
	return c.addrs[c.cur]
}

// failed records a network error talking to base: forget it as leader,
// move on to the next seed.
func (c *Client) failed(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if base == c.leaderAddr {
		c.leaderAddr = ""
	}
	if c.addrs[c.cur] == base {
		c.cur = (c.cur + 1) % len(c.addrs)
	}
}

func (c *Client) forgetLeader() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaderAddr, c.leaderID, c.leaderStale = "", "", false
}

// observe learns the leader from an answer's headers: the node that answered
// is the leader when its id equals the leader id; an address in the header
// is taken as is; a new leader id is looked up (lazily, before the next
// write) through GET /health.
func (c *Client) observe(base string, h http.Header) {
	leader, node := h.Get(HeaderLeader), h.Get(HeaderNode)
	if leader == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.HasPrefix(leader, "http://") || strings.HasPrefix(leader, "https://"):
		if c.leaderAddr != leader {
			c.log.Debug("spine client: leader", "addr", leader)
		}
		c.leaderAddr, c.leaderStale = strings.TrimRight(leader, "/"), false
	case leader == node:
		if c.leaderAddr != base {
			c.log.Debug("spine client: leader", "id", leader, "addr", base)
		}
		c.leaderID, c.leaderAddr, c.leaderStale = leader, base, false
	case leader != c.leaderID:
		c.leaderID, c.leaderAddr, c.leaderStale = leader, "", true
	}
}

// lookupLeader asks seed for the leader's address (best effort, short).
func (c *Client) lookupLeader(seed string) {
	c.mu.Lock()
	c.leaderStale = false
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, 2*time.Second))
	defer cancel()
	h, err := c.health(ctx, seed)
	if err != nil || h.LeaderAddr == "" {
		return
	}
	addr, err := normalizeAddr(h.LeaderAddr)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.leaderID, c.leaderAddr, c.leaderStale = h.LeaderID, addr, false
	c.mu.Unlock()
}
