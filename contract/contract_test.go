package contract

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
)

const schema = `{
  "type": "object",
  "required": ["answer", "confidence", "tags"],
  "additionalProperties": false,
  "properties": {
    "answer": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "kind": {"enum": ["a", "b"]},
    "version": {"const": 2},
    "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}}
  }
}`

func mustCanonical(t *testing.T, s string) string {
	t.Helper()
	c, err := Canonical([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The canonical form is compact with sorted keys: equal schemas written
// differently are one string.
func TestCanonical(t *testing.T) {
	a := mustCanonical(t, `{"type":"object", "required":["x"]}`)
	b := mustCanonical(t, "{\n \"required\": [\"x\"],\n \"type\": \"object\"\n}")
	if a != b || a != `{"required":["x"],"type":"object"}` {
		t.Fatalf("canonical forms %s / %s", a, b)
	}
	if c := mustCanonical(t, `{"minimum": 1.50}`); c != `{"minimum":1.50}` {
		t.Fatalf("numbers as written: %s", c)
	}
}

// Every keyword outside the subset is refused, named, wherever it is;
// malformed values of the subset's keywords, non-objects and oversized
// or too deep schemas are refused too.
func TestCanonicalRefuses(t *testing.T) {
	for _, tc := range []struct{ schema, keyword, words string }{
		{`{"oneOf":[{"type":"string"}]}`, "oneOf", `"oneOf"`},
		{`{"properties":{"a":{"$ref":"#/x"}}}`, "$ref", "/properties/a"},
		{`{"items":{"format":"email"}}`, "format", "/items"},
		{`{"additionalProperties":{"allOf":[]}}`, "allOf", "/additionalProperties"},
		{`{"items":[{"type":"string"}]}`, "items", "a list of schemas"},
		{`{"type":"strin"}`, "", "at /type: value must be one of"},
		{`{"minimum":"1"}`, "", "at /minimum: got string, want number"},
		{`{"pattern":"("}`, "", "at /pattern:"},
		{`{"properties":{"a":{"maxLength":-1}}}`, "", "at /properties/a/maxLength"},
		{`[]`, "", "must be a JSON object"},
		{`true`, "", "must be a JSON object"},
		{`null`, "", "must be a JSON object"},
		{`{"type":`, "", "not valid JSON"},
		{`{"properties":` + strings.Repeat(`{"a":{"properties":`, 20) + `{}` + strings.Repeat(`}}`, 20) + `}`, "", "deeper"},
		{`{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "", "over the limit"},
	} {
		_, err := Canonical([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Fatalf("%.60s: %v", tc.schema, err)
		}
		if se.Keyword != tc.keyword || !strings.Contains(se.Message, tc.words) {
			t.Fatalf("%.60s: keyword %q message %q", tc.schema, se.Keyword, se.Message)
		}
	}
}

// A result is checked against every constraint of the subset: each
// mismatch is listed with where it is, what the schema expects and what
// the result has, in path order.
func TestCheckListsEveryMismatch(t *testing.T) {
	s := mustCanonical(t, schema)
	if ms, err := Check(s, []byte(`{"answer":"abc","confidence":0.5,"tags":["x"],"kind":"a","version":2}`)); err != nil || ms != nil {
		t.Fatalf("a matching result: %v %v", ms, err)
	}
	ms, err := Check(s, []byte(`{"answer":"ABCDEFG","confidence":1.5,"tags":[],"kind":"c","version":3,"extra":1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ResultMismatch{
		{Path: "/answer", Expected: "a string of at most 5 characters", Got: "7 characters"},
		{Path: "/answer", Expected: `a string matching "^[a-z]+$"`, Got: `"ABCDEFG"`},
		{Path: "/confidence", Expected: "a number <= 1", Got: "1.5"},
		{Path: "/extra", Expected: "no property not named in properties", Got: "present"},
		{Path: "/kind", Expected: `one of ["a","b"]`, Got: `"c"`},
		{Path: "/tags", Expected: "an array of at least 1 item", Got: "0 items"},
		{Path: "/version", Expected: "2", Got: "3"},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("mismatches\n got %+v\nwant %+v", ms, want)
	}
	ms, _ = Check(s, []byte(`{"answer":"a","confidence":-1,"tags":["x","y","z"]}`))
	want = []api.ResultMismatch{
		{Path: "/answer", Expected: "a string of at least 2 characters", Got: "1 character"},
		{Path: "/confidence", Expected: "a number >= 0", Got: "-1"},
		{Path: "/tags", Expected: "an array of at most 2 items", Got: "3 items"},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("mismatches\n got %+v\nwant %+v", ms, want)
	}
	ms, _ = Check(s, []byte(`{"tags":[1,true]}`))
	want = []api.ResultMismatch{
		{Path: "/answer", Expected: "a required property", Got: "missing"},
		{Path: "/confidence", Expected: "a required property", Got: "missing"},
		{Path: "/tags/0", Expected: "type string", Got: "type number"},
		{Path: "/tags/1", Expected: "type string", Got: "type boolean"},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("mismatches\n got %+v\nwant %+v", ms, want)
	}
	// The whole result of the wrong type, and no result at all.
	for _, r := range []string{`[1]`, ``} {
		ms, _ = Check(s, []byte(r))
		if len(ms) != 1 || ms[0].Path != "" || ms[0].Expected != "type object" {
			t.Fatalf("%q: %+v", r, ms)
		}
	}
	// integer is a whole number, whatever its form.
	is := mustCanonical(t, `{"type":"integer"}`)
	if ms, _ := Check(is, []byte(`3.0`)); ms != nil {
		t.Fatalf("3.0 as an integer: %+v", ms)
	}
	if ms, _ := Check(is, []byte(`3.5`)); len(ms) != 1 || ms[0].Got != "type number" {
		t.Fatalf("3.5 as an integer: %+v", ms)
	}
	if _, err := Check(is, []byte(`{`)); err == nil {
		t.Fatal("a result that is not JSON checked")
	}
}

// A refusal lists at most MaxMismatches, the last saying how many more.
func TestCheckBoundsTheList(t *testing.T) {
	s := mustCanonical(t, `{"type":"array","items":{"type":"string"}}`)
	ms, err := Check(s, []byte(`[`+strings.TrimSuffix(strings.Repeat("1,", 100), ",")+`]`))
	if err != nil || len(ms) != MaxMismatches || !strings.Contains(ms[len(ms)-1].Got, "37 more") {
		t.Fatalf("%d mismatches, last %+v, %v", len(ms), ms[len(ms)-1], err)
	}
}

func TestSummary(t *testing.T) {
	ms := []api.ResultMismatch{{Path: "/a", Expected: "type string", Got: "type number"}, {Path: "", Expected: "x", Got: "y"}}
	if s := Summary(ms, 200); s != "2 mismatches: /a: expected type string, got type number; the top: expected x, got y" {
		t.Fatalf("summary %q", s)
	}
	long := Summary([]api.ResultMismatch{{Path: "/é", Expected: strings.Repeat("é", 100), Got: "z"}}, 51)
	if len(long) > 51 || !strings.HasSuffix(long, "…") {
		t.Fatalf("bounded summary %q (%d bytes)", long, len(long))
	}
}

// One validation of a typical result against a cached schema.
func BenchmarkCheck(b *testing.B) {
	s, err := Canonical([]byte(schema))
	if err != nil {
		b.Fatal(err)
	}
	res := []byte(`{"answer":"abc","confidence":0.5,"tags":["x","y"],"kind":"a","version":2}`)
	b.ReportAllocs()
	for b.Loop() {
		if ms, err := Check(s, res); err != nil || ms != nil {
			b.Fatal(ms, err)
		}
	}
}

// A mismatching result: the cost of listing every mismatch.
func BenchmarkCheckMismatch(b *testing.B) {
	s, _ := Canonical([]byte(schema))
	res := []byte(`{"answer":"ABCDEFG","confidence":1.5,"tags":[],"kind":"c","version":3,"extra":1}`)
	b.ReportAllocs()
	for b.Loop() {
		if ms, _ := Check(s, res); len(ms) == 0 {
			b.Fatal("matched")
		}
	}
}

// Checks of one cached schema run at once on many requests.
func TestCheckConcurrent(t *testing.T) {
	s := mustCanonical(t, schema)
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			for range 200 {
				res := `{"answer":"abc","confidence":0.5,"tags":["x"]}`
				if i%2 == 1 {
					res = `{"answer":"ABC","tags":[]}`
				}
				ms, err := Check(s, []byte(res))
				if err != nil || (i%2 == 0) != (len(ms) == 0) {
					done <- fmt.Errorf("%s: %v %v", res, ms, err)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
