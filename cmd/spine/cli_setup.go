package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spine-queue/spine/internal/devconfig"
	"github.com/spine-queue/spine/internal/durable"
)

// setupCommand is spine setup: seed 004's Q&A (§16.1) writing spine.yml.
// Every question has a flag; a question whose flag is given, or every
// question with --yes, is not asked. Re-running offers the file's values
// as the defaults and keeps what it does not ask about (tools). A file
// without tools gets defaultTool, so `spine reload` and `spine enqueue
// run-bash …` (and the web UI's enqueue form) work right after set-up.
func setupCommand(env *cliEnv) *cobra.Command {
	var (
		path, name, repo, prd string
		dirs                  []string
		timeouts              = map[string]*int64{}
		port                  int
		yes                   bool
	)
	cmd := &cobra.Command{
		Use:     "setup",
		Short:   "Configure the project's spine.yml: questions with the current values as defaults (--yes: none)",
		GroupID: "devq",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&path, "config", devconfig.FileName, "the file to write")
	fs.StringVar(&name, "project-name", "", "project name")
	fs.StringVar(&repo, "repo-path", "", "repository path")
	fs.StringVar(&prd, "prd-path", "", "PRD file path, for the agents' context")
	fs.StringSliceVar(&dirs, "script-dir", nil, "a directory to index for scripts (repeatable)")
	classes := []string{"FAST_SCRIPT", "MEDIUM_SCRIPT", "LLM_LITE", "LLM_HEAVY"}
	for _, c := range classes {
		timeouts[c] = fs.Int64(strings.ToLower(strings.ReplaceAll(c, "_", "-"))+"-timeout", 0, c+" timeout in seconds (default: spine.yml's, else the built-in one)")
	}
	fs.IntVar(&port, "port", 0, "the HTTP port of a local cluster spine run starts")
	fs.BoolVar(&yes, "yes", false, "ask nothing: the flags, else the current values, else the defaults")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := devconfig.Load(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			wd, _ := os.Getwd()
			cfg = devconfig.DefaultConfig(filepath.Base(wd))
			cfg.Project.RepoPath = wd
		case err != nil:
			fmt.Fprintf(env.stderr, "spine: %v\n(fix it, or move it away to start over)\n", err)
			return exitCodeError(exitUsage)
		}
		q := &asker{in: bufio.NewReader(env.stdin), out: env.stdout, quiet: yes}
		fmt.Fprint(env.stdout, "Spine Setup\n===========\n\n")
		cfg.Project.Name = q.text(fs.Changed("project-name"), name, "Project name", cfg.Project.Name)
		cfg.Project.RepoPath = q.text(fs.Changed("repo-path"), repo, "Repository path", cfg.Project.RepoPath)
		cfg.Project.PRDPath = q.text(fs.Changed("prd-path"), prd, "PRD file path (for context)", cfg.Project.PRDPath)
		switch {
		case fs.Changed("script-dir"):
			cfg.ScriptDirs = dirs
		case !yes:
			fmt.Fprintf(env.stdout, "\nScript directories to index (now: %s):\n", dashList(cfg.ScriptDirs))
			var got []string
			for {
				d, ok := q.line("  Add directory (empty to finish): ")
				if !ok || d == "" {
					break
				}
				got = append(got, d)
			}
			if len(got) > 0 {
				cfg.ScriptDirs = got
			}
		}
		if !yes {
			fmt.Fprintln(env.stdout, "\nTask class defaults:")
		}
		merged := cfg.Classes()
		for _, c := range classes {
			flag := strings.ToLower(strings.ReplaceAll(c, "_", "-")) + "-timeout"
			cur := merged[c].Timeout
			v := q.number(fs.Changed(flag), *timeouts[c], "  "+c+" timeout", cur)
			if v <= 0 {
				fmt.Fprintf(env.stderr, "spine: %s timeout must be a positive number of seconds\n", c)
				return exitCodeError(exitUsage)
			}
			if cfg.TaskClasses == nil {
				cfg.TaskClasses = map[string]devconfig.TaskClass{}
			}
			cfg.TaskClasses[c] = devconfig.TaskClass{Timeout: v}
		}
		if cfg.Server.Port == 0 {
			cfg.Server.Port = devconfig.DefaultPort
		}
		p := q.number(fs.Changed("port"), int64(port), "\nServer port", int64(cfg.Server.Port))
		if p <= 0 || p > 65535 {
			fmt.Fprintln(env.stderr, "spine: the port must be between 1 and 65535")
			return exitCodeError(exitUsage)
		}
		cfg.Server.Port = int(p)
		if len(cfg.Tools) == 0 {
			cfg.Tools = map[string]devconfig.Tool{defaultToolName: defaultTool}
		}
		data, err := cfg.Marshal()
		if err != nil {
			fmt.Fprintf(env.stderr, "spine: %v\n", err)
			return exitCodeError(exitUsage)
		}
		if err := durable.WriteFile(path, data, 0o600); err != nil {
			fmt.Fprintf(env.stderr, "spine: %v\n", err)
			return exitCodeError(exitError)
		}
		fmt.Fprintf(env.stdout, "\nConfiguration saved to %s (tools: %s)\nRun 'spine reload' to put its tools in force, 'spine run' to start.\n", path, strings.Join(toolNames(cfg), ", "))
		return nil
	}
	return cmd
}

// defaultTool is the tool spine setup writes into a spine.yml that has
// none (docs/devqueue.md's first example): a worker runs the script the
// task's payload names.
const defaultToolName = "run-bash"

var defaultTool = devconfig.Tool{Description: "Execute a bash script", TaskClass: "MEDIUM_SCRIPT"}

// toolNames returns cfg's tool names, sorted.
func toolNames(cfg *devconfig.Config) []string {
	names := make([]string, 0, len(cfg.Tools))
	for n := range cfg.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// asker asks one question at a time on out and reads the answer from in;
// an empty answer takes the default.
type asker struct {
	in    *bufio.Reader
	out   io.Writer
	quiet bool
}

func (a *asker) line(prompt string) (string, bool) {
	fmt.Fprint(a.out, prompt)
	s, err := a.in.ReadString('\n')
	if err != nil && s == "" {
		fmt.Fprintln(a.out)
		return "", false
	}
	return strings.TrimSpace(s), true
}

func (a *asker) text(given bool, flag, prompt, def string) string {
	if given {
		return flag
	}
	if a.quiet {
		return def
	}
	if s, ok := a.line(fmt.Sprintf("%s [%s]: ", prompt, def)); ok && s != "" {
		return s
	}
	return def
}

func (a *asker) number(given bool, flag int64, prompt string, def int64) int64 {
	if given {
		return flag
	}
	if a.quiet {
		return def
	}
	for {
		s, ok := a.line(fmt.Sprintf("%s [%d]: ", prompt, def))
		if !ok || s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			return n
		}
		fmt.Fprintln(a.out, "  (a whole number, please)")
	}
}

func dashList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
