package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpRoot is the whole command tree as spine --help shows it, cobra's
// help and completion commands included.
func helpRoot() *cobra.Command {
	root := newRoot(&cliEnv{ctx: context.Background(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
		getenv: func(string) string { return "" }})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

func walkCommands(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, fn)
	}
}

// Every command, hidden ones too, has a one-line summary; every flag has a
// usage string; a command that takes positional arguments names them in
// its usage line.
func TestEveryCommandHasSummaryAndEveryFlagUsage(t *testing.T) {
	n := 0
	walkCommands(helpRoot(), func(c *cobra.Command) {
		n++
		path := c.CommandPath()
		if strings.TrimSpace(c.Short) == "" {
			t.Errorf("%s: no Short summary", path)
		}
		if strings.Contains(c.Short, "\n") {
			t.Errorf("%s: Short summary is more than one line: %q", path, c.Short)
		}
		check := func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("%s: flag --%s has no usage string", path, f.Name)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		if c.Args != nil && c.Args(c, []string{"x"}) == nil && len(strings.Fields(c.Use)) < 2 {
			t.Errorf("%s takes arguments but its usage line %q names none", path, c.Use)
		}
	})
	if n < 60 {
		t.Fatalf("walked only %d commands", n)
	}
}

// shellWords splits a command line as a shell would, for the quoting the
// examples use ('…' and "…").
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// Every example names a command that exists, is shown under that
// command, and uses only flags it has with an argument count it accepts.
func TestHelpExamplesParse(t *testing.T) {
	root := helpRoot()
	for path, ex := range examples {
		args := strings.Fields(path)[1:]
		c, rest, err := root.Find(args)
		if err != nil || len(rest) != 0 || c.CommandPath() != path {
			t.Errorf("examples[%q]: no such command", path)
			continue
		}
		if !strings.Contains(c.Example, strings.Split(ex, "\n")[0]) {
			t.Errorf("%s: the example is not in its help", path)
		}
		for _, line := range strings.Split(ex, "\n") {
			if i := strings.LastIndex(line, "| "); i >= 0 {
				line = line[i+2:]
			}
			words := shellWords(line)
			if len(words) == 0 || words[0] != "spine" {
				t.Errorf("%s: example %q does not start with spine", path, line)
				continue
			}
			fresh := helpRoot()
			c, rest, err := fresh.Find(words[1:])
			if err != nil || c.CommandPath() != path {
				t.Errorf("%s: example %q runs %v (%v)", path, line, c.CommandPath(), err)
				continue
			}
			if c.DisableFlagParsing {
				continue // spine serve parses its own flags (serve_test.go)
			}
			if err := c.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", path, line, err)
				continue
			}
			if err := c.ValidateArgs(c.Flags().Args()); err != nil {
				t.Errorf("%s: example %q: %v", path, line, err)
			}
		}
	}
}
