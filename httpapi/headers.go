package httpapi

import (
	"net/http"
	"strconv"

	"github.com/spine-queue/spine/api"
)

// The headers every answer carries: the node's name, the leader's, and the
// index of the state the answer reflects (docs/api.md).

func (s *Server) setLeaderHeaders(w http.ResponseWriter) {
	s.leaderHeaders(w.Header())
}

// leaderHeaders sets the headers every answer carries in h. The node's and
// the leader's names are the same for answer after answer: their value
// slices are made once per leader and shared by every answer (net/http
// only reads them; a Set or Add elsewhere replaces or grows a copy, never
// writes into one), which spares each answer three allocations.
func (s *Server) leaderHeaders(h http.Header) {
	id, addr := s.cluster.Leader()
	lh := s.leaderHdr.Load()
	if lh == nil || lh.id != id || lh.addr != addr {
		lh = &leaderHdr{id: id, addr: addr, node: []string{s.cluster.ID()}}
		if id != "" {
			lh.idV = []string{id}
		}
		if addr != "" {
			lh.addrV = []string{addr}
		}
		s.leaderHdr.Store(lh)
	}
	h[api.HeaderNode] = lh.node
	if lh.idV != nil {
		h[api.HeaderLeader] = lh.idV
	}
	if lh.addrV != nil {
		h[api.HeaderLeaderAddr] = lh.addrV
	}
	// Every answer names an index (docs/api.md): the state this node has
	// applied, unless a read or write sets a more precise one later.
	h[api.HeaderIndex] = []string{strconv.FormatUint(s.cluster.AppliedIndex(), 10)}
}

// leaderHdr is the shared header values of one leader (leaderHeaders).
type leaderHdr struct {
	id, addr         string
	node, idV, addrV []string
}

// setIndex names the state an answer reflects; 0 leaves the applied index
// setLeaderHeaders named.
func (s *Server) setIndex(w http.ResponseWriter, index uint64) {
	if index == 0 {
		return
	}
	h := w.Header()
	v := strconv.FormatUint(index, 10)
	// The slice leaderHeaders made for this answer alone is reused.
	if cur := h[api.HeaderIndex]; len(cur) == 1 {
		cur[0] = v
		return
	}
	h.Set(api.HeaderIndex, v)
}
