package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spine-queue/spine/client"
)

// Result contracts on the command line: --result-schema takes the schema
// inline (JSON) or from a file ('-': stdin), and a complete refused for its
// result lists every mismatch.

const resultSchemaUsage = "a JSON Schema (subset: type, required, properties, additionalProperties, items, " +
	"enum, const, minimum, maximum, minLength, maxLength, pattern, minItems, maxItems), inline JSON or a file ('-': stdin); " +
	"a complete whose result does not match is refused"

// readSchemaArg reads --result-schema: JSON when it starts with '{',
// else a file path ('-' for stdin). "" is none.
func readSchemaArg(env *cliEnv, v string) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return nil, nil
	case strings.HasPrefix(v, "{"):
		if !json.Valid([]byte(v)) {
			return nil, errors.New("--result-schema is not valid JSON")
		}
		return json.RawMessage(v), nil
	case v == "-":
		return readJSONArg(env, "result-schema", "-", "")
	}
	if _, err := os.Stat(v); err != nil {
		return nil, fmt.Errorf("--result-schema: neither JSON (an object) nor a readable file: %v", err)
	}
	return readJSONArg(env, "result-schema", "", v)
}

// mismatchError is a complete refused for its result, printed with every
// mismatch, one a line.
type mismatchError struct{ err error }

func (e *mismatchError) Unwrap() error { return e.err }

func (e *mismatchError) Error() string {
	var b strings.Builder
	b.WriteString(e.err.Error())
	for _, m := range client.ResultMismatches(e.err) {
		path := m.Path
		if path == "" {
			path = "(the whole result)"
		}
		fmt.Fprintf(&b, "\n  %s: expected %s, got %s", path, m.Expected, m.Got)
	}
	return b.String()
}

// withMismatches lists the mismatches of a refused complete in err.
func withMismatches(err error) error {
	if client.ResultMismatches(err) != nil {
		return &mismatchError{err: err}
	}
	return err
}

// schemaText is a result schema on one line, shortened for a table.
func schemaText(s json.RawMessage) string {
	const max = 120
	t := string(s)
	if len(t) > max {
		t = t[:max] + "…"
	}
	return t
}
