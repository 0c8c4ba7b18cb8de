package httpapi

import (
	"net/http"

	"github.com/spine-queue/spine/api/wire"
)

// heldResponse holds an answer back until the server knows it may send it:
// a default read is written here, then released only if the node still
// held its read lease after reading (serveRead).
type heldResponse struct {
	header http.Header
	status int
	// body is held in pooled chunks: a long answer (a page of jobs) costs
	// no buffer of its length, and a short one no buffer at all.
	body wire.Chunks
}

func newHeldResponse() *heldResponse { return &heldResponse{header: http.Header{}} }

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldResponse) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return h.body.Write(p)
}

// release sends what was held to w and passes on the handler's error (which
// the caller writes to w, with the headers the handler set).
func (h *heldResponse) release(w http.ResponseWriter, err error) error {
	dst := w.Header()
	for k, v := range h.header {
		dst[k] = v
	}
	if h.status == 0 {
		h.body.Free()
		return err
	}
	w.WriteHeader(h.status)
	if _, werr := h.body.WriteTo(w); werr != nil && err == nil {
		return werr
	}
	return err
}

// drop forgets what was held.
func (h *heldResponse) drop() {
	if h != nil {
		h.body.Free()
	}
}
