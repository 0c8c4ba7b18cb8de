package wire

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

// FuzzAppendForwarded: a request frame passed through with one field set
// decodes to what decoding it, setting the field and encoding it again
// gives (a forwarding node's former way): the same method, URI, body and
// header, hop-by-hop fields left out.
func FuzzAppendForwarded(f *testing.F) {
	for _, p := range requestSeeds() {
		f.Add(p)
	}
	f.Add(AppendRequest(nil, "POST", "/jobs", http.Header{"X-Spine-Forwarded-By": {"n9", "n8"}, "x-spine-forwarded-by": {"n7"}}, []byte("{}")))
	const name = "X-Spine-Forwarded-By"
	f.Fuzz(func(t *testing.T, p []byte) {
		in, err := DecodeRequest(p)
		out, ferr := AppendForwarded([]byte("prefix"), p, name, "n2")
		if err != nil {
			return // not a frame a server serves
		}
		if ferr != nil {
			t.Fatalf("a frame the server decodes was refused: %v", ferr)
		}
		if !bytes.HasPrefix(out, []byte("prefix")) {
			t.Fatal("AppendForwarded did not append")
		}
		got, err := DecodeRequest(out[len("prefix"):])
		if err != nil {
			t.Fatalf("the passed frame does not decode: %v", err)
		}
		want := withoutHop(in.Header)
		want.Set(name, "n2")
		body, _ := BodyBytes(in.Body)
		gotBody, _ := BodyBytes(got.Body)
		if got.Method != in.Method || got.RequestURI != in.RequestURI || !bytes.Equal(gotBody, body) {
			t.Fatalf("passed %s %s %q, sent %s %s %q", got.Method, got.RequestURI, gotBody, in.Method, in.RequestURI, body)
		}
		if !reflect.DeepEqual(got.Header, want) {
			t.Fatalf("passed header %v, want %v", got.Header, want)
		}
	})
}

// FuzzPassAnswer: an answer frame passed through a recorder is the answer
// a handler writes by copying the answer's header fields (all but own)
// into its header, then its status and body.
func FuzzPassAnswer(f *testing.F) {
	for _, p := range responseSeeds() {
		f.Add(p, "X-Spine-Node", "n2")
	}
	f.Add(AppendResponse(nil, 201, http.Header{"X-Spine-Node": {"n1"}, "X-Spine-Leader": {"n1"}, "Connection": {"x"}}, []byte("{}")), "X-Spine-Node", "n2")
	f.Fuzz(func(t *testing.T, p []byte, own, mine string) {
		a, err := ParseAnswer(p)
		if err != nil {
			return
		}
		mineH := http.Header{own: {mine}, "X-Spine-Leader-Addr": {"http://n1"}, "X-Spine-Index": {"3"}, "Upgrade": {"y"}}
		rec := newRecorder()
		defer rec.free()
		for k, vs := range mineH {
			rec.Header()[k] = vs
		}
		rec.PassAnswer(a, own)
		got, err := DecodeResponse(rec.encode())
		if err != nil {
			t.Fatalf("the passed answer does not decode: %v", err)
		}
		// The former way: copy the answer's fields, then the writer's own.
		ref := newRecorder()
		defer ref.free()
		resp := a.Response()
		for k, vs := range mineH {
			ref.Header()[k] = vs
		}
		for k, vs := range resp.Header {
			if !HopHeaders[k] {
				ref.Header()[k] = vs
			}
		}
		ref.Header()[own] = mineH[own]
		ref.WriteHeader(resp.StatusCode)
		_, _ = ref.Write(a.Body)
		want, err := DecodeResponse(ref.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.StatusCode != want.StatusCode || !reflect.DeepEqual(got.Header, want.Header) || got.ContentLength != want.ContentLength {
			t.Fatalf("passed %d %v (%d bytes), written %d %v (%d bytes)", got.StatusCode, got.Header, got.ContentLength,
				want.StatusCode, want.Header, want.ContentLength)
		}
	})
}
