// Package strictjson decodes small JSON request bodies strictly (unknown
// fields refused) without a new json.Decoder per body.
//
// A json.Decoder costs three allocations and a read buffer of at least
// 512 bytes, made again for every body it decodes; a server decodes one or
// two per request. A Decoder is made to read a stream of JSON values, one
// Decode each: TryDecode keeps a pool of decoders, each reading the stream of
// the bodies handed to it, so the buffer and the decoder are reused.
//
// Only the success of a decode is trusted: a body the pooled decoder does
// not decode as exactly one value (an error, something after the value, a
// value that needed more than the body) gives false and that decoder is
// dropped, and the caller decodes the body again with a new json.Decoder,
// which gives the error a caller sees, exactly as it always was.
//
// Fast goes further for the bodies every job sends: one pass of the v2
// decoder, trusted, again, only when it succeeds.
package strictjson

import (
	"encoding/json"
	"io"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
)

// maxPooled is the largest body decoded with a pooled decoder: its buffer
// grows to about twice the largest body it read, and a pooled one stays.
const maxPooled = 8 << 10

// stream is a pooled decoder's input: the body it decodes now.
type stream struct {
	body []byte
	// fed counts the bytes Read gave the decoder, over all its bodies.
	fed int64
	// ended records a Read after the body's end: the decoder needed more
	// than the body (or holds io.EOF as its error), so it is not reused.
	ended bool
}

func (s *stream) Read(p []byte) (int, error) {
	if len(s.body) == 0 {
		s.ended = true
		return 0, io.EOF
	}
	n := copy(p, s.body)
	s.body = s.body[n:]
	s.fed += int64(n)
	return n, nil
}

type decoder struct {
	in  stream
	dec *json.Decoder
}

var pool = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = json.NewDecoder(&d.in)
	d.dec.DisallowUnknownFields()
	return d
}}

// TryDecode decodes body, one JSON value with no white space around it,
// into v as json.Decoder with DisallowUnknownFields would, and reports
// whether it did. false says nothing about why: v may be partly set, and the
// caller decodes body again, with a new json.Decoder, for the outcome.
func TryDecode(body []byte, v any) bool {
	if len(body) == 0 || len(body) > maxPooled {
		return false
	}
	d := pool.Get().(*decoder)
	d.in.body, d.in.ended = body, false
	err := d.dec.Decode(v)
	// The value must have been the whole body, read without the decoder
	// asking past its end: then the decoder has nothing left over and no
	// error, as a new one would be before its first Decode.
	if err != nil || d.in.ended || len(d.in.body) > 0 || d.dec.InputOffset() != d.in.fed {
		return false
	}
	d.in.body = nil
	pool.Put(d)
	return true
}

// fastOptions: strict as the caller's decoder (no unknown member at any
// depth). Names match exactly; the others (a name in another case, a
// duplicate, text that is not UTF-8) are refused, and the caller's own
// decoder decides those.
var fastOptions = jsonv2.RejectUnknownMembers(true)

// Fast decodes body, one JSON object, into v, which must be a pointer to a
// zero value, with the encoding/json/v2 decoder (github.com/go-json-experiment/json:
// one pass, about a third of encoding/json's time and allocations on a
// worker's body), and reports whether it did. Only a success is trusted,
// and only for the types whose tests show that every body it decodes is
// decoded, to the same value, by a new json.Decoder with
// DisallowUnknownFields (TestFastMatchesStrict and its fuzz target, for
// the types httpapi hands it): where the two decoders differ, v2 refuses
// (a name matched without regard to case, a duplicate member, invalid
// UTF-8), and the caller then decodes body as it always did, into a fresh
// value, for the outcome and the error it answers.
func Fast(body []byte, v any) bool {
	return jsonv2.Unmarshal(body, v, fastOptions) == nil
}
