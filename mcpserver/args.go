package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
)

// A tool's arguments are checked before the SDK sees them, and a refusal
// says what the caller sent wrong in the tool's own terms: "claim:
// wait_seconds must be an integer from 0 to 30, not -5". (The SDK's own
// checks answer in Go's terms: struct fields, Go types, JSON-schema paths.)
// Every integer argument has a range, declared once on its field with a
// range:"MIN,MAX" tag; the tool's JSON schema shows it as minimum and
// maximum.

// argKind is the JSON shape an argument takes.
type argKind int

const (
	argAny argKind = iota
	argInt
	argString
	argBool
	argStrings
	argObject
)

// argField is one argument of a tool.
type argField struct {
	name string
	kind argKind
	// nullable: null is the same as leaving the argument out (a pointer,
	// list or object).
	nullable bool
	required bool
	min, max int64
}

// argSpec is the arguments of a tool's input type, and its JSON schema.
type argSpec struct {
	fields []argField
	schema *jsonschema.Schema
}

// specs holds the argSpec of each input type, built once for every server
// (a node builds a server per MCP session; the shared schema is also what
// lets the SDK's schema cache find it).
var specs sync.Map // reflect.Type → *argSpec

// specOf returns In's argSpec.
func specOf[In any]() *argSpec {
	t := reflect.TypeFor[In]()
	if sp, ok := specs.Load(t); ok {
		return sp.(*argSpec)
	}
	sp, err := buildSpec(t)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: arguments of %v: %v", t, err))
	}
	v, _ := specs.LoadOrStore(t, sp)
	return v.(*argSpec)
}

func buildSpec(t reflect.Type) (*argSpec, error) {
	schema, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		return nil, err
	}
	sp := &argSpec{schema: schema}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		af := argField{name: name, required: !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero")}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			af.nullable, ft = true, ft.Elem()
		}
		switch ft.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			af.kind = argInt
			r, ok := f.Tag.Lookup("range")
			if !ok {
				return nil, fmt.Errorf("integer argument %s has no range tag", name)
			}
			lo, hi, _ := strings.Cut(r, ",")
			if af.min, err = strconv.ParseInt(lo, 10, 64); err != nil {
				return nil, fmt.Errorf("%s: range %q: %v", name, r, err)
			}
			if af.max, err = strconv.ParseInt(hi, 10, 64); err != nil || af.max < af.min {
				return nil, fmt.Errorf("%s: range %q", name, r)
			}
			if p := schema.Properties[name]; p != nil {
				p.Minimum, p.Maximum = new(float64(af.min)), new(float64(af.max))
			}
		case reflect.String:
			af.kind = argString
		case reflect.Bool:
			af.kind = argBool
		case reflect.Slice:
			if ft.Elem().Kind() != reflect.String {
				return nil, fmt.Errorf("argument %s: a list of %v", name, ft.Elem())
			}
			af.kind, af.nullable = argStrings, true
		case reflect.Map:
			af.kind, af.nullable = argObject, true
		case reflect.Interface:
			af.kind = argAny
		default:
			return nil, fmt.Errorf("argument %s of kind %v", name, ft.Kind())
		}
		sp.fields = append(sp.fields, af)
	}
	return sp, nil
}

// addTool adds a tool whose arguments are In, checked by checkArguments.
func addTool[In, Out any](s *server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	sp := specOf[In]()
	t.InputSchema = sp.schema
	s.args[t.Name] = sp
	mcp.AddTool(srv, t, h)
}

// checkArguments is the server's middleware: a tools/call whose arguments
// do not fit the tool is answered with a tool error that says which
// argument is wrong and what it takes, and never reaches the tool.
func (s *server) checkArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil {
			if sp := s.args[ctr.Params.Name]; sp != nil {
				if msg := sp.check(ctr.Params.Name, ctr.Params.Arguments); msg != "" {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
				}
			}
		}
		return next(ctx, method, req)
	}
}

// check returns why raw does not fit the tool's arguments ("" if it fits).
func (sp *argSpec) check(tool string, raw json.RawMessage) string {
	const fix = " Fix the arguments and call again."
	args := map[string]json.RawMessage{}
	if v := strings.TrimSpace(string(raw)); v != "" && v != "null" {
		if !strings.HasPrefix(v, "{") || json.Unmarshal(raw, &args) != nil {
			return fmt.Sprintf("%s refused: arguments must be a JSON object of named arguments (%s), not %s.%s",
				tool, sp.names(), api.ValueKind(raw), fix)
		}
	}
	var unknown []string
	for k := range args {
		if !slices.ContainsFunc(sp.fields, func(f argField) bool { return f.name == k }) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Sprintf("%s refused: unknown argument %s; %s takes %s.%s", tool, strings.Join(unknown, ", "), tool, sp.names(), fix)
	}
	for _, f := range sp.fields {
		v, ok := args[f.name]
		null := ok && strings.TrimSpace(string(v)) == "null"
		if !ok || (null && f.nullable) {
			if f.required {
				return fmt.Sprintf("%s refused: %s is required (%s).%s", tool, f.name, f.want(), fix)
			}
			continue
		}
		if !f.fits(v) {
			return fmt.Sprintf("%s refused: %s must be %s, not %s.%s", tool, f.name, f.want(), shown(v), fix)
		}
	}
	return ""
}

// names lists the arguments a tool takes.
func (sp *argSpec) names() string {
	if len(sp.fields) == 0 {
		return "no arguments"
	}
	n := make([]string, len(sp.fields))
	for i, f := range sp.fields {
		n[i] = f.name
	}
	return strings.Join(n, ", ")
}

// want says what the argument takes.
func (f argField) want() string {
	switch f.kind {
	case argInt:
		return fmt.Sprintf("an integer from %d to %d", f.min, f.max)
	case argString:
		return "a string"
	case argBool:
		return "true or false"
	case argStrings:
		return "a list of strings"
	case argObject:
		return "a JSON object"
	}
	return "any JSON value"
}

// fits reports whether the JSON value v is one the argument takes.
func (f argField) fits(v json.RawMessage) bool {
	s := strings.TrimSpace(string(v))
	switch f.kind {
	case argInt:
		n, err := strconv.ParseInt(s, 10, 64)
		return err == nil && n >= f.min && n <= f.max
	case argString:
		return strings.HasPrefix(s, `"`)
	case argBool:
		return s == "true" || s == "false"
	case argStrings:
		var items []json.RawMessage
		if !strings.HasPrefix(s, "[") || json.Unmarshal(v, &items) != nil {
			return false
		}
		for _, it := range items {
			if !strings.HasPrefix(strings.TrimSpace(string(it)), `"`) {
				return false
			}
		}
		return true
	case argObject:
		return strings.HasPrefix(s, "{")
	}
	return true
}

// shown is a JSON value as a refusal quotes it: short values whole, others
// by their kind.
func shown(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	if len(s) <= 40 && !strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "[") {
		return s
	}
	return api.ValueKind(v)
}
