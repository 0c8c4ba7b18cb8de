package httpapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

func (s *Server) handleBlobPut(w http.ResponseWriter, r *http.Request, c *call) error {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		return badRequest("body must be multipart/form-data with a file field named \"file\"")
	}
	mr := multipart.NewReader(bytes.NewReader(c.body), params["boundary"])
	var data []byte
	contentType := ""
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badRequest("malformed multipart body: %v", err)
		}
		if part.FormName() != "file" {
			continue
		}
		data, err = io.ReadAll(io.LimitReader(part, s.queue.Config().MaxBlobBytes+1))
		if err != nil {
			return badRequest("malformed multipart body: %v", err)
		}
		contentType = part.Header.Get("Content-Type")
		break
	}
	if data == nil {
		return badRequest("multipart body has no field named \"file\"")
	}
	if contentType == "" || contentType == "application/octet-stream" {
		contentType = http.DetectContentType(data)
	}
	b, created, index, err := s.queue.PutBlob(r.Context(), data, contentType)
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, api.Blob{ID: b.ID, Size: b.Size, ContentType: b.ContentType})
	return nil
}

// handleBlobGet serves a blob from this node's copy. Blobs are immutable
// and content-addressed, so any copy is the copy; a node that has not yet
// applied the blob forwards the read to the leader.
func (s *Server) handleBlobGet(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	b, chunks, err := s.queue.Blob(id)
	if errors.Is(err, fsm.ErrNotFound) && !s.cluster.IsLeader() && r.Header.Get(api.HeaderForwardedBy) == "" {
		return s.forward(w, r, c, s.handleBlobGet)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", b.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(b.Size, 10))
	w.Header().Set("ETag", `"`+b.ID+`"`)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.WriteHeader(http.StatusOK)
	return chunks(func(p []byte) error {
		_, err := w.Write(p)
		return err
	})
}
