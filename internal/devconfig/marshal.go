package devconfig

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// header opens every spine.yml Marshal writes.
const header = `# spine.yml: the developer queue's project configuration (written by
# spine setup). Edit it and run 'spine reload' to put it in force.
`

// Marshal writes c as a spine.yml in the seed's layout: commented sections
// for the project, server, purge settings, script directories, task
// classes and tools. Task classes come in the seed's order (defaults
// first), tools by name. Parse reads the result back to an equal Config;
// a Config Parse would refuse (a tool without a known task class, a
// class without a positive timeout...) is an error.
func (c *Config) Marshal() ([]byte, error) {
	if err := c.checkUTF8(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(header)

	b.WriteString("\n# Project\nproject:\n")
	fmt.Fprintf(&b, "  name: %s\n", scalar(c.Project.Name))
	fmt.Fprintf(&b, "  repo_path: %s\n", scalar(c.Project.RepoPath))
	fmt.Fprintf(&b, "  prd_path: %s\n", scalar(c.Project.PRDPath))

	if c.Server.Port != 0 {
		fmt.Fprintf(&b, "\n# Server\nserver:\n  port: %d\n", c.Server.Port)
	}

	fmt.Fprintf(&b, "\n# Purge settings: finished tasks older than this are deleted\npurge:\n  older_than_days: %d\n", c.Purge.OlderThanDays)

	b.WriteString("\n# Script indexing\n")
	if len(c.ScriptDirs) == 0 {
		b.WriteString("script_dirs: []\n")
	} else {
		b.WriteString("script_dirs:\n")
		for _, d := range c.ScriptDirs {
			fmt.Fprintf(&b, "  - %s\n", scalar(d))
		}
	}

	b.WriteString("\n# Task class defaults (timeouts in seconds)\n")
	if len(c.TaskClasses) == 0 {
		b.WriteString("task_classes: {}\n")
	} else {
		b.WriteString("task_classes:\n")
		for _, name := range classOrder(c.TaskClasses) {
			fmt.Fprintf(&b, "  %s:\n    timeout: %d\n", scalar(name), c.TaskClasses[name].Timeout)
		}
	}

	b.WriteString("\n# Tool registry\n")
	if len(c.Tools) == 0 {
		b.WriteString("tools: {}\n")
	} else {
		b.WriteString("tools:")
		for _, name := range sortedKeys(c.Tools) {
			t := c.Tools[name]
			fmt.Fprintf(&b, "\n  %s:\n", scalar(name))
			if t.Description != "" {
				fmt.Fprintf(&b, "    description: %s\n", scalar(t.Description))
			}
			fmt.Fprintf(&b, "    task_class: %s\n", scalar(t.TaskClass))
			if t.Timeout != 0 {
				fmt.Fprintf(&b, "    timeout: %d\n", t.Timeout)
			}
		}
	}
	if _, err := Parse(b.Bytes()); err != nil {
		return nil, fmt.Errorf("devconfig: not a valid configuration: %w", err)
	}
	return b.Bytes(), nil
}

// checkUTF8 refuses a string YAML cannot hold: a YAML string is UTF-8, so
// other bytes (a path on a filesystem that allows them) would be written
// as other characters and read back as another string.
func (c *Config) checkUTF8() error {
	strs := append([]string{c.Project.Name, c.Project.RepoPath, c.Project.PRDPath}, c.ScriptDirs...)
	for name := range c.TaskClasses {
		strs = append(strs, name)
	}
	for name, t := range c.Tools {
		strs = append(strs, name, t.Description, t.TaskClass)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return fmt.Errorf("devconfig: %q is not valid UTF-8, which spine.yml cannot hold", s)
		}
	}
	return nil
}

// classOrder lists the default classes c has in the seed's order, then
// the others by name.
func classOrder(classes map[string]TaskClass) []string {
	var out []string
	for _, name := range defaultClassOrder {
		if _, ok := classes[name]; ok {
			out = append(out, name)
		}
	}
	for _, name := range sortedKeys(classes) {
		if !contains(defaultClassOrder, name) {
			out = append(out, name)
		}
	}
	return out
}

// yaml11Bools are the plain words YAML 1.1 reads as booleans and YAML 1.2
// (yaml.v3) as strings.
var yaml11Bools = map[string]bool{"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true}

// scalar renders s as a one-line YAML string, quoting it when plain
// style would read back differently.
func scalar(s string) string {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case strings.ContainsAny(s, "\n\r\t") || s != strings.TrimSpace(s):
		n.Style = yaml.DoubleQuotedStyle
	case yaml11Bools[strings.ToLower(s)]:
		n.Style = yaml.DoubleQuotedStyle // YAML 1.1 readers take these for booleans
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		// Not expected for a string; fall back to a double-quoted form.
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSuffix(string(out), "\n")
}
