package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

// GET /cluster/status names the cluster's level in force (this node's
// state) and the highest level each member's build supports, as it
// gossiped it; a member not heard from has none.
func TestClusterStatusShowsLevels(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelIdentity))
	one, two := 1, 2
	e.fc.mu.Lock()
	e.fc.status.Nodes[0].SupportedLevel = &two
	e.fc.status.Nodes = append(e.fc.status.Nodes,
		cluster.NodeStatus{ID: "n2", RaftAddr: "127.0.0.1:1", Suffrage: "voter", SupportedLevel: &one},
		cluster.NodeStatus{ID: "n3", RaftAddr: "127.0.0.1:2", Suffrage: "nonvoter"})
	e.fc.mu.Unlock()
	m := e.do("GET", "/cluster/status", headTok, nil).json(t)
	if m["level"] != float64(fsm.LevelIdentity) {
		t.Errorf("level = %v, want %d", m["level"], fsm.LevelIdentity)
	}
	nodes := m["nodes"].([]any)
	for i, want := range []any{float64(2), float64(1), nil} {
		if got := nodes[i].(map[string]any)["supported_level"]; got != want {
			t.Errorf("node %d: supported_level = %v, want %v", i, got, want)
		}
	}
	var st api.ClusterStatus
	if err := json.Unmarshal(e.do("GET", "/cluster/status", headTok, nil).Body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Level != 1 || st.Nodes[1].SupportedLevel == nil || *st.Nodes[1].SupportedLevel != 1 || st.Nodes[2].SupportedLevel != nil {
		t.Errorf("status decoded: %+v", st)
	}
}
