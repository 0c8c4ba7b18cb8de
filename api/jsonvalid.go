package api

// validJSON reports whether b is one JSON value with only white space
// around it: json.Valid's answer for every input (strings are not checked
// for UTF-8, nesting deeper than 10,000 is refused), in one pass of plain
// loops instead of encoding/json's scanner, which calls a function per byte:
// about a third of its time on a job's payload. An answer checks every raw
// JSON value it writes (appendRaw), so this runs for every job answered
// (TestValidJSONMatchesEncodingJSON, FuzzValidJSON).
func validJSON(b []byte) bool {
	i, ok := skipValue(b, skipJSONSpace(b, 0), 0)
	return ok && skipJSONSpace(b, i) == len(b)
}

// maxDepth is encoding/json's limit on nested arrays and objects.
const maxDepth = 10000

// skipValue returns the index after the value at b[i:], and whether there
// is a well-formed one; depth is the number of arrays and objects it is in.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		return skipContainer(b, i, depth+1, c == '{')
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipWord(b, i, "true")
	case c == 'f':
		return skipWord(b, i, "false")
	case c == 'n':
		return skipWord(b, i, "null")
	}
	return i, false
}

// skipContainer: b[i] opens an object (object) or an array, the depth-th
// container the value is in. An object's member is a string, a colon and a
// value; an array's, a value.
func skipContainer(b []byte, i, depth int, object bool) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	end := byte(']')
	if object {
		end = '}'
	}
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == end {
		return i + 1, true
	}
	for {
		var ok bool
		if object {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			if i, ok = skipString(b, i); !ok {
				return i, false
			}
			if i = skipJSONSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = skipJSONSpace(b, i+1)
		}
		if i, ok = skipValue(b, i, depth); !ok {
			return i, false
		}
		if i = skipJSONSpace(b, i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case end:
			return i + 1, true
		case ',':
			i = skipJSONSpace(b, i+1)
		default:
			return i, false
		}
	}
}

func skipWord(b []byte, i int, w string) (int, bool) {
	if len(b)-i >= len(w) && string(b[i:i+len(w)]) == w {
		return i + len(w), true
	}
	return i, false
}

// skipString: b[i] is the opening quote.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber: b[i] is '-' or a digit.
func skipNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		if i++; i >= len(b) {
			return i, false
		}
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
