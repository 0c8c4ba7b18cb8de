package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"time"

	spine "github.com/spine-queue/spine"
	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster/clusterinfo"
)

// The public and cluster routes: health, the skill file, status and
// membership.

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		return err
	}
	role := "follower"
	switch {
	case s.cluster.IsLeader():
		role = "leader"
	case st.State == "Candidate":
		role = "candidate"
	}
	qs := s.queue.Stats()
	h := api.Health{
		OK: true, NodeID: s.cluster.ID(), Role: role, State: st.State,
		LeaderID: st.Leader.ID, LeaderAddr: st.Leader.HTTPAddr,
		AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex, Term: st.Term,
		Time:         time.Now().UTC(),
		ClaimWaiters: qs.ClaimWaiters, LocalHeartbeats: qs.LocalHeartbeats, LeaseMisses: qs.LeaseMisses,
		MuxConnections: s.muxSrv.Conns(), MCPSessions: s.mcp.sessions.count(),
		LogBatches: st.LogBatches, LogEntries: st.LogEntries,
		LogAppendSeconds: st.LogAppendSeconds, LogWritesOverlapped: st.LogWritesOverlapped,
		HashIndex: st.HashIndex, StateHash: st.StateHash, HashChecks: st.HashChecks, HashMismatches: st.HashMismatches,
	}
	// docs/api.md: last_contact is a time (RFC 3339), omitted if never.
	// Status reports it as an age ("0s" on the leader, "never").
	if age, err := time.ParseDuration(st.LastContact); err == nil {
		h.LastContact = time.Now().Add(-age).UTC()
	}
	if s.cfg.CPUSeconds != nil {
		cpu := s.cfg.CPUSeconds()
		h.CPUSeconds = &cpu
	}
	if s.cfg.TimerSlack != nil {
		if d := s.cfg.TimerSlack(); d >= 0 {
			ns := d.Nanoseconds()
			h.TimerSlackNS = &ns
		}
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

// The skill file's placeholders: each is replaced as the file is served,
// in the built-in SKILL.md and in a file of the operator's
// (SPINE_SKILL_MD_PATH) alike; a file without them is served as it is.
const (
	// skillNodeURL becomes the URL of the node that serves the file (its
	// advertised HTTP address), so the file's examples work as they stand.
	skillNodeURL = "{{node_url}}"
	// skillNodeURLs becomes every node's URL, comma-separated, this node's
	// first.
	skillNodeURLs = "{{node_urls}}"
)

func (s *Server) handleSkill(w http.ResponseWriter, r *http.Request, c *call) error {
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	body := s.cfg.SkillMD
	if bytes.Contains(body, []byte("{{node_url")) {
		self, all := s.nodeURLs(r)
		body = []byte(strings.NewReplacer(skillNodeURLs, strings.Join(all, ","), skillNodeURL, self).Replace(string(body)))
	}
	_, err := w.Write(body)
	return err
}

// nodeURLs returns this node's URL and every node's, this one's first, in
// the order of the cluster's configuration. A node that does not know its
// membership (or its own address in it) names itself by the address the
// request came to.
func (s *Server) nodeURLs(r *http.Request) (self string, all []string) {
	var others []string
	if st, err := s.cluster.Status(r.Context()); err == nil {
		for _, n := range st.Nodes {
			switch {
			case n.HTTPAddr == "":
			case n.ID == s.cluster.ID():
				self = n.HTTPAddr
			default:
				others = append(others, n.HTTPAddr)
			}
		}
	}
	if self == "" {
		scheme := "http://"
		if r.TLS != nil {
			scheme = "https://"
		}
		self = scheme + r.Host
	}
	return self, append([]string{self}, others...)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request, c *call) error {
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	_, err := w.Write(spine.OpenAPI)
	return err
}

func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.answerStatus(w, r)
}

// viewStatus is the API's view of a cluster status.
func viewStatus(st clusterinfo.Status) api.ClusterStatus {
	out := api.ClusterStatus{
		Leader: api.ClusterLeader{ID: st.Leader.ID, HTTPAddr: st.Leader.HTTPAddr},
		Nodes:  make([]*api.ClusterNode, 0, len(st.Nodes)),
		Term:   st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, NodeID: st.NodeID,
		State: st.State, LastContact: st.LastContact,
		LogBatches: st.LogBatches, LogEntries: st.LogEntries, LogAppendSeconds: st.LogAppendSeconds,
		LogWritesOverlapped: st.LogWritesOverlapped,
		HashIndex:           st.HashIndex, StateHash: st.StateHash, HashChecks: st.HashChecks, HashMismatches: st.HashMismatches,
	}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, &api.ClusterNode{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr,
			GossipAddr: n.GossipAddr, Suffrage: n.Suffrage, Alive: n.Alive, HashIndex: n.HashIndex, StateHash: n.StateHash,
			SupportedLevel: n.SupportedLevel})
	}
	return out
}

// handleClusterNodes lists the nodes' API addresses for any caller with a
// token, claws included: where to go when the node a client talks to dies.
func (s *Server) handleClusterNodes(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		return err
	}
	out := api.ClusterNodes{Leader: st.Leader.ID, Nodes: make([]api.NodeAddr, 0, len(st.Nodes))}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, api.NodeAddr{ID: n.ID, HTTPAddr: n.HTTPAddr, Alive: n.Alive, Leader: n.ID == st.Leader.ID})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) answerStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		return err
	}
	out := viewStatus(st)
	out.Level = s.queue.Local().Level()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request, c *call) error {
	var m api.Member
	if err := decode(c, &m); err != nil {
		return err
	}
	if m.NodeID == "" || m.RaftAddr == "" {
		return badRequest("node_id and raft_addr are required")
	}
	if err := checkNodeID("node_id", m.NodeID); err != nil {
		return err
	}
	if err := s.cluster.AddVoter(r.Context(), clusterinfo.Member{ID: m.NodeID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr,
		GossipAddr: m.GossipAddr, GossipProof: m.GossipProof, Transport: uint8(min(max(m.RaftTransport, 0), 255))}); err != nil {
		if errors.Is(err, clusterinfo.ErrPeerTLS) {
			return errorf(http.StatusForbidden, api.CodeForbidden, "%v: give the node a certificate of the cluster CA, with its raft address as a SAN", err)
		}
		if errors.Is(err, clusterinfo.ErrJoinProof) {
			return errorf(http.StatusForbidden, api.CodeForbidden, "%v: gossip_proof must be made with one of the cluster's gossip keys (the joining node's own, when it asks to join)", err)
		}
		return err
	}
	s.logger.Info("node joined", "node", m.NodeID, "raft_addr", m.RaftAddr)
	return s.answerStatus(w, r)
}

func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.ClusterRemoveRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.NodeID == "" {
		return badRequest("node_id is required")
	}
	if err := checkNodeID("node_id", req.NodeID); err != nil {
		return err
	}
	if err := s.cluster.RemoveServer(r.Context(), req.NodeID); err != nil {
		return err
	}
	s.logger.Info("node removed", "node", req.NodeID)
	return s.answerStatus(w, r)
}

func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.ClusterTransferRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.To != "" {
		if err := checkNodeID("to", req.To); err != nil {
			return err
		}
	}
	if err := s.cluster.TransferLeadership(r.Context(), req.To); err != nil {
		return err
	}
	return s.answerStatus(w, r)
}

// checkNodeID refuses a node id that --node-id would not take, without
// echoing it (it may be huge or hold control characters).
func checkNodeID(field, id string) error {
	if clusterinfo.ValidNodeID(id) {
		return nil
	}
	return badRequest("%s must be a node id: %s (got %d bytes)", field, clusterinfo.NodeIDRule, len(id))
}

// keyringer is what the keyring routes need of the cluster (*cluster.Node).
type keyringer interface {
	Keyring() ([]clusterinfo.KeyInfo, error)
	KeyringChange(op string, key []byte) error
}

// The gossip keyring is each node's own (cluster/keyring.go): these routes
// read and change the keys of the node they reach; spine keyring walks
// every node.
func (s *Server) handleKeyring(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.answerKeyring(w)
}

func (s *Server) answerKeyring(w http.ResponseWriter) error {
	out := api.KeyringAnswer{NodeID: s.cluster.ID(), Keys: []api.KeyInfo{}}
	if kr, ok := s.cluster.(keyringer); ok {
		keys, err := kr.Keyring()
		if err != nil && !errors.Is(err, clusterinfo.ErrNoEncryption) {
			return err
		}
		out.Encrypted = err == nil
		for _, k := range keys {
			out.Keys = append(out.Keys, api.KeyInfo{Fingerprint: k.Fingerprint, Primary: k.Primary})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleKeyringChange(w http.ResponseWriter, r *http.Request, c *call) error {
	op := r.PathValue("op")
	if op != "install" && op != "use" && op != "remove" {
		return errorf(http.StatusNotFound, api.CodeNotFound, "no keyring operation %q (install, use or remove)", op)
	}
	body, err := s.readBody(w, r, 64<<10)
	if err != nil {
		return err
	}
	c.body, c.contentType = body, r.Header.Get("Content-Type")
	var req api.KeyringRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	key, err := clusterinfo.ParseGossipKey(req.Key)
	if err != nil {
		return badRequest("%v", err)
	}
	kr, ok := s.cluster.(keyringer)
	if !ok {
		return errorf(http.StatusConflict, api.CodeIllegalTransition, "%v", clusterinfo.ErrNoEncryption)
	}
	if err := kr.KeyringChange(op, key); err != nil {
		if errors.Is(err, clusterinfo.ErrNoEncryption) {
			return errorf(http.StatusConflict, api.CodeIllegalTransition, "%v", err)
		}
		if errors.Is(err, clusterinfo.ErrInvalidConfig) {
			return badRequest("%v", err)
		}
		return err
	}
	return s.answerKeyring(w)
}
