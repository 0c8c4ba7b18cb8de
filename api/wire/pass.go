package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Passing a request through: a node that forwards a request it read from a
// frame to another node over a connection of this package (a follower
// relaying a client's mux request to its leader) sends the frame it read,
// with only its header fields adjusted, and hands the answer frame back to
// its caller the same way: no header map, request or response is built or
// encoded again for the trip. What arrives is what the decode-and-encode
// round would have sent: the same method, URI, header fields (hop-by-hop
// ones left out), body and status.

// RequestFrame returns the whole payload of the request frame a request's
// body was decoded from, as received; ok is false for any other body.
func RequestFrame(body io.Reader) (p []byte, ok bool) {
	if rb, ok := body.(*frameBody); ok && rb.frame != nil {
		return rb.frame, true
	}
	return nil, false
}

// forEachField walks the header fields of f (count, then name/value
// pairs), calling fn with each name, value and the field's encoded bytes;
// it stops at the first malformed field (f.Err).
func forEachField(f *Fields, fn func(name, value, raw []byte)) {
	n := f.Uvarint()
	if n > uint64(len(f.B)) {
		f.Err = errMalformed
	}
	for i := uint64(0); i < n && f.Err == nil; i++ {
		start := f.B
		k := f.Bytes()
		v := f.Bytes()
		if f.Err == nil {
			fn(k, v, start[:len(start)-len(f.B)])
		}
	}
}

// AppendForwarded appends the payload of a request frame that carries the
// request of frame p (a request frame's payload, as received) with its
// header set to value in name (a canonical name: fields of exactly that
// name are replaced, as http.Header.Set does) and without hop-by-hop
// fields. Method, URI, other fields and body are copied as they are. It
// fails only on a malformed p.
func AppendForwarded(b, p []byte, name, value string) ([]byte, error) {
	keep := func(k []byte) bool { return !HopHeaders[string(k)] && string(k) != name }
	f := Fields{B: p}
	f.Bytes()
	f.Bytes()
	head := len(p) - len(f.B) // method and URI
	kept := 0
	forEachField(&f, func(k, _, _ []byte) {
		if keep(k) {
			kept++
		}
	})
	rest := f.B
	f.Bytes() // the body (anything after it is ignored, as DecodeRequest does)
	if f.Err != nil {
		return b, f.Err
	}
	bodyField := rest[:len(rest)-len(f.B)]
	b = append(b, p[:head]...)
	b = binary.AppendUvarint(b, uint64(kept+1))
	f = Fields{B: p[head:]}
	forEachField(&f, func(k, _, raw []byte) {
		if keep(k) {
			b = append(b, raw...)
		}
	})
	b = AppendField(AppendField(b, []byte(name)), []byte(value))
	return append(b, bodyField...), nil
}

// Answer is an answer frame's payload as received, checked but not
// decoded.
type Answer struct {
	Status int
	fields []byte // the header fields: count, then name/value pairs
	Body   []byte // aliases the frame
}

// ParseAnswer checks an answer frame's payload (as DecodeResponse does)
// without decoding its header.
func ParseAnswer(p []byte) (Answer, error) {
	f := &Fields{B: p}
	status := int(f.Uvarint())
	start := f.B
	forEachField(f, func(_, _, _ []byte) {})
	fields := start[:len(start)-len(f.B)]
	body := f.Bytes()
	if f.Err != nil {
		return Answer{}, f.Err
	}
	if status < 100 || status > 999 {
		return Answer{}, fmt.Errorf("wire: bad status %d", status)
	}
	return Answer{Status: status, fields: fields, Body: body}, nil
}

// Response decodes the answer.
func (a Answer) Response() *http.Response {
	f := &Fields{B: a.fields}
	h := f.Header() // checked by ParseAnswer
	return &http.Response{
		StatusCode: a.Status, Status: strconv.Itoa(a.Status) + " " + http.StatusText(a.Status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(a.Body)), ContentLength: int64(len(a.Body)),
	}
}

// has reports whether a has a header field named k.
func (a Answer) has(k string) bool {
	found := false
	f := Fields{B: a.fields}
	forEachField(&f, func(name, _, _ []byte) { found = found || string(name) == k })
	return found
}

// AnswerPasser is the ResponseWriter of a request served from a frame: it
// can take an answer frame received from another node as its answer
// whole.
type AnswerPasser interface {
	// PassAnswer answers with a: a's status (unless one was written),
	// the writer's header fields that a has none of and those named own,
	// a's other header fields except hop-by-hop ones, and a's body. It is
	// the answer a handler writes by copying a's fields into Header() (all
	// but own), then its status and body.
	PassAnswer(a Answer, own string)
}

// PassAnswer implements AnswerPasser.
func (r *recorder) PassAnswer(a Answer, own string) {
	if r.status == 0 {
		r.status = a.Status
	}
	mine := func(k string) bool {
		if HopHeaders[k] {
			return false
		}
		return k == own || !a.has(k)
	}
	theirs := func(k []byte) bool {
		return !HopHeaders[string(k)] && string(k) != own
	}
	n := 0
	for k, vs := range r.header {
		if mine(k) {
			n += len(vs)
		}
	}
	f := Fields{B: a.fields}
	forEachField(&f, func(k, _, _ []byte) {
		if theirs(k) {
			n++
		}
	})
	b := binary.AppendUvarint(r.frame[:0], uint64(r.status))
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range r.header {
		if mine(k) {
			for _, v := range vs {
				b = AppendField(AppendField(b, []byte(k)), []byte(v))
			}
		}
	}
	f = Fields{B: a.fields}
	forEachField(&f, func(k, _, raw []byte) {
		if theirs(k) {
			b = append(b, raw...)
		}
	})
	r.frame = AppendField(b, a.Body)
	r.passed = true
}
