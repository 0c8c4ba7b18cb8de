package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spine-queue/spine/api/wire"
)

// A held answer is released as written, short (held in its own bytes) or
// long (the rest in pooled chunks), with the handler's status and headers.
func TestHeldAnswerIsReleasedAsWritten(t *testing.T) {
	for _, size := range []int{0, 10, wire.ChunkSize, wire.ChunkSize + 1, 5*wire.ChunkSize + 7} {
		h := newHeldResponse()
		h.Header().Set("X-Spine-Index", "7")
		h.WriteHeader(http.StatusAccepted)
		body := make([]byte, size)
		for i := range body {
			body[i] = byte('a' + i%23)
		}
		for p := body; len(p) > 0; {
			n := min(len(p), 1000)
			_, _ = h.Write(p[:n])
			p = p[n:]
		}
		if long := size > wire.ChunkSize; (h.long.Len() > 0) != long || len(h.body) > wire.ChunkSize {
			t.Fatalf("%d bytes: %d held short, %d in chunks", size, len(h.body), h.long.Len())
		}
		w := httptest.NewRecorder()
		if err := h.release(w, nil); err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusAccepted || w.Header().Get("X-Spine-Index") != "7" || !bytes.Equal(w.Body.Bytes(), body) {
			t.Fatalf("%d bytes: released %d, %v, %d bytes", size, w.Code, w.Header(), w.Body.Len())
		}
		if h.long.Len() != 0 {
			t.Fatalf("%d bytes: chunks kept after release", size)
		}
	}
}
