package client

import (
	"errors"
	"strings"

	"github.com/spine-queue/spine/api"
)

// ResultMismatch is one way a result does not match its job's
// resultSchema: where (a JSON Pointer into the result, "" for all of it),
// what the schema expects there, and what the result has.
type ResultMismatch = api.ResultMismatch

// ResultMismatches returns the mismatches of a complete refused with
// result_mismatch (nil for any other error): fix the result and complete
// again with the same lease.
func ResultMismatches(err error) []ResultMismatch {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == CodeResultMismatch {
		return ae.Mismatches
	}
	return nil
}

// mismatchesText lists a refused result's mismatches on one line.
func mismatchesText(ms []ResultMismatch) string {
	var b strings.Builder
	b.WriteString("the result does not match the job's result_schema: ")
	for i, m := range ms {
		if i > 0 {
			b.WriteString("; ")
		}
		path := m.Path
		if path == "" {
			path = "(the whole result)"
		}
		b.WriteString(path + ": expected " + m.Expected + ", got " + m.Got)
	}
	return b.String()
}
