// Package contract checks job results against result contracts: a job's
// resultSchema, a subset of JSON Schema (draft 2020-12) that says what a
// correct result looks like.
//
// The subset is what a worker can read at a glance and a node can check in
// microseconds: type, required, properties, additionalProperties, items,
// enum, const, minimum, maximum, minLength, maxLength, pattern, minItems and
// maxItems, plus the annotations title, description and $comment. A schema
// is checked once, when a job or a stream default carries it (Canonical),
// and stored as its canonical JSON; results are checked against it on the
// node that receives the complete (Check), with the compiled schema cached
// by content.
//
// Validation is done by github.com/santhosh-tekuri/jsonschema/v6, which
// reports every failing keyword with the place in the result it concerns;
// Check turns that into a flat list of mismatches (path, expected, got).
package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/spine-queue/spine/api"
)

// Bounds of a schema and of a refusal.
const (
	// MaxSchemaBytes caps a schema's canonical JSON.
	MaxSchemaBytes = 16 << 10
	// MaxDepth caps how deeply schemas nest (properties, items).
	MaxDepth = 16
	// MaxMismatches caps the mismatches one refusal lists; past it the
	// list ends with one saying how many more there were.
	MaxMismatches = 64
	// cacheEntries bounds the compiled schemas kept.
	cacheEntries = 512
)

// Keywords lists the keywords a schema may use, in the order the docs give
// them: the ones that constrain a result, then the annotations.
var Keywords = []string{
	"type", "required", "properties", "additionalProperties", "items",
	"enum", "const", "minimum", "maximum", "minLength", "maxLength",
	"pattern", "minItems", "maxItems",
	"title", "description", "$comment",
}

var allowed = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range Keywords {
		m[k] = true
	}
	return m
}()

// SchemaError is a schema refused: Keyword, when set, is the keyword
// outside the subset, and Path where in the schema it is.
type SchemaError struct {
	Keyword string
	Path    string
	Message string
}

func (e *SchemaError) Error() string { return e.Message }

// Canonical checks raw as a result schema and returns its canonical form:
// compact JSON with object keys sorted, so that equal schemas are equal
// strings (and are stored, cached and compiled once).
func Canonical(raw []byte) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", &SchemaError{Message: "resultSchema must be a JSON object"}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return "", &SchemaError{Message: "resultSchema is not valid JSON"}
	}
	if _, ok := v.(map[string]any); !ok {
		return "", &SchemaError{Message: "resultSchema must be a JSON object"}
	}
	if err := checkSubset(v, "", 0); err != nil {
		return "", err
	}
	b, err := json.Marshal(v) // map keys sorted, numbers as written
	if err != nil {
		return "", &SchemaError{Message: "resultSchema: " + err.Error()}
	}
	if len(b) > MaxSchemaBytes {
		return "", &SchemaError{Message: fmt.Sprintf("resultSchema takes %d bytes, over the limit of %d", len(b), MaxSchemaBytes)}
	}
	if _, err := compile(string(b)); err != nil {
		return "", err
	}
	return string(b), nil
}

// checkSubset refuses a keyword outside the subset anywhere in schema s
// (at path in the whole schema), and the forms of the subset's keywords
// this package does not take (items as a list).
func checkSubset(s any, path string, depth int) error {
	if depth > MaxDepth {
		return &SchemaError{Path: path, Message: fmt.Sprintf("resultSchema nests deeper than %d levels (at %s)", MaxDepth, orRoot(path))}
	}
	if _, ok := s.(bool); ok {
		return nil
	}
	obj, ok := s.(map[string]any)
	if !ok {
		return &SchemaError{Path: path, Message: fmt.Sprintf("resultSchema: the schema at %s must be an object or a boolean", orRoot(path))}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !allowed[k] {
			return &SchemaError{Keyword: k, Path: path, Message: fmt.Sprintf(
				"resultSchema uses the keyword %q (at %s), which result contracts do not support; supported: %s",
				k, orRoot(path), strings.Join(Keywords, ", "))}
		}
	}
	if p, ok := obj["properties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return &SchemaError{Path: path + "/properties", Message: fmt.Sprintf("resultSchema: properties (at %s) must be an object of schemas", orRoot(path))}
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := checkSubset(props[n], path+"/properties/"+escape(n), depth+1); err != nil {
				return err
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		sub, ok := obj[k]
		if !ok {
			continue
		}
		if _, list := sub.([]any); list && k == "items" {
			return &SchemaError{Keyword: "items", Path: path, Message: fmt.Sprintf("resultSchema: items (at %s) must be one schema for every item (a list of schemas is not supported)", orRoot(path))}
		}
		if err := checkSubset(sub, path+"/"+k, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func orRoot(path string) string {
	if path == "" {
		return "the top"
	}
	return path
}

// escape is a JSON Pointer reference token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// The compiled schemas, by their canonical JSON (the map hashes the
// content; the key is usually the very string the jobs share). When full
// the cache is emptied (schemas are few in practice; a burst of distinct
// ones costs a recompile each, never memory without bound).
var cache = struct {
	sync.Mutex
	m map[string]*jsonschema.Schema
}{m: map[string]*jsonschema.Schema{}}

// compile returns the compiled schema of canonical JSON s.
func compile(s string) (*jsonschema.Schema, error) {
	cache.Lock()
	sch := cache.m[s]
	cache.Unlock()
	if sch != nil {
		return sch, nil
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		return nil, &SchemaError{Message: "resultSchema is not valid JSON"}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "urn:spine:result-schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, &SchemaError{Message: "resultSchema: " + err.Error()}
	}
	sch, err = c.Compile(loc)
	if err != nil {
		return nil, &SchemaError{Message: "resultSchema is not a valid schema: " + schemaProblem(err)}
	}
	cache.Lock()
	if len(cache.m) >= cacheEntries {
		clear(cache.m)
	}
	cache.m[s] = sch
	cache.Unlock()
	return sch, nil
}

// schemaProblem words a compile error in the schema's terms: the first
// failing keyword and where.
func schemaProblem(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		err = sve.Err // the schema against the meta-schema
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		for len(ve.Causes) > 0 {
			ve = ve.Causes[0]
		}
		at := "/" + strings.Join(ve.InstanceLocation, "/")
		return fmt.Sprintf("at %s: %s", at, ve.ErrorKind.LocalizedString(printer))
	}
	return err.Error()
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("result schemas may not refer to other documents (%s)", url)
}

// Check checks result (JSON) against schema (canonical JSON, as Canonical
// returned it). It returns the mismatches, none when the result matches;
// an error only for a schema that does not compile or a result that is not
// JSON.
func Check(schema string, result []byte) ([]api.ResultMismatch, error) {
	sch, err := compile(schema)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(result)) == 0 {
		result = []byte("null") // a complete without a result
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(result))
	if err != nil {
		return nil, fmt.Errorf("result is not valid JSON: %w", err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var out []api.ResultMismatch
	flatten(ve, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if len(out) > MaxMismatches {
		more := len(out) - (MaxMismatches - 1)
		out = append(out[:MaxMismatches-1], api.ResultMismatch{Path: "", Expected: "fewer mismatches", Got: fmt.Sprintf("%d more not listed", more)})
	}
	return out, nil
}

// flatten appends the leaves of a validation error tree as mismatches.
func flatten(ve *jsonschema.ValidationError, out *[]api.ResultMismatch) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			flatten(c, out)
		}
		return
	}
	path := pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Type:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "type " + strings.Join(k.Want, " or "), Got: "type " + k.Got})
	case *kind.Required:
		for _, p := range k.Missing {
			*out = append(*out, api.ResultMismatch{Path: path + "/" + escape(p), Expected: "a required property", Got: "missing"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, api.ResultMismatch{Path: path + "/" + escape(p), Expected: "no property not named in properties", Got: "present"})
		}
	case *kind.FalseSchema:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "nothing (the schema allows no value here)", Got: "present"})
	case *kind.Enum:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "one of " + jsonText(k.Want), Got: jsonText(k.Got)})
	case *kind.Const:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: jsonText(k.Want), Got: jsonText(k.Got)})
	case *kind.Minimum:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "a number >= " + ratText(k.Want), Got: ratText(k.Got)})
	case *kind.Maximum:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "a number <= " + ratText(k.Want), Got: ratText(k.Got)})
	case *kind.MinLength:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "a string of at least " + chars(k.Want), Got: chars(k.Got)})
	case *kind.MaxLength:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "a string of at most " + chars(k.Want), Got: chars(k.Got)})
	case *kind.Pattern:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "a string matching " + strconv.Quote(k.Want), Got: jsonText(k.Got)})
	case *kind.MinItems:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "an array of at least " + items(k.Want), Got: items(k.Got)})
	case *kind.MaxItems:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: "an array of at most " + items(k.Want), Got: items(k.Got)})
	default:
		*out = append(*out, api.ResultMismatch{Path: path, Expected: strings.Join(ve.ErrorKind.KeywordPath(), "/"), Got: ve.ErrorKind.LocalizedString(printer)})
	}
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

// maxGot caps how much of a result a mismatch echoes.
const maxGot = 200

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > maxGot {
		return string(b[:maxGot]) + "…"
	}
	return string(b)
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func chars(n int) string {
	if n == 1 {
		return "1 character"
	}
	return strconv.Itoa(n) + " characters"
}

func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return strconv.Itoa(n) + " items"
}

// Summary is the mismatches in one line of at most max bytes, for a job's
// history: "3 mismatches: /a: expected type string, got type number; …".
func Summary(ms []api.ResultMismatch, max int) string {
	var b strings.Builder
	if len(ms) == 1 {
		b.WriteString("1 mismatch: ")
	} else {
		fmt.Fprintf(&b, "%d mismatches: ", len(ms))
	}
	for i, m := range ms {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: expected %s, got %s", orRoot(m.Path), m.Expected, m.Got)
		if b.Len() > max {
			break
		}
	}
	s := b.String()
	if len(s) > max {
		n := max - len("…")
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

var printer = message.NewPrinter(language.English)
