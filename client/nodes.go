package client

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/spine-queue/spine/api"
)

type (
	// ClusterNodes is the answer of GET /cluster/nodes: every node's API
	// address, whether gossip sees it alive, and which leads.
	ClusterNodes = api.ClusterNodes
	// NodeAddr is one node of a [ClusterNodes].
	NodeAddr = api.NodeAddr
)

// ClusterNodes lists the nodes' API addresses (any token, claws included):
// where to go when the node in use stops answering. The node that answers
// says what it knows without asking the leader, so it answers during an
// election too.
func (c *Client) ClusterNodes(ctx context.Context) (*ClusterNodes, error) {
	var out ClusterNodes
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/cluster/nodes"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// maxSkillBytes bounds the skill file a node may answer.
const maxSkillBytes = 4 << 20

// SkillMD returns the skill file the nodes serve at GET /skill.md: how an
// AI agent works as a claw (markdown).
func (c *Client) SkillMD(ctx context.Context) ([]byte, error) {
	resp, _, err := c.do(ctx, &request{method: http.MethodGet, path: "/skill.md"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSkillBytes))
	if err != nil {
		return nil, fmt.Errorf("client: GET /skill.md: read answer: %w", err)
	}
	return b, nil
}
