package devconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets for what this package reads from files a user (or a
// checkout) provides: spine.yml (Parse) and the top comment block of every
// script in the script directories (parseHeader). `make fuzz` runs each
// for a fixed time; `make test` runs their seeds.

// configErrors checks that err is what Parse documents: one *Error, or
// several joined, each with a message.
func configErrors(t *testing.T, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) || ce.Msg == "" {
			t.Fatalf("error %T %q is not a *devconfig.Error with a message", e, e)
		}
	}
}

// FuzzParse: any bytes parse to a configuration or fail with errors that
// say what and where, never a panic; a configuration that parses writes
// (Marshal) a spine.yml that parses back to the same configuration.
func FuzzParse(f *testing.F) {
	f.Add([]byte(seedExample))
	if def, err := DefaultConfig("my-app").Marshal(); err == nil {
		f.Add(def)
	}
	f.Add([]byte(""))
	f.Add([]byte("project: {name: x}\n---\nproject: {}\n"))
	f.Add([]byte("tools:\n  t: &a {task_class: LLM_LITE, timeout: -1}\n  u: *a\nscript_dirs: [a, a, '']\n"))
	f.Add([]byte("server:\n  port: 0x10000\npurge: {older_than_days: 1e3}\ntask_classes: {\"\": {timeout: 1}}\n"))
	f.Add([]byte("project:\n  name: \"yes\"\n  repo_path: \" spaced \"\n  prd_path: \"tab\\there\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			configErrors(t, err)
			return
		}
		out, err := cfg.Marshal()
		if err != nil {
			t.Fatalf("a parsed configuration does not marshal: %v\n%+v", err, cfg)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Marshal wrote what Parse refuses: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("round trip:\n%+v\n%+v\n%s", cfg, back, out)
		}
	})
}

// FuzzMarshal: a configuration built in Go (what `spine setup` writes)
// either is refused by Marshal or is written so that Parse reads back the
// same configuration, whatever its strings hold (quotes, colons, leading
// spaces, YAML keywords, newlines, invalid UTF-8).
func FuzzMarshal(f *testing.F) {
	f.Add("my-app", "/home/u/p", "docs/PRD.md", "scripts", "CUSTOM", int64(60), "run-bash", "Runs bash", "MEDIUM_SCRIPT", int64(0), 8420, 3)
	f.Add("yes", "- x", "#c", "a: b", "null", int64(1), "~", "'q'", "FAST_SCRIPT", int64(5), 0, 0)
	f.Add(" lead", "trail ", "tab\there", "new\nline", "&anchor", int64(1<<40), "*alias", "{x: y}", "LLM_HEAVY", int64(-1), 65535, 1<<20)
	f.Add("\xff\xfe", "\u2028", "\x00", "%TAG", "0x10", int64(1), "true", "", "CUSTOM", int64(0), 1, 1)
	f.Fuzz(func(t *testing.T, name, repo, prd, dir, class string, classTimeout int64, tool, desc, toolClass string, toolTimeout int64, port, days int) {
		cfg := &Config{
			Project:     Project{Name: name, RepoPath: repo, PRDPath: prd},
			Server:      Server{Port: port},
			Purge:       Purge{OlderThanDays: days},
			ScriptDirs:  []string{},
			TaskClasses: map[string]TaskClass{},
			Tools:       map[string]Tool{},
		}
		if dir != "" {
			cfg.ScriptDirs = append(cfg.ScriptDirs, dir)
		}
		if class != "" {
			cfg.TaskClasses[class] = TaskClass{Timeout: classTimeout}
		}
		if tool != "" {
			cfg.Tools[tool] = Tool{Description: desc, TaskClass: toolClass, Timeout: toolTimeout}
		}
		out, err := cfg.Marshal()
		if err != nil {
			return // refused: Parse would refuse it too
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Marshal wrote what Parse refuses: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("round trip:\n%#v\n%#v\n%s", cfg, back, out)
		}
	})
}

// renderHeader writes s as a script's top comment block.
func renderHeader(s Script) string {
	var b strings.Builder
	for _, kv := range [][2]string{{"name", s.Name}, {"description", s.Description}, {"inputs", s.Inputs}, {"outputs", s.Outputs},
		{"tags", strings.Join(s.Tags, ", ")}} {
		if kv[1] != "" {
			b.WriteString("# " + kv[0] + ": " + kv[1] + "\n")
		}
	}
	return b.String()
}

// FuzzParseHeader: any file's bytes give script metadata, never a panic:
// every value one trimmed line, tags trimmed, non-empty, without commas or
// repeats; and the metadata written back as a comment block reads back the
// same.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(seedScript))
	f.Add([]byte("\xef\xbb\xbf#!/usr/bin/env python3\n\n# -*- coding: utf-8 -*-\n# Name: run-migrations\n#description:Runs the migrations \n# tags: db, , db,migrate \r\nimport sys\n"))
	f.Add([]byte("// name: check\n// outputs: a report\n\npackage main\n"))
	f.Add([]byte("// description: runs it\n/* name: no */\n// name: late\n"))
	f.Add([]byte("#name:\n# NAME: second\n# tags: ,,\n#:\n#"))
	f.Add([]byte("#!\n#!/bin/sh\n# inputs: a: b: c\x00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := parseHeader(data)
		for _, v := range []string{s.Name, s.Description, s.Inputs, s.Outputs} {
			if strings.ContainsAny(v, "\n") || strings.TrimSpace(v) != v {
				t.Fatalf("value %q is not one trimmed line", v)
			}
		}
		seen := map[string]bool{}
		for _, tag := range s.Tags {
			if tag == "" || strings.TrimSpace(tag) != tag || strings.ContainsAny(tag, ",\n") || seen[tag] {
				t.Fatalf("tags %q: empty, untrimmed, with a comma or repeated", s.Tags)
			}
			seen[tag] = true
		}
		if back := parseHeader([]byte(renderHeader(s))); !reflect.DeepEqual(back, s) {
			t.Fatalf("written back and read again:\n%#v\n%#v", s, back)
		}
	})
}

// A string that is not UTF-8 (a path on a filesystem that allows any
// bytes) is refused, not written as other characters that read back as
// another path (found by FuzzMarshal).
func TestMarshalRefusesInvalidUTF8(t *testing.T) {
	cfg := DefaultConfig("app")
	cfg.Project.PRDPath = "docs/\xb9.md"
	if out, err := cfg.Marshal(); err == nil {
		t.Fatalf("marshalled:\n%s", out)
	}
	cfg.Project.PRDPath = "docs/¹.md"
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(out); err != nil || back.Project.PRDPath != "docs/¹.md" {
		t.Fatalf("read back %q: %v", back.Project.PRDPath, err)
	}
}
