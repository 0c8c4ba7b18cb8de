package fsm

import "fmt"

// RegistrySetCommand puts a registry in force (a reload of spine.yml): the
// tools, task classes, script index and project settings, replaced whole.
type RegistrySetCommand struct {
	Now      int64
	Registry Registry
	Actor    Actor
}

func init() {
	register(CmdRegistrySet, "registry-set", func() command { return new(RegistrySetCommand) })
}

func (c *RegistrySetCommand) encode(e *enc) {
	e.varint(c.Now)
	e.registry(&c.Registry)
	e.actor(c.Actor)
}

func (c *RegistrySetCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Registry = *d.registry()
	c.Actor = d.actor()
}

// apply checks the registry whole and refuses it whole: a reload with an
// error leaves the registry in force as it was.
func (c *RegistrySetCommand) apply(a *applier) *Result {
	r := c.Registry
	if err := r.check(); err != nil {
		return fail(fmt.Errorf("registry: %w: %v", ErrInvalid, err))
	}
	r.UpdatedAt = c.Now
	a.putRegistry(&r)
	return &Result{}
}

func (e *enc) registry(r *Registry) {
	e.str(r.Project.Name)
	e.str(r.Project.RepoPath)
	e.str(r.Project.PRDPath)
	e.uvarint(uint64(len(r.Classes)))
	for _, c := range r.Classes {
		e.str(c.Name)
		e.varint(c.Timeout)
	}
	e.uvarint(uint64(len(r.Tools)))
	for _, t := range r.Tools {
		e.str(t.Name)
		e.str(t.Description)
		e.str(t.TaskClass)
		e.varint(t.Timeout)
	}
	e.strs(r.ScriptDirs)
	e.uvarint(uint64(len(r.Scripts)))
	for _, s := range r.Scripts {
		e.str(s.Path)
		e.str(s.Name)
		e.str(s.Description)
		e.str(s.Inputs)
		e.str(s.Outputs)
		e.strs(s.Tags)
	}
	e.int(r.PurgeDays)
	e.varint(r.UpdatedAt)
}

func (d *dec) registry() *Registry {
	r := &Registry{}
	r.Project = Project{Name: d.str(), RepoPath: d.str(), PRDPath: d.str()}
	if n := d.count(2); n > 0 {
		r.Classes = make([]TaskClass, n)
		for i := range r.Classes {
			r.Classes[i] = TaskClass{Name: d.str(), Timeout: d.varint()}
		}
	}
	if n := d.count(4); n > 0 {
		r.Tools = make([]Tool, n)
		for i := range r.Tools {
			r.Tools[i] = Tool{Name: d.str(), Description: d.str(), TaskClass: d.str(), Timeout: d.varint()}
		}
	}
	r.ScriptDirs = d.strs()
	if n := d.count(6); n > 0 {
		r.Scripts = make([]Script, n)
		for i := range r.Scripts {
			r.Scripts[i] = Script{Path: d.str(), Name: d.str(), Description: d.str(), Inputs: d.str(), Outputs: d.str(), Tags: d.strs()}
		}
	}
	r.PurgeDays = d.int()
	r.UpdatedAt = d.varint()
	return r
}
