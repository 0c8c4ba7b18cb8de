package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster"
)

// Gossip encrypted with a key: the cluster forms; `spine keyring` rotates
// to a new key on every node (install, use, remove) while gossip stays
// healthy; a node restarted with the old key in its configuration keeps
// the rotated ring and gossips again; a node that does not hold a key of
// the ring is refused when it asks to join, and never enters raft.
func TestGossipEncryptionAndKeyRotation(t *testing.T) {
	t.Parallel()
	k1, k2, k3 := cluster.GenerateGossipKey(), cluster.GenerateGossipKey(), cluster.GenerateGossipKey()
	fp := func(k string) string {
		b, _ := cluster.ParseGossipKey(k)
		return cluster.KeyFingerprint(b)
	}
	c := startCluster(t, 3, map[string]string{"SPINE_GOSSIP_KEY": k1})
	dir := t.TempDir()
	keyring := func(args ...string) []api.KeyringAnswer {
		t.Helper()
		code, out, errOut := opsCLI(t, c.URLs(), dir, append([]string{"keyring"}, args...)...)
		if code != 0 {
			t.Fatalf("spine keyring %v: exit %d\n%s%s", args, code, out, errOut)
		}
		var rep struct {
			Nodes []api.KeyringAnswer `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Nodes) != 3 {
			t.Fatalf("spine keyring %v: %s (%v)", args, out, err)
		}
		return rep.Nodes
	}
	want := func(nodes []api.KeyringAnswer, primary string, others ...string) {
		t.Helper()
		for _, n := range nodes {
			var got []string
			for _, k := range n.Keys {
				if k.Primary {
					got = append([]string{k.Fingerprint + "*"}, got...)
				} else {
					got = append(got, k.Fingerprint)
				}
			}
			w := append([]string{fp(primary) + "*"}, func() []string {
				var o []string
				for _, k := range others {
					o = append(o, fp(k))
				}
				return o
			}()...)
			if !n.Encrypted || strings.Join(got, ",") != strings.Join(w, ",") {
				t.Fatalf("%s's keyring: %v (encrypted %v), want %v", n.NodeID, got, n.Encrypted, w)
			}
		}
	}
	allAlive := func(what string) {
		t.Helper()
		apiEventually(t, 30*time.Second, what, func() error {
			for _, n := range c.Nodes {
				var st api.ClusterStatus
				r, err := apiRequest("GET", n.URL+"/cluster/status", apiHead, nil)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(r.Body, &st); err != nil {
					return err
				}
				for _, m := range st.Nodes {
					if !m.Alive {
						return fmt.Errorf("%s sees %s not alive", n.ID, m.ID)
					}
				}
			}
			return nil
		})
	}
	want(keyring("list"), k1)
	allAlive("gossip healthy under the first key")

	want(keyring("install", k2), k1, k2)
	want(keyring("use", k2), k2, k1)
	want(keyring("remove", k1), k2)
	allAlive("gossip healthy under the second key alone")

	// A restart keeps the rotated ring although SPINE_GOSSIP_KEY still
	// names the first key.
	_, fs := apiRoles(t, c)
	if err := c.Terminate(fs[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(fs[0]); err != nil {
		t.Fatal(err)
	}
	allAlive("the restarted node gossiping again")
	want(keyring("list"), k2)

	// A node with a key the ring does not hold is not admitted to raft:
	// neither when it asks, nor when an operator adds it with its key.
	extra := coreStartExtraNode(t, "n4", "SPINE_GOSSIP_KEY="+k3)
	body := map[string]string{"node_id": "n4", "raft_addr": extra.raft, "http_addr": extra.url, "gossip_addr": extra.gossip}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/cluster/join", apiHead, body), http.StatusForbidden, api.CodeForbidden)
	b, _ := cluster.ParseGossipKey(k3)
	body["gossip_proof"] = cluster.JoinProof(b, "n4")
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/cluster/join", apiHead, body), http.StatusForbidden, api.CodeForbidden)
	code, out, errOut := opsCLI(t, c.URLs(), dir, "cluster", "join", "--node-id", "n4", "--raft-addr", extra.raft, "--gossip-key", k3)
	if code == 0 || !strings.Contains(out+errOut, "gossip key") {
		t.Fatalf("cluster join with a foreign key: exit %d %s%s", code, out, errOut)
	}
	var st api.ClusterStatus
	apiDecode(t, apiDo(t, "GET", c.Nodes[0].URL+"/cluster/status", apiHead, nil), &st)
	if len(st.Nodes) != 3 {
		t.Fatalf("the cluster has %d servers after refused joins: %+v", len(st.Nodes), st.Nodes)
	}
	// With the ring's key, the operator's join is taken.
	body["gossip_proof"] = cluster.JoinProof(func() []byte { b, _ := cluster.ParseGossipKey(k2); return b }(), "n4")
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/cluster/join", apiHead, body), http.StatusOK)
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/cluster/remove", apiHead, map[string]string{"node_id": "n4"}), http.StatusOK)
}
