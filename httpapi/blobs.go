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
	h := w.Header()
	ct, inline := blobType(b.ContentType)
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(b.Size, 10))
	h.Set("ETag", `"`+b.ID+`"`)
	// Immutable, but reading it takes a token: no shared cache may keep it.
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	// Anyone with a token uploads any bytes under any type: a browser must
	// never run them as a page of this origin.
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if !inline {
		h.Set("Content-Disposition", "attachment")
	}
	w.WriteHeader(http.StatusOK)
	return chunks(func(p []byte) error {
		_, err := w.Write(p)
		return err
	})
}

// inlineBlobTypes are the media types a blob is served inline as: types a
// browser displays and never runs. Every other type (HTML, SVG, XML,
// JavaScript, PDF, anything unknown) is served as an attachment, which a
// browser saves rather than opens.
var inlineBlobTypes = map[string]bool{
	"text/plain": true, "text/csv": true, "application/json": true, "application/octet-stream": true,
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/avif": true, "image/bmp": true,
	"audio/mpeg": true, "audio/ogg": true, "audio/wav": true, "video/mp4": true, "video/webm": true, "video/ogg": true,
}

// blobType returns the Content-Type a blob stored with type ct is served
// with, and whether it is served inline. A type that does not parse is
// served as application/octet-stream.
func blobType(ct string) (string, bool) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "application/octet-stream", false
	}
	return ct, inlineBlobTypes[mt]
}
