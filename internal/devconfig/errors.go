package devconfig

import (
	"fmt"
	"regexp"
	"strconv"
)

// Error is a problem found in a spine.yml, with the file (for Load) and
// the 1-based line it is on (0 when unknown). A Parse or Load that finds
// several returns them joined (errors.Join), in line order.
type Error struct {
	File string
	Line int
	Msg  string
}

// Error formats the problem as file:line: message.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// yamlLine matches the line yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a yaml.v3 error into an Error naming its line.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: "invalid YAML: " + m[2]}
	}
	if len(msg) > 6 && msg[:6] == "yaml: " {
		msg = msg[6:]
	}
	return &Error{File: file, Msg: "invalid YAML: " + msg}
}
