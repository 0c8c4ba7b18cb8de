package httpapi

import (
	"strings"
	"testing"

	spine "github.com/spine-queue/spine"
	"github.com/spine-queue/spine/cluster"
)

// withSkill serves md at GET /skill.md.
func withSkill(md string) option { return func(c *envConfig) { c.SkillMD = []byte(md) } }

// The skill file names the node that serves it: {{node_url}} becomes its
// advertised URL and {{node_urls}} every node's, its own first, in the
// built-in file and in an operator's alike; a node that cannot read its
// membership names itself by the address it was asked at.
func TestSkillNamesItsNode(t *testing.T) {
	e := newEnv(t, withSkill("from {{node_url}}; nodes {{node_urls}}; curl {{node_url}}/health {{other}}\n"))
	e.fc.mu.Lock()
	e.fc.status.Nodes = []cluster.NodeStatus{
		{ID: "n0", HTTPAddr: "http://n0.test:36715", Suffrage: "voter"},
		{ID: "n1", HTTPAddr: "http://n1.test:36725", Suffrage: "voter", Alive: true},
		{ID: "n2", HTTPAddr: "http://n2.test:36735", Suffrage: "voter"},
		{ID: "n3", Suffrage: "voter"}, // its address not known yet
	}
	e.fc.mu.Unlock()
	r := e.do("GET", "/skill.md", "", nil)
	want := "from http://n1.test:36725; nodes http://n1.test:36725,http://n0.test:36715,http://n2.test:36735; curl http://n1.test:36725/health {{other}}\n"
	if r.Code != 200 || string(r.Body) != want {
		t.Fatalf("GET /skill.md: %d %q, want %q", r.Code, r.Body, want)
	}

	e.fc.mu.Lock()
	e.fc.statusErr = cluster.ErrShutdown
	e.fc.mu.Unlock()
	r = e.do("GET", "/skill.md", "", nil)
	if want := "from http://example.com; nodes http://example.com; curl http://example.com/health {{other}}\n"; string(r.Body) != want {
		t.Fatalf("GET /skill.md without the membership: %q, want %q", r.Body, want)
	}
}

// The built-in SKILL.md, served, has no placeholder left, and its examples
// use the serving node's URL.
func TestSkillBuiltinServed(t *testing.T) {
	e := newEnv(t, withSkill(string(spine.SkillMD)))
	body := string(e.do("GET", "/skill.md", "", nil).Body)
	if strings.Contains(body, "{{") {
		t.Errorf("a placeholder is left in the served skill file")
	}
	for _, line := range []string{
		"SPINE=http://n1.test:36725 TOKEN=$LEFT_CLAW_TOKEN WORKER=claw-7",
		"SPINE_URLS=http://n1.test:36725 SPINE_TOKEN=$LEFT_CLAW_TOKEN",
		"This file came from `http://n1.test:36725`",
		"`http://n1.test:36725/mcp`",
	} {
		if !strings.Contains(body, line) {
			t.Errorf("the served skill file has no %q", line)
		}
	}
}
