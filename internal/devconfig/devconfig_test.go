package devconfig

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
)

// seedExample is seed 004 §16.2's sparkq.yml, verbatim.
const seedExample = `# Project
project:
  name: my-saas-app
  repo_path: /home/user/my-project
  prd_path: docs/PRD.md

# Server
server:
  port: 8420

# Storage
database:
  path: sparkq.db
  mode: wal

# Purge settings
purge:
  older_than_days: 3

# Script indexing
script_dirs:
  - scripts
  - tools

# Task class defaults
task_classes:
  FAST_SCRIPT:
    timeout: 30
  MEDIUM_SCRIPT:
    timeout: 300
  LLM_LITE:
    timeout: 300
  LLM_HEAVY:
    timeout: 900

# Tool registry
tools:
  run-bash:
    description: Execute a bash script
    task_class: MEDIUM_SCRIPT

  run-migrations:
    description: Run database migrations
    task_class: MEDIUM_SCRIPT
    timeout: 1800

  run-python:
    description: Execute a python script
    task_class: MEDIUM_SCRIPT

  llm-haiku:
    description: Call Claude Haiku
    task_class: LLM_LITE

  llm-sonnet:
    description: Call Claude Sonnet
    task_class: LLM_HEAVY
`

// writeFile writes content to name under dir, creating directories.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadSeedExample(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "spine.yml", seedExample)
	writeFile(t, dir, "scripts/deploy.sh", "#!/bin/bash\n# name: deploy\n# tags: deploy\necho\n")
	writeFile(t, dir, "tools/lint.py", "print(1)\n")

	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := IndexScripts(dir, cfg.ScriptDirs)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Registry(scripts)
	want := api.Registry{
		Project: api.Project{Name: "my-saas-app", RepoPath: "/home/user/my-project", PRDPath: "docs/PRD.md"},
		TaskClasses: []api.TaskClass{
			{Name: "FAST_SCRIPT", Timeout: 30}, {Name: "LLM_HEAVY", Timeout: 900},
			{Name: "LLM_LITE", Timeout: 300}, {Name: "MEDIUM_SCRIPT", Timeout: 300},
		},
		Tools: []api.Tool{
			{Name: "llm-haiku", Description: "Call Claude Haiku", TaskClass: "LLM_LITE", EffectiveTimeout: 300},
			{Name: "llm-sonnet", Description: "Call Claude Sonnet", TaskClass: "LLM_HEAVY", EffectiveTimeout: 900},
			{Name: "run-bash", Description: "Execute a bash script", TaskClass: "MEDIUM_SCRIPT", EffectiveTimeout: 300},
			{Name: "run-migrations", Description: "Run database migrations", TaskClass: "MEDIUM_SCRIPT", Timeout: 1800, EffectiveTimeout: 1800},
			{Name: "run-python", Description: "Execute a python script", TaskClass: "MEDIUM_SCRIPT", EffectiveTimeout: 300},
		},
		ScriptDirs: []string{"scripts", "tools"},
		Scripts: []api.Script{
			{Path: "scripts/deploy.sh", Name: "deploy", Tags: []string{"deploy"}},
			{Path: "tools/lint.py", Name: "lint"},
		},
		PurgeOlderThanDays: 3,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("registry:\n got %+v\nwant %+v", got, want)
	}
	if cfg.Server.Port != 8420 {
		t.Errorf("port = %d, want 8420", cfg.Server.Port)
	}
}

func TestRegistryClasses(t *testing.T) {
	cfg, err := Parse([]byte(`
tools:
  t1: {task_class: CUSTOM}
  t2: {task_class: FAST_SCRIPT}
task_classes:
  FAST_SCRIPT: {timeout: 60}
  CUSTOM: {timeout: 5}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := cfg.Registry(nil)
	wantClasses := []api.TaskClass{
		{Name: "CUSTOM", Timeout: 5}, {Name: "FAST_SCRIPT", Timeout: 60}, {Name: "LLM_HEAVY", Timeout: 900},
		{Name: "LLM_LITE", Timeout: 300}, {Name: "MEDIUM_SCRIPT", Timeout: 300},
	}
	if !reflect.DeepEqual(reg.TaskClasses, wantClasses) {
		t.Errorf("classes = %+v", reg.TaskClasses)
	}
	if reg.Tools[0].EffectiveTimeout != 5 || reg.Tools[1].EffectiveTimeout != 60 {
		t.Errorf("tools = %+v", reg.Tools)
	}
	if reg.PurgeOlderThanDays != DefaultPurgeDays || reg.Scripts == nil || reg.ScriptDirs == nil {
		t.Errorf("defaults: %+v", reg)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		line int
		msg  string
	}{
		{"unknown top-level key", "project:\n  name: x\ntoolz:\n  a: {}\n", 3,
			`unknown top-level key "toolz" (known: database, project, purge, script_dirs, server, task_classes, tools)`},
		{"unknown project key", "project:\n  nme: x\n", 2, `project: unknown key "nme"`},
		{"unknown tool key", "tools:\n  a:\n    task_class: FAST_SCRIPT\n    timout: 3\n", 4, `tool "a": unknown key "timout"`},
		{"invalid yaml", "project:\n  name: x\n  repo_path: a: b\n", 3, "invalid YAML: mapping values are not allowed"},
		{"tab indentation", "server:\n  port: 1\nproject:\n\tname: x\n", 4, "invalid YAML: found character that cannot start any token"},
		{"unknown task class", "tools:\n  run-x:\n    description: d\n    task_class: FAST\n", 4,
			`tool "run-x": unknown task class "FAST" (known: FAST_SCRIPT, LLM_HEAVY, LLM_LITE, MEDIUM_SCRIPT)`},
		{"unknown class lists file classes", "task_classes:\n  BIG: {timeout: 9}\ntools:\n  a: {task_class: SMALL}\n", 4,
			`unknown task class "SMALL" (known: BIG, FAST_SCRIPT,`},
		{"tool without task_class", "tools:\n  a:\n    description: d\n", 2, `tool "a": task_class is required`},
		{"tool with empty value", "tools:\n  a:\n", 2, `tool "a": task_class is required`},
		{"tool with empty task_class", "tools:\n  a:\n    task_class: \"\"\n", 3, `tool "a": task_class is required`},
		{"task_class a list", "tools:\n  a:\n    task_class: [A, B]\n", 3, `tool "a": task_class: want a string, not a list`},
		{"negative tool timeout", "tools:\n  a:\n    task_class: LLM_LITE\n    timeout: -1\n", 4, `tool "a": timeout must be >= 0`},
		{"tool timeout not a number", "tools:\n  a:\n    task_class: LLM_LITE\n    timeout: 5m\n", 4, `tool "a": timeout: want a whole number, not "5m"`},
		{"empty tool name", "tools:\n  \"\": {task_class: LLM_LITE}\n", 2, "tools: a tool has an empty name"},
		{"duplicate tool", "tools:\n  a: {task_class: LLM_LITE}\n  a: {task_class: LLM_HEAVY}\n", 3, `tools: "a" is given twice (first on line 2)`},
		{"class timeout zero", "task_classes:\n  FAST_SCRIPT:\n    timeout: 0\n", 3, `task class "FAST_SCRIPT": timeout must be > 0`},
		{"class timeout negative", "task_classes:\n  X:\n    timeout: -5\n", 3, `task class "X": timeout must be > 0`},
		{"class timeout missing", "task_classes:\n  X: {}\n", 2, `task class "X": timeout is required`},
		{"class timeout float", "task_classes:\n  X:\n    timeout: 1.5\n", 3, "want a whole number"},
		{"empty class name", "task_classes:\n  \"\": {timeout: 3}\n", 2, "task class has an empty name"},
		{"negative purge", "purge:\n  older_than_days: -1\n", 2, "purge.older_than_days: must be a number of days from 0 to 3650, got -1"},
		{"purge past ten years", "purge:\n  older_than_days: 3651\n", 2, "purge.older_than_days: must be a number of days from 0 to 3650, got 3651"},
		{"bad port", "server:\n  port: 70000\n", 2, "server.port: 70000 is not a port"},
		{"section not a mapping", "project: my-app\n", 1, `project: want a mapping, not "my-app"`},
		{"script_dirs not a list", "script_dirs: scripts\n", 1, "script_dirs: want a list"},
		{"empty script dir", "script_dirs:\n  - scripts\n  - \"\"\n", 3, "script_dirs: an entry is empty"},
		{"repeated script dir", "script_dirs:\n  - scripts\n  - scripts\n", 3, `"scripts" is listed twice (first on line 2)`},
		{"top level a list", "- a\n- b\n", 1, "the top level must be a mapping"},
		{"two documents", "project: {name: a}\n---\nproject: {name: b}\n", 2, "only one YAML document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "spine.yml", tc.yml)
			_, err := Load(path)
			if err == nil {
				t.Fatal("no error")
			}
			prefix := path + ":" + strconv.Itoa(tc.line) + ": "
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q\nwant prefix %q containing %q", err, prefix, tc.msg)
			}
			var e *Error
			if !errors.As(err, &e) || e.Line != tc.line || e.File != path {
				t.Errorf("error %#v: want *Error at %s:%d", err, path, tc.line)
			}
			// Parse names the line alone.
			_, err = Parse([]byte(tc.yml))
			if err == nil || !strings.HasPrefix(err.Error(), "line "+strconv.Itoa(tc.line)+": ") {
				t.Errorf("Parse error %q: want it to start with line %d", err, tc.line)
			}
		})
	}
}

func TestSeveralErrorsInLineOrder(t *testing.T) {
	_, err := Parse([]byte("tools:\n  a: {task_class: NOPE}\npurge:\n  older_than_days: -2\nbogus: 1\n"))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "line 2: ") || !strings.HasPrefix(lines[1], "line 4: ") || !strings.HasPrefix(lines[2], "line 5: ") {
		t.Errorf("error:\n%s", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spine.yml")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v: want it to name %s", err, path)
	}
}

func TestParseEmptyAndAliases(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n", "tools:\ntask_classes: ~\nscript_dirs:\n"} {
		cfg, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if cfg.Tools == nil || cfg.TaskClasses == nil || cfg.ScriptDirs == nil {
			t.Errorf("%q: nil collections in %+v", doc, cfg)
		}
	}
	cfg, err := Parse([]byte("tools:\n  a: &t {task_class: LLM_LITE, timeout: 7}\n  b: *t\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools["b"] != (Tool{TaskClass: "LLM_LITE", Timeout: 7}) {
		t.Errorf("alias: %+v", cfg.Tools)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	seed, err := Parse([]byte(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	tricky := DefaultConfig("odd: name # not a comment")
	tricky.Project.RepoPath = "/srv/with space/'quoted'"
	tricky.Project.PRDPath = "docs/\"PRD\".md"
	tricky.ScriptDirs = []string{"scripts", "- dash", "null", "yes", " padded "}
	tricky.TaskClasses["NIGHTLY"] = TaskClass{Timeout: 7200}
	tricky.TaskClasses["LLM_LITE"] = TaskClass{Timeout: 120}
	tricky.Tools["run: bash"] = Tool{Description: "line one\nline two\ttabbed", TaskClass: "NIGHTLY", Timeout: 10}
	tricky.Tools["true"] = Tool{Description: "#hash, {braces} [brackets] ünïcode", TaskClass: "FAST_SCRIPT"}
	tricky.Server.Port = 0
	tricky.Purge.OlderThanDays = 0

	for name, cfg := range map[string]*Config{
		"default": DefaultConfig("my-project"),
		"seed":    seed,
		"tricky":  tricky,
		"empty":   {ScriptDirs: []string{}, TaskClasses: map[string]TaskClass{}, Tools: map[string]Tool{}},
	} {
		t.Run(name, func(t *testing.T) {
			data, err := cfg.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, t.TempDir(), "spine.yml", string(data))
			back, err := Load(path)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if !reflect.DeepEqual(back, cfg) {
				t.Errorf("round trip:\n got %+v\nwant %+v\n%s", back, cfg, data)
			}
			if !strings.HasPrefix(string(data), "# spine.yml") {
				t.Errorf("no header:\n%s", data)
			}
		})
	}
}

func TestMarshalDefaultLayout(t *testing.T) {
	data, err := DefaultConfig("demo").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	order := []string{"project:", "  name: demo", "server:", "  port: 36725", "purge:", "  older_than_days: 3",
		"script_dirs: []", "task_classes:", "  FAST_SCRIPT:", "  MEDIUM_SCRIPT:", "  LLM_LITE:", "  LLM_HEAVY:", "tools: {}"}
	at := 0
	for _, s := range order {
		i := strings.Index(text[at:], s+"\n")
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", s, text)
		}
		at += i + len(s)
	}
}

func TestMarshalRefusesInvalid(t *testing.T) {
	cfg := DefaultConfig("p")
	cfg.Tools["x"] = Tool{TaskClass: "NOPE"}
	if _, err := cfg.Marshal(); err == nil || !strings.Contains(err.Error(), `unknown task class "NOPE"`) {
		t.Errorf("error %v", err)
	}
}
