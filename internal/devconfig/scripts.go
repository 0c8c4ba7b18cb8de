package devconfig

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxScriptSize is the largest file IndexScripts reads; larger ones are
// skipped.
const MaxScriptSize = 1 << 20

// binarySniff is how much of a file is searched for a NUL byte: a file
// with one there is binary and skipped.
const binarySniff = 8 << 10

// Script is an entry of the script index: a file of a script directory
// and the metadata of its top comment block (seed 004 §11.2).
type Script struct {
	// Path is relative to the index root, with forward slashes.
	Path string
	// Name defaults to the file's base name without its extension.
	Name        string
	Description string
	Inputs      string
	Outputs     string
	// Tags is the comma-separated tags, trimmed, without empties.
	Tags []string
}

// IndexScripts indexes every file under the script directories dirs
// (relative to root unless absolute), recursively. Hidden files and
// directories (a name starting with "."), files larger than MaxScriptSize
// and binary files (a NUL byte in the first 8 KiB) are skipped; symbolic
// links are followed to files, not to directories. Each file's top comment
// block — the lines after an optional shebang that start with "#" or "//",
// up to the first other line — gives its metadata as "# key: value" lines
// with the keys name, description, inputs, outputs and tags; a file
// without any is still indexed under its path. The result is sorted by
// path, each file once. A missing directory is an error naming it.
func IndexScripts(root string, dirs []string) ([]Script, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	byPath := map[string]Script{}
	for _, dir := range dirs {
		if err := indexDir(absRoot, dir, byPath); err != nil {
			return nil, err
		}
	}
	out := make([]Script, 0, len(byPath))
	for _, p := range sortedKeys(byPath) {
		out = append(out, byPath[p])
	}
	return out, nil
}

// indexDir adds the files of one script directory to byPath.
func indexDir(absRoot, dir string, byPath map[string]Script) error {
	abs := dir
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(absRoot, dir)
	}
	info, err := os.Stat(abs)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("script dir %q: %s does not exist", dir, abs)
	case err != nil:
		return fmt.Errorf("script dir %q: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("script dir %q: %s is not a directory", dir, abs)
	}
	// Walk the directory itself even when dir is a symbolic link to it.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("script dir %q: %w", dir, err)
	}
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("script dir %q: %w", dir, err)
		}
		if p == real {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		inDir, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(absRoot, filepath.Join(abs, inDir))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, done := byPath[rel]; done {
			return nil
		}
		s, ok, err := indexFile(p, d)
		if err != nil {
			return fmt.Errorf("script dir %q: %w", dir, err)
		}
		if ok {
			s.Path = rel
			if s.Name == "" {
				base := path.Base(rel)
				s.Name = strings.TrimSuffix(base, path.Ext(base))
			}
			byPath[rel] = s
		}
		return nil
	})
}

// indexFile reads one file's metadata; ok is false for a file that is not
// indexed (not a regular file, too large, or binary).
func indexFile(p string, d fs.DirEntry) (s Script, ok bool, err error) {
	if d.Type()&fs.ModeSymlink != 0 {
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() {
			return Script{}, false, nil // dangling, or a link to a directory
		}
	} else if !d.Type().IsRegular() {
		return Script{}, false, nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return Script{}, false, err
	}
	if info.Size() > MaxScriptSize {
		return Script{}, false, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return Script{}, false, err
	}
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return Script{}, false, nil
	}
	return parseHeader(data), true, nil
}

// parseHeader reads the metadata of a file's top comment block.
func parseHeader(data []byte) Script {
	var s Script
	seen := map[string]bool{}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	started := false
	for first := true; len(data) > 0; first = false {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line := strings.TrimSpace(string(raw))
		if first && strings.HasPrefix(line, "#!") {
			continue
		}
		var text string
		switch {
		case strings.HasPrefix(line, "//"):
			text = line[2:]
		case strings.HasPrefix(line, "#"):
			text = line[1:]
		case line == "" && !started:
			continue // blank lines before the block
		default:
			return s
		}
		started = true
		key, value, ok := strings.Cut(text, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		value = strings.TrimSpace(value)
		if seen[key] {
			continue // the first one counts
		}
		switch key {
		case "name":
			s.Name = value
		case "description":
			s.Description = value
		case "inputs":
			s.Inputs = value
		case "outputs":
			s.Outputs = value
		case "tags":
			s.Tags = splitTags(value)
		default:
			continue
		}
		seen[key] = true
	}
	return s
}

// splitTags splits a comma-separated tag list, trimmed, without empties
// or repeats.
func splitTags(v string) []string {
	var tags []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if t != "" && !contains(tags, t) {
			tags = append(tags, t)
		}
	}
	return tags
}
