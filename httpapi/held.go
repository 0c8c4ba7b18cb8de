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
	// body holds a short answer, up to wire.ChunkSize; a longer one (a
	// page of jobs) goes on in pooled chunks, so it costs no buffer of its
	// length, while the many short answers read at once each hold only
	// their own bytes.
	body []byte
	long wire.Chunks
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
	if h.long.Len() == 0 && len(h.body)+len(p) <= wire.ChunkSize {
		h.body = append(h.body, p...)
		return len(p), nil
	}
	return h.long.Write(p)
}

// release sends what was held to w and passes on the handler's error (which
// the caller writes to w, with the headers the handler set).
func (h *heldResponse) release(w http.ResponseWriter, err error) error {
	dst := w.Header()
	for k, v := range h.header {
		dst[k] = v
	}
	if h.status == 0 {
		h.long.Free()
		return err
	}
	w.WriteHeader(h.status)
	_, werr := w.Write(h.body)
	if _, e := h.long.WriteTo(w); werr == nil {
		werr = e
	}
	if werr != nil && err == nil {
		return werr
	}
	return err
}

// drop forgets what was held.
func (h *heldResponse) drop() {
	if h != nil {
		h.long.Free()
	}
}
