package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spine-queue/spine/internal/devconfig"
)

func runSetup(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return cliRun(t, nil, stdin, "setup", args...)
}

// spine setup asks the seed's questions (or takes flags), writes spine.yml
// with a run-bash tool (so `spine enqueue run-bash` works after `spine
// reload`), and offers the file's values as defaults when run again,
// keeping the tools it does not ask about.
func TestSetupWritesAndReoffers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spine.yml")
	answers := "myproj\n/src/myproj\ndocs/PRD.md\nscripts\ntools\n\n45\n\n\n\n\n"
	code, out, errOut := runSetup(t, answers, "--config", path)
	if code != exitOK || !strings.Contains(out, "Configuration saved to") {
		t.Fatalf("exit %d out %q err %q", code, out, errOut)
	}
	cfg, err := devconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Project.Name != "myproj" || cfg.Project.RepoPath != "/src/myproj" || cfg.Project.PRDPath != "docs/PRD.md" ||
		strings.Join(cfg.ScriptDirs, ",") != "scripts,tools" || cfg.TaskClasses["FAST_SCRIPT"].Timeout != 45 ||
		cfg.TaskClasses["LLM_HEAVY"].Timeout != 900 || cfg.Server.Port != devconfig.DefaultPort {
		t.Fatalf("written config: %+v", cfg)
	}
	if len(cfg.Tools) != 1 || cfg.Tools["run-bash"].TaskClass != "MEDIUM_SCRIPT" || !strings.Contains(out, "(tools: run-bash)") {
		t.Fatalf("the first set-up wrote tools %+v, want run-bash; said %q", cfg.Tools, out)
	}

	// The tools edited by hand survive (run-bash is not put back); the
	// second run offers the first's answers.
	data, _ := os.ReadFile(path)
	edited := strings.Replace(string(data), "run-bash:", "lint:", 1)
	if edited == string(data) {
		t.Fatalf("no run-bash tool to edit in:\n%s", data)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runSetup(t, strings.Repeat("\n", 12), "--config", path)
	if code != exitOK || !strings.Contains(out, "Project name [myproj]") || !strings.Contains(out, "FAST_SCRIPT timeout [45]") {
		t.Fatalf("second run: exit %d out %q", code, out)
	}
	cfg, err = devconfig.Load(path)
	if err != nil || len(cfg.Tools) != 1 || cfg.Tools["lint"].TaskClass != "MEDIUM_SCRIPT" || cfg.Project.Name != "myproj" {
		t.Fatalf("after the second run: %+v %v", cfg, err)
	}

	// Without a terminal: flags and --yes, no questions.
	code, out, _ = runSetup(t, "", "--config", path, "--yes", "--project-name", "renamed", "--llm-heavy-timeout", "1200", "--script-dir", "bin")
	if code != exitOK || strings.Contains(out, "[") {
		t.Fatalf("--yes: exit %d out %q", code, out)
	}
	cfg, _ = devconfig.Load(path)
	if cfg.Project.Name != "renamed" || cfg.TaskClasses["LLM_HEAVY"].Timeout != 1200 || strings.Join(cfg.ScriptDirs, ",") != "bin" ||
		cfg.TaskClasses["FAST_SCRIPT"].Timeout != 45 {
		t.Fatalf("after --yes: %+v", cfg)
	}
	if code, _, errOut := runSetup(t, "", "--config", path, "--yes", "--port", "70000"); code != exitUsage || !strings.Contains(errOut, "port") {
		t.Fatalf("bad port: exit %d err %q", code, errOut)
	}
}
