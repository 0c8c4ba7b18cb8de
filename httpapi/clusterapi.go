package httpapi

import (
	"net/http"
	"time"

	"github.com/spine-queue/spine/cluster"
)

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
	out := map[string]interface{}{
		"ok": true, "node_id": s.cluster.ID(), "role": role, "state": st.State,
		"leader_id": st.Leader.ID, "leader_addr": st.Leader.HTTPAddr,
		"applied_index": st.AppliedIndex, "commit_index": st.CommitIndex, "term": st.Term,
		"time":             time.Now().UTC().Format(time.RFC3339Nano),
		"claim_waiters":    qs.ClaimWaiters,
		"local_heartbeats": qs.LocalHeartbeats,
		"mux_connections":  s.muxSrv.Conns(),
		"log_batches":      st.LogBatches, "log_entries": st.LogEntries,
		"log_append_seconds": st.LogAppendSeconds, "log_writes_overlapped": st.LogWritesOverlapped,
		"hash_index": st.HashIndex, "state_hash": st.StateHash,
		"hash_checks": st.HashChecks, "hash_mismatches": st.HashMismatches,
		"lease_misses": qs.LeaseMisses,
	}
	// docs/api.md: last_contact is a time (RFC 3339), omitted if never.
	// Status reports it as an age ("0s" on the leader, "never").
	if age, err := time.ParseDuration(st.LastContact); err == nil {
		out["last_contact"] = time.Now().Add(-age).UTC().Format(time.RFC3339Nano)
	}
	if s.cfg.CPUSeconds != nil {
		out["cpu_seconds"] = s.cfg.CPUSeconds()
	}
	if s.cfg.TimerSlack != nil {
		if d := s.cfg.TimerSlack(); d >= 0 {
			out["timer_slack_ns"] = d.Nanoseconds()
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleSkill(w http.ResponseWriter, r *http.Request, c *call) error {
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	_, err := w.Write(s.cfg.SkillMD)
	return err
}

func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) answerStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request, c *call) error {
	var m cluster.Member
	if err := decode(c, &m); err != nil {
		return err
	}
	if m.ID == "" || m.RaftAddr == "" {
		return badRequest("node_id and raft_addr are required")
	}
	if err := s.cluster.AddVoter(r.Context(), m); err != nil {
		return err
	}
	s.logger.Info("node joined", "node", m.ID, "raft_addr", m.RaftAddr)
	return s.answerStatus(w, r)
}

func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		NodeID string `json:"node_id"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.NodeID == "" {
		return badRequest("node_id is required")
	}
	if err := s.cluster.RemoveServer(r.Context(), req.NodeID); err != nil {
		return err
	}
	s.logger.Info("node removed", "node", req.NodeID)
	return s.answerStatus(w, r)
}

func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		To string `json:"to"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := s.cluster.TransferLeadership(r.Context(), req.To); err != nil {
		return err
	}
	return s.answerStatus(w, r)
}
