package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// What the request wrapper checks of a request before any handler sees its
// content: that its body arrived whole, is text and is a JSON object, and
// that its query options have one of the values they allow. Each refusal
// says what is wrong in the API's terms.

// readBody reads a request's body, up to limit bytes. A body that did not
// arrive whole is the caller's fault, answered as such (never as an
// internal error): cut short or with a broken chunked encoding, 400; not
// sent within the server's read timeout, 408.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, inMemory := wire.BodyBytes(r.Body) // a request from a mux or relay frame
	if inMemory {
		if int64(len(body)) > limit {
			return nil, &http.MaxBytesError{Limit: limit}
		}
		return body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, err
	}
	// A caller that closed its side (which also ends the request's
	// context) may still read: it gets the answer, never an empty 200.
	// The error may name the connection's addresses: it goes to the debug
	// log only, and the answer says what happened in HTTP's terms.
	s.logger.Debug("request body not read", "method", r.Method, "path", r.URL.Path, "error", err)
	return nil, bodyReadError(r, len(body), err)
}

// bodyReadError is the answer to a body that could not be read (got bytes
// of it arrived).
func bodyReadError(r *http.Request, got int, err error) error {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return errorf(http.StatusRequestTimeout, api.CodeRequestTimeout,
			"the request body did not arrive within the server's read timeout (%d bytes received): send the whole body at once", got)
	}
	if slices.Contains(r.TransferEncoding, "chunked") {
		return badRequest("the request body could not be read: its chunked encoding is malformed or it ended before the last chunk (%d bytes received)", got)
	}
	if r.ContentLength > 0 {
		return badRequest("the request body ended after %d of the %d bytes its Content-Length announced", got, r.ContentLength)
	}
	return badRequest("the request body could not be read (%d bytes received)", got)
}

// flagParam reads an on/off query option (?consistent, ?stale): absent is
// off; present empty, or "true", is on; "false" is off. Any other value
// is refused.
func flagParam(q url.Values, name string) (bool, error) {
	vs, ok := q[name]
	if !ok {
		return false, nil
	}
	on := false
	for _, v := range vs {
		switch v {
		case "", "true":
			on = true
		case "false":
		default:
			return false, badRequest("?%s must be given alone (?%s), or as %s=true or %s=false, not %q", name, name, name, name, v)
		}
	}
	return on, nil
}

// queryProblem says what is wrong in a query string url.ParseQuery
// refused, without Go's wording.
func queryProblem(err error) string {
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return fmt.Sprintf("%q is not a valid %%-escape (write a literal %% as %%25)", string(ee))
	}
	if strings.Contains(err.Error(), "semicolon") {
		return "parameters are separated by &, not ;"
	}
	return "it is not name=value pairs separated by &"
}

// trimJSONSpace is b without JSON's white space (space, tab, CR, LF) on
// either side.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// nonObject names the JSON value b (trimmed, not empty) is when it is not
// an object ("null", "an array"...); "" for an object or for text that is
// not JSON (which the decoder then refuses as malformed, saying where).
func nonObject(b []byte) string {
	if b[0] == '{' || !json.Valid(b) {
		return ""
	}
	switch c := b[0]; {
	case c == '{':
		return ""
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "true or false"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return ""
}

// valueName names a JSON value as encoding/json's errors give it
// ("bool", "number -1") in the API's words.
func valueName(v string) string {
	switch kind, lit, _ := strings.Cut(v, " "); kind {
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "null":
		return "null"
	case "number":
		if lit != "" {
			return "the number " + lit
		}
		return "a number"
	}
	return "another JSON value"
}

// noFieldsIn reports whether v is a struct without fields (a route that
// takes none).
func noFieldsIn(v interface{}) bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.Kind() == reflect.Struct && t.NumField() == 0
}

// checkText refuses a body that is not UTF-8, or whose strings escape a
// lone UTF-16 surrogate (\ud800): a JSON decoder would replace either
// with U+FFFD and store a value the caller never sent. It names the field
// that holds it when it can.
func checkText(body []byte) error {
	off, escaped := badText(body)
	if off < 0 {
		return nil
	}
	what, why := "not valid UTF-8", "JSON text must be UTF-8"
	if escaped {
		what, why = `a \u escape of a lone UTF-16 surrogate`, `that is no character: escape one outside the BMP as a pair, such as \ud83d\ude00`
	}
	field, key := fieldAt(body, off)
	switch {
	case field == "" && key:
		return badRequest("a field name of the body holds %s (%s)", what, why)
	case field == "":
		return badRequest("the body holds %s at byte %d (%s)", what, off+1, why)
	case key:
		return badRequest("a field name in %q holds %s (%s)", field, what, why)
	}
	return badRequest("field %q holds %s (%s)", field, what, why)
}

// badText is the offset of the first byte of b that is not UTF-8, or of
// the first \u escape of a lone surrogate (escaped true); -1 when none.
func badText(b []byte) (off int, escaped bool) {
	if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		return -1, false // no escape to look at (the common case)
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return i, false
			}
			i += n
			continue
		}
		if c != '\\' || i+1 >= len(b) {
			i++
			continue
		}
		if b[i+1] != 'u' {
			i += 2 // an escaped character, "\\" included
			continue
		}
		r, ok := hex4(b[i+2:])
		if !ok || !utf16.IsSurrogate(r) {
			i += 2
			continue
		}
		if r < 0xdc00 && len(b) >= i+12 && b[i+6] == '\\' && b[i+7] == 'u' {
			if r2, ok := hex4(b[i+8:]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
				i += 12 // a pair
				continue
			}
		}
		return i, true
	}
	return -1, false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

// fieldAt names the field of a JSON body whose value holds byte off
// ("payload.items[2].name"), and whether off is in a field's name rather
// than its value (then field is the object that has it, "" for the body).
// field is "" when the body's JSON ends, or is malformed, before off.
func fieldAt(body []byte, off int) (field string, key bool) {
	type level struct {
		object  bool
		name    string // object: the current field's name
		index   int    // array: the current element's index
		wantKey bool   // object: the next token is a field name
	}
	var stack []*level
	path := func(n int) string {
		var sb strings.Builder
		for _, l := range stack[:n] {
			if l.object {
				if sb.Len() > 0 {
					sb.WriteByte('.')
				}
				sb.WriteString(l.name)
			} else {
				fmt.Fprintf(&sb, "[%d]", l.index)
			}
		}
		return sb.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.object {
				top.wantKey = true
			} else {
				top.index++
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		end := int(d.InputOffset())
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if name, ok := tok.(string); ok {
				if off < end {
					return path(len(stack) - 1), true
				}
				top.name, top.wantKey = name, false
				continue
			}
		}
		if off < end {
			return path(len(stack)), false
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// countingBody is a request body read as a stream (a snapshot restore):
// it counts what arrived and keeps the error that cut it short, so that a
// broken body is answered as one (bodyReadError) rather than as what the
// reader of the stream made of it.
type countingBody struct {
	r   io.Reader
	n   int
	err error
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += n
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}
