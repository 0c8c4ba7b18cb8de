package systemtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
)

// The control plane's registry on three processes: gateways and workers
// registered through a follower (by the CLI and over HTTP) are the same
// list on every node; after the leader's death the list is still whole, a
// re-registration through another node updates in place, and deregistering
// a gateway takes its workers on every node.
func TestRegistryOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	dir := t.TempDir()
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := devCLI(t, c, dir, dir, apiLeft, args...)
		if code != 0 {
			t.Fatalf("spine %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	gwA, gwB := wName("gwa"), wName("gwb")
	cli("gateway", "register", gwA, "--address", "http://10.0.0.7:7000", "--capacity", "4", "--meta", "zone=eu-1")
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/gateways", apiRight, api.GatewayRegisterRequest{ID: gwB, Address: "https://gw-b.internal", Capacity: 2}), 201)
	w1, w2 := wName("w"), wName("w")
	cli("worker", "register", w1, "--gateway", gwA, "--capability", "gpu,bash", "--capacity", "2")
	cli("worker", "register", w2, "--gateway", gwB, "--capability", "bash")

	listOn := func(url string) (api.GatewayList, api.WorkerList) {
		t.Helper()
		var g api.GatewayList
		var w api.WorkerList
		apiDecode(t, apiDo(t, "GET", url+"/v1/gateways?consistent", apiHead, nil), &g)
		apiDecode(t, apiDo(t, "GET", url+"/v1/workers?consistent", apiHead, nil), &w)
		return g, w
	}
	apiCaughtUp(t, c)
	var first string
	for _, n := range c.Nodes {
		g, w := listOn(n.URL)
		b, _ := json.Marshal([]any{g, w})
		if first == "" {
			first = string(b)
		} else if string(b) != first {
			t.Fatalf("%s answers another registry:\n%s\n%s", n.ID, b, first)
		}
		if len(g.Gateways) != 2 || len(w.Workers) != 2 {
			t.Fatalf("%s: %d gateways, %d workers", n.ID, len(g.Gateways), len(w.Workers))
		}
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	g, w := listOn(fs[1].URL)
	if len(g.Gateways) != 2 || len(w.Workers) != 2 {
		t.Fatalf("after the leader's death: %+v %+v", g, w)
	}
	var upd api.Gateway
	if err := json.Unmarshal([]byte(cli("gateway", "register", gwA, "--address", "http://10.0.0.8:7000", "--capacity", "6", "--addr", fs[1].URL)), &upd); err != nil ||
		upd.Address != "http://10.0.0.8:7000" || upd.Capacity != 6 || upd.Metadata["zone"] != "" || len(upd.Workers) != 1 {
		t.Fatalf("re-register after the failover: %+v %v", upd, err)
	}
	var gone api.GatewayDeregistered
	if err := json.Unmarshal([]byte(cli("gateway", "deregister", gwA)), &gone); err != nil || len(gone.Workers) != 1 || gone.Workers[0].ID != w1 {
		t.Fatalf("deregister: %+v %v", gone, err)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	for _, n := range c.Nodes {
		g, w := listOn(n.URL)
		if len(g.Gateways) != 1 || g.Gateways[0].ID != gwB || len(w.Workers) != 1 || w.Workers[0].ID != w2 {
			t.Fatalf("%s after the deregistration: %+v %+v", n.ID, g, w)
		}
	}
	if out := cli("worker", "list", "--output", "table"); !strings.Contains(out, w2) || strings.Contains(out, w1) {
		t.Fatalf("worker table:\n%s", out)
	}
}
