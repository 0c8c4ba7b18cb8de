package devconfig

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// field is one key of a mapping and its value.
type field struct {
	key  string
	line int // the key's line
	val  *yaml.Node
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is an empty or null value.
func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// kindName names a node's kind for an error message.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// entries returns the keys of mapping n in file order, refusing non-scalar
// and repeated keys. A null n is an empty mapping.
func (p *parser) entries(n *yaml.Node, what string) []field {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%s: want a mapping, not %s", what, kindName(n))
		return nil
	}
	var out []field
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, "%s: keys must be plain names, not %s", what, kindName(k))
			continue
		}
		key := k.Value
		if k.ShortTag() == "!!null" {
			key = ""
		}
		if first, ok := seen[key]; ok {
			p.errorf(k.Line, "%s: %q is given twice (first on line %d)", what, key, first)
			continue
		}
		seen[key] = k.Line
		out = append(out, field{key: key, line: k.Line, val: v})
	}
	return out
}

// fields returns the keys of mapping n by name, refusing keys not in
// known (a sorted list). what names the mapping ("" for the top level).
func (p *parser) fields(n *yaml.Node, what string, known []string) map[string]field {
	out := map[string]field{}
	label := what
	if label == "" {
		label = "top level"
	}
	for _, f := range p.entries(n, label) {
		if !contains(known, f.key) {
			if what == "" {
				p.errorf(f.line, "unknown top-level key %q (known: %s)", f.key, strings.Join(known, ", "))
			} else {
				p.errorf(f.line, "%s: unknown key %q (known: %s)", what, f.key, strings.Join(known, ", "))
			}
			continue
		}
		out[f.key] = f
	}
	return out
}

// str reads a string value; an absent or null value is "".
func (p *parser) str(f field, what string) string {
	n := resolve(f.val)
	if isNull(n) {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n.Line, "%s: want a string, not %s", what, kindName(n))
		return ""
	}
	return n.Value
}

// integer reads an integer value; ok is false when it is absent, null or
// not an integer (the last with an error).
func (p *parser) integer(f field, what string) (v int64, ok bool) {
	n := resolve(f.val)
	if isNull(n) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		p.errorf(n.Line, "%s: want a whole number, not %s", what, kindName(n))
		return 0, false
	}
	return v, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
