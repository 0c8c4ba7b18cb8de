package devconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// seedScript is seed 004 §11.2's example script.
const seedScript = `#!/bin/bash
# name: deploy-staging
# description: Deploys current branch to staging environment
# inputs: branch (optional, defaults to current)
# outputs: deployment URL
# tags: deploy, staging

set -e
# script body...
# name: not-this-one
`

func TestIndexScripts(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "scripts/deploy-staging.sh", seedScript)
	writeFile(t, root, "scripts/migrate.py", "#!/usr/bin/env python3\n\n# -*- coding: utf-8 -*-\n# Name: run-migrations\n#description:Runs the migrations \n# tags: db, , db,migrate \r\nimport sys\n")
	writeFile(t, root, "scripts/notes.txt", "just text\n# name: ignored\n")
	writeFile(t, root, "scripts/nested/deeper/check.go", "// name: check\n// outputs: a report\n\npackage main\n")
	writeFile(t, root, "scripts/nested/run.js", "// description: runs it\n/* name: no */\n// name: late\n")
	writeFile(t, root, "scripts/.hidden.sh", "# name: hidden\n")
	writeFile(t, root, "scripts/.git/hooks/pre-commit", "# name: hook\n")
	writeFile(t, root, "scripts/tool.bin", "#!/bin/sh\n# name: bin\n\x00\x01\x02")
	writeFile(t, root, "scripts/huge.sh", "# name: huge\n"+strings.Repeat("x", MaxScriptSize))
	writeFile(t, root, "scripts/empty", "")
	writeFile(t, root, "tools/lint.sh", "#!/bin/sh\n# name: lint\n# tags: ci\n")
	if err := os.Symlink("lint.sh", filepath.Join(root, "tools", "lint-link.sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "scripts"), filepath.Join(root, "tools", "loop")); err != nil {
		t.Fatal(err)
	}
	abs := t.TempDir()
	writeFile(t, abs, "x.sh", "# name: outside\n")

	// "scripts/nested" overlaps "scripts": each file is indexed once.
	got, err := IndexScripts(root, []string{"scripts", "tools", "scripts/nested", abs})
	if err != nil {
		t.Fatal(err)
	}
	outside, err := filepath.Rel(root, filepath.Join(abs, "x.sh"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Script{
		{Path: filepath.ToSlash(outside), Name: "outside"},
		{Path: "scripts/deploy-staging.sh", Name: "deploy-staging", Description: "Deploys current branch to staging environment",
			Inputs: "branch (optional, defaults to current)", Outputs: "deployment URL", Tags: []string{"deploy", "staging"}},
		{Path: "scripts/empty", Name: "empty"},
		{Path: "scripts/migrate.py", Name: "run-migrations", Description: "Runs the migrations", Tags: []string{"db", "migrate"}},
		{Path: "scripts/nested/deeper/check.go", Name: "check", Outputs: "a report"},
		{Path: "scripts/nested/run.js", Name: "run", Description: "runs it"},
		{Path: "scripts/notes.txt", Name: "notes"},
		{Path: "tools/lint-link.sh", Name: "lint", Tags: []string{"ci"}},
		{Path: "tools/lint.sh", Name: "lint", Tags: []string{"ci"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("index:\n got %+v\nwant %+v", got, want)
	}

	// Deterministic: the same tree indexes the same way, whatever the
	// order of the directories.
	again, err := IndexScripts(root, []string{abs, "scripts/nested", "tools", "scripts"})
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("second index: %v\n%+v", err, again)
	}
}

func TestIndexScriptsDirErrors(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "scripts/a.sh", "echo\n")
	writeFile(t, root, "file", "x")
	tests := []struct {
		dirs []string
		want string
	}{
		{[]string{"scripts", "tools"}, `script dir "tools": ` + filepath.Join(root, "tools") + " does not exist"},
		{[]string{"file"}, `script dir "file": ` + filepath.Join(root, "file") + " is not a directory"},
	}
	for _, tc := range tests {
		_, err := IndexScripts(root, tc.dirs)
		if err == nil || err.Error() != tc.want {
			t.Errorf("IndexScripts(%v) error %v, want %q", tc.dirs, err, tc.want)
		}
	}
	got, err := IndexScripts(root, nil)
	if err != nil || len(got) != 0 {
		t.Errorf("no dirs: %v %v", got, err)
	}
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name, text string
		want       Script
	}{
		{"seed", seedScript, Script{Name: "deploy-staging", Description: "Deploys current branch to staging environment",
			Inputs: "branch (optional, defaults to current)", Outputs: "deployment URL", Tags: []string{"deploy", "staging"}}},
		{"no shebang", "# name: a\n# description: b: c\n", Script{Name: "a", Description: "b: c"}},
		{"bom and crlf", "\ufeff#!/bin/sh\r\n# name: a\r\n# tags: x\r\n", Script{Name: "a", Tags: []string{"x"}}},
		{"blank line ends block", "# name: a\n\n# description: no\n", Script{Name: "a"}},
		{"code ends block", "echo\n# name: no\n", Script{}},
		{"first key wins", "# name: a\n# name: b\n", Script{Name: "a"}},
		{"prose lines", "# Deploys things.\n# Usage: deploy.sh\n# name: a\n", Script{Name: "a"}},
		{"indented comment", "  # name: a\n\t// outputs: o\n", Script{Name: "a", Outputs: "o"}},
		{"no newline", "# name: a", Script{Name: "a"}},
	}
	for _, tc := range tests {
		if got := parseHeader([]byte(tc.text)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
