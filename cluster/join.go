package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

const joinRequestTimeout = 5 * time.Second

// joinLoop asks existing members to add this node until one answers 2xx, the
// node sees itself in the raft configuration, or shutdown. It rotates through
// urls with backoff 200ms..2s.
func (n *Node) joinLoop(urls []string) {
	defer n.wg.Done()
	client := n.httpClient()
	backoff := 200 * time.Millisecond
	for i := 0; ; i++ {
		if n.inConfiguration() {
			n.logger.Info("found self in raft configuration; join done")
			return
		}
		u := urls[i%len(urls)]
		members, err := n.postJoin(client, u)
		if err == nil {
			n.logger.Info("joined cluster", "via", u, "members", len(members))
			n.learnPeers(members)
			return
		}
		n.logger.Warn("join attempt failed", "url", u, "error", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-n.shutdownCh:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func (n *Node) inConfiguration() bool {
	cfg, err := n.configuration()
	if err != nil {
		return false
	}
	for _, s := range cfg.Servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) {
			return true
		}
	}
	return false
}

// membersAnswer is the part of a status-shaped answer (join reply or
// GET /cluster/status) this package reads.
type membersAnswer struct {
	Nodes []struct {
		ID         string `json:"id"`
		RaftAddr   string `json:"raft_addr"`
		HTTPAddr   string `json:"http_addr"`
		GossipAddr string `json:"gossip_addr"`
	} `json:"nodes"`
}

func (a membersAnswer) members() []Member {
	out := make([]Member, 0, len(a.Nodes))
	for _, m := range a.Nodes {
		out = append(out, Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, GossipAddr: m.GossipAddr})
	}
	return out
}

// shutdownCtx returns a context cancelled on shutdown or after d.
func (n *Node) shutdownCtx(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-n.shutdownCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// postJoin POSTs this node's Member to <base>/cluster/join.
func (n *Node) postJoin(client *http.Client, base string) ([]Member, error) {
	body, err := json.Marshal(n.self())
	if err != nil {
		return nil, err
	}
	ctx, cancel := n.shutdownCtx(joinRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/cluster/join", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if n.cfg.JoinToken != "" {
		req.Header.Set("Authorization", "Bearer "+n.cfg.JoinToken)
	}
	return n.doMembers(client, req)
}

// fetchMembers GETs <base>/cluster/status for gossip seeding.
func (n *Node) fetchMembers(base string) ([]Member, error) {
	ctx, cancel := n.shutdownCtx(joinRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/cluster/status", nil)
	if err != nil {
		return nil, err
	}
	if n.cfg.JoinToken != "" {
		req.Header.Set("Authorization", "Bearer "+n.cfg.JoinToken)
	}
	return n.doMembers(n.httpClient(), req)
}

// httpClient is the client of join and member requests to other nodes:
// with TLS it trusts the cluster CA and presents this node's certificate.
func (n *Node) httpClient() *http.Client {
	if n.cfg.TLS == nil {
		return &http.Client{Timeout: joinRequestTimeout}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = n.cfg.TLS.Clone()
	return &http.Client{Timeout: joinRequestTimeout, Transport: tr}
}

func (n *Node) doMembers(client *http.Client, req *http.Request) ([]Member, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, bytes.TrimSpace(b))
	}
	var a membersAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		// A 2xx means we are in; an unreadable body only costs gossip seeds.
		n.logger.Warn("unreadable members answer", "url", req.URL.String(), "error", err)
		return nil, nil
	}
	return a.members(), nil
}
