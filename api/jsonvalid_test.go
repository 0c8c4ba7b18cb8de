package api

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	``, ` `, `null`, `nul`, `nulll`, `true`, `tru`, `false`, `falsey`, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e+5`, `1E-05`, `-1.5e3`,
	`""`, `"`, `"a\"b"`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, "\"a\x01\"", "\"\xff\xfe\"", `"\/"`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : [1, 2, {"x": "<b>"}] }`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{1:2}`, `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`,
	` {"n":1} `, "\t[\n]\r", `{"a":1}{"b":2}`, `[[[]]]`, `[[[]]`, `]`, `}`, `{"a":[}]`,
	`123abc`, `"abc"x`, `[1e5,-0.0,true,false,null,"s"]`,
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("%q: %v, encoding/json says %v", c, got, want)
		}
	}
	for _, n := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			closeWith := "]"
			if open != "[" {
				closeWith = "}"
			}
			c := strings.Repeat(open, n) + "1" + strings.Repeat(closeWith, n)
			if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
				t.Errorf("depth %d of %s: %v, encoding/json says %v", n, open, got, want)
			}
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("%q: %v, encoding/json says %v", b, got, want)
		}
	})
}

// BenchmarkValidJSON: a job's payload of about 250 bytes checked by hand
// and by encoding/json.
func BenchmarkValidJSON(b *testing.B) {
	p := []byte(`{"t":1700000000000000000,"i":12345,"pad":"` + strings.Repeat("x", 200) + `"}`)
	b.Run("hand", func(b *testing.B) {
		for range b.N {
			validJSON(p)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for range b.N {
			json.Valid(p)
		}
	})
}
