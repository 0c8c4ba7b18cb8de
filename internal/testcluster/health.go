package testcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
)

// Health is the public /health answer.
type Health = api.Health

// Health asks one node for /health.
func (c *Cluster) Health(n *Node) (*Health, error) {
	resp, err := c.client.Get(n.URL + "/health")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /health: %s", n.ID, resp.Status)
	}
	var h Health
	return &h, json.NewDecoder(resp.Body).Decode(&h)
}

// Leader returns the running node that reports itself leader (ready to
// serve), if exactly one does. A paused node is not asked.
func (c *Cluster) Leader() *Node {
	var found *Node
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() { // a paused node answers nothing: do not wait for it
			continue
		}
		if h, err := c.Health(n); err == nil && h.Role == "leader" {
			if found != nil {
				return nil
			}
			found = n
		}
	}
	return found
}

// WaitLeader polls until a running node is a ready leader.
func (c *Cluster) WaitLeader(timeout time.Duration) (*Node, error) {
	var n *Node
	err := Eventually(timeout, 50*time.Millisecond, func() error {
		if n = c.Leader(); n == nil {
			return errors.New("no leader")
		}
		return nil
	})
	return n, err
}

// WaitVoters polls until every running node's view of the cluster (its
// /cluster/status: the Raft configuration joined with its gossip) shows at
// least n voters, each alive.
func (c *Cluster) WaitVoters(n int, timeout time.Duration) error {
	return Eventually(timeout, 100*time.Millisecond, func() error { return c.votersAlive(n) })
}

func (c *Cluster) votersAlive(n int) error {
	if c.Leader() == nil {
		return errors.New("no leader")
	}
	for _, node := range c.Nodes {
		if !node.Running() {
			continue
		}
		voters, err := c.aliveVoters(node)
		if err != nil {
			return err
		}
		if voters < n {
			return fmt.Errorf("%s sees %d of %d voters alive", node.ID, voters, n)
		}
	}
	return nil
}

func (c *Cluster) aliveVoters(node *Node) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, node.URL+"/cluster/status", nil)
	req.Header.Set("Authorization", "Bearer "+HeadToken)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Nodes []struct {
			ID       string `json:"id"`
			Suffrage string `json:"suffrage"`
			Alive    bool   `json:"alive"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	voters := 0
	for _, s := range st.Nodes {
		if s.Suffrage == "voter" && s.Alive {
			voters++
		}
	}
	return voters, nil
}

// WaitCaughtUp polls until every running node has applied at least index.
func (c *Cluster) WaitCaughtUp(index uint64, timeout time.Duration) error {
	return Eventually(timeout, 50*time.Millisecond, func() error {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			h, err := c.Health(n)
			if err != nil {
				return err
			}
			if h.AppliedIndex < index {
				return fmt.Errorf("%s applied %d < %d", n.ID, h.AppliedIndex, index)
			}
		}
		return nil
	})
}
