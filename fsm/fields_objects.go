package fsm

// The fields of the objects that commands and snapshot records carry
// nested (fields.go).

func (h *HealthChange) fields(f *fields) {
	f.bool(1, &h.Gateway)
	f.str(2, &h.ID)
	f.istr(3, &h.Health)
}

func (p *Project) fields(f *fields) {
	f.str(1, &p.Name)
	f.str(2, &p.RepoPath)
	f.str(3, &p.PRDPath)
}

func (c *TaskClass) fields(f *fields) {
	f.str(1, &c.Name)
	f.i64(2, &c.Timeout)
}

func (t *Tool) fields(f *fields) {
	f.str(1, &t.Name)
	f.str(2, &t.Description)
	f.str(3, &t.TaskClass)
	f.i64(4, &t.Timeout)
}

func (s *Script) fields(f *fields) {
	f.str(1, &s.Path)
	f.str(2, &s.Name)
	f.str(3, &s.Description)
	f.str(4, &s.Inputs)
	f.str(5, &s.Outputs)
	f.strs(6, &s.Tags)
}

func (r *Registry) fields(f *fields) {
	if f.w && r.Project != (Project{}) || !f.w {
		f.obj(1, &r.Project)
	}
	objs(f, 2, &r.Classes)
	objs(f, 3, &r.Tools)
	f.strs(4, &r.ScriptDirs)
	objs(f, 5, &r.Scripts)
	f.int(6, &r.PurgeDays)
	f.i64(7, &r.UpdatedAt)
}

func (c *FeedOnCommand) fields(f *fields) { f.i64(1, &c.Now) }

func (c *LevelCommand) fields(f *fields) { f.i64(1, &c.Now); f.int(2, &c.Level) }

func (c *HealthSetCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	objs(f, 2, &c.Changes)
}

func (c *RegistrySetCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	if !f.w || !c.Registry.empty() {
		f.obj(2, &c.Registry)
	}
	f.actor(3, &c.Actor)
}

func (r *Registry) empty() bool {
	return r.Project == (Project{}) && len(r.Classes) == 0 && len(r.Tools) == 0 && len(r.ScriptDirs) == 0 &&
		len(r.Scripts) == 0 && r.PurgeDays == 0 && r.UpdatedAt == 0
}

func (c *GatewayRegisterCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.str(3, &c.Address)
	f.labels(4, &c.Metadata)
	f.int(5, &c.Capacity)
	f.actor(6, &c.Actor)
	f.istr(7, &c.Delivery)
	f.istr(8, &c.Role)
	f.str(9, &c.Secret)
}
