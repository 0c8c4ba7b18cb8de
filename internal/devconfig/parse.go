package devconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Parse reads a spine.yml and validates it. Unknown keys are refused, and
// every error names its line ("line 12: ..."); see Error. The seed's
// database section is accepted and ignored, so a sparkq.yml parses too.
func Parse(data []byte) (*Config, error) {
	return parse("", data)
}

// Load reads and parses the spine.yml at path; its errors name the file
// and the line ("spine.yml:12: ...").
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data)
}

func parse(file string, data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, syntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: file, Line: extra.Line, Msg: "only one YAML document is allowed"}
	} else if err != io.EOF {
		return nil, syntaxError(file, err)
	}

	p := &parser{file: file, cfg: &Config{
		ScriptDirs:  []string{},
		TaskClasses: map[string]TaskClass{},
		Tools:       map[string]Tool{},
	}}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		p.document(doc.Content[0])
	}
	p.checkTools()
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		if len(p.errs) == 1 {
			return nil, p.errs[0]
		}
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return p.cfg, nil
}

// parser walks a spine.yml's node tree into a Config, collecting errors.
type parser struct {
	file  string
	cfg   *Config
	errs  []*Error
	tools []toolRef
}

// toolRef remembers where a tool's task class was given, for the check
// that runs once every class is known.
type toolRef struct {
	name      string
	line      int  // the tool's key
	classLine int  // its task_class value (0: none given)
	badClass  bool // task_class is not a string (reported by str)
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// topKeys are the sections of spine.yml.
var topKeys = []string{"database", "project", "purge", "script_dirs", "server", "task_classes", "tools"}

func (p *parser) document(root *yaml.Node) {
	root = resolve(root)
	if isNull(root) {
		return
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root.Line, "the top level must be a mapping of sections (%s), not %s", strings.Join(topKeys, ", "), kindName(root))
		return
	}
	fields := p.fields(root, "", topKeys)
	if f, ok := fields["project"]; ok {
		p.project(f.val)
	}
	if f, ok := fields["server"]; ok {
		p.server(f.val)
	}
	if f, ok := fields["purge"]; ok {
		p.purge(f.val)
	}
	if f, ok := fields["script_dirs"]; ok {
		p.scriptDirs(f.val)
	}
	if f, ok := fields["task_classes"]; ok {
		p.taskClasses(f.val)
	}
	if f, ok := fields["tools"]; ok {
		p.toolSection(f.val)
	}
	// database (the seed's storage settings) is accepted and ignored.
}

func (p *parser) project(n *yaml.Node) {
	f := p.fields(n, "project", []string{"name", "prd_path", "repo_path"})
	p.cfg.Project.Name = p.str(f["name"], "project.name")
	p.cfg.Project.RepoPath = p.str(f["repo_path"], "project.repo_path")
	p.cfg.Project.PRDPath = p.str(f["prd_path"], "project.prd_path")
}

func (p *parser) server(n *yaml.Node) {
	f := p.fields(n, "server", []string{"port"})
	if port, ok := p.integer(f["port"], "server.port"); ok {
		if port < 0 || port > 65535 {
			p.errorf(f["port"].val.Line, "server.port: %d is not a port (1-65535)", port)
		} else {
			p.cfg.Server.Port = int(port)
		}
	}
}

func (p *parser) purge(n *yaml.Node) {
	f := p.fields(n, "purge", []string{"older_than_days"})
	if days, ok := p.integer(f["older_than_days"], "purge.older_than_days"); ok {
		if days < 0 || days > MaxPurgeDays {
			p.errorf(f["older_than_days"].val.Line, "purge.older_than_days: must be a number of days from 0 to %d, got %d", MaxPurgeDays, days)
		} else {
			p.cfg.Purge.OlderThanDays = int(days)
		}
	}
}

func (p *parser) scriptDirs(n *yaml.Node) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n.Line, "script_dirs: want a list of directories, not %s", kindName(n))
		return
	}
	seen := map[string]int{}
	for _, item := range n.Content {
		item = resolve(item)
		dir := p.str(field{val: item}, "script_dirs entry")
		switch {
		case item.Kind != yaml.ScalarNode:
		case strings.TrimSpace(dir) == "":
			p.errorf(item.Line, "script_dirs: an entry is empty")
		case seen[dir] > 0:
			p.errorf(item.Line, "script_dirs: %q is listed twice (first on line %d)", dir, seen[dir])
		default:
			seen[dir] = item.Line
			p.cfg.ScriptDirs = append(p.cfg.ScriptDirs, dir)
		}
	}
}

func (p *parser) taskClasses(n *yaml.Node) {
	for _, e := range p.entries(n, "task_classes") {
		if strings.TrimSpace(e.key) == "" {
			p.errorf(e.line, "task_classes: a task class has an empty name")
			continue
		}
		what := fmt.Sprintf("task class %q", e.key)
		f := p.fields(e.val, what, []string{"timeout"})
		timeout, ok := p.integer(f["timeout"], what+": timeout")
		switch {
		case !ok && isNull(resolve(f["timeout"].val)):
			p.errorf(e.line, "%s: timeout is required (seconds, > 0)", what)
		case !ok:
		case timeout <= 0:
			p.errorf(f["timeout"].val.Line, "%s: timeout must be > 0 seconds, got %d", what, timeout)
		default:
			p.cfg.TaskClasses[e.key] = TaskClass{Timeout: timeout}
		}
	}
}

func (p *parser) toolSection(n *yaml.Node) {
	for _, e := range p.entries(n, "tools") {
		if strings.TrimSpace(e.key) == "" {
			p.errorf(e.line, "tools: a tool has an empty name")
			continue
		}
		what := fmt.Sprintf("tool %q", e.key)
		f := p.fields(e.val, what, []string{"description", "task_class", "timeout"})
		t := Tool{
			Description: p.str(f["description"], what+": description"),
			TaskClass:   p.str(f["task_class"], what+": task_class"),
		}
		if timeout, ok := p.integer(f["timeout"], what+": timeout"); ok {
			if timeout < 0 {
				p.errorf(f["timeout"].val.Line, "%s: timeout must be >= 0 seconds (0: the class's), got %d", what, timeout)
			}
			t.Timeout = timeout
		}
		ref := toolRef{name: e.key, line: e.line}
		if cn := resolve(f["task_class"].val); cn != nil {
			ref.classLine = cn.Line
			ref.badClass = !isNull(cn) && cn.Kind != yaml.ScalarNode // already reported
		}
		p.tools = append(p.tools, ref)
		p.cfg.Tools[e.key] = t
	}
}

// checkTools checks every tool's task class once all classes are known.
func (p *parser) checkTools() {
	classes := p.cfg.Classes()
	for _, ref := range p.tools {
		class := p.cfg.Tools[ref.name].TaskClass
		switch {
		case ref.badClass:
		case ref.classLine == 0 || class == "":
			line := ref.classLine
			if line == 0 {
				line = ref.line
			}
			p.errorf(line, "tool %q: task_class is required (known: %s)", ref.name, strings.Join(sortedKeys(classes), ", "))
		default:
			if _, ok := classes[class]; !ok {
				p.errorf(ref.classLine, "tool %q: unknown task class %q (known: %s)", ref.name, class, strings.Join(sortedKeys(classes), ", "))
			}
		}
	}
}
