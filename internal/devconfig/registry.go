package devconfig

import "github.com/spine-queue/spine/api"

// Registry converts c and a script index into the registry a reload puts
// in force (PUT /api/registry): the task classes in force (defaults merged
// with the file's) and the tools, both sorted by name, with each tool's
// effective timeout; the scripts as given (IndexScripts sorts them); the
// script directories; and the purge retention (DefaultPurgeDays when the
// file sets none).
func (c *Config) Registry(scripts []Script) api.Registry {
	classes := c.Classes()
	reg := api.Registry{
		Project: api.Project{
			Name:     c.Project.Name,
			RepoPath: c.Project.RepoPath,
			PRDPath:  c.Project.PRDPath,
		},
		TaskClasses:        make([]api.TaskClass, 0, len(classes)),
		Tools:              make([]api.Tool, 0, len(c.Tools)),
		ScriptDirs:         append([]string{}, c.ScriptDirs...),
		Scripts:            make([]api.Script, 0, len(scripts)),
		PurgeOlderThanDays: c.Purge.OlderThanDays,
	}
	if reg.PurgeOlderThanDays == 0 {
		reg.PurgeOlderThanDays = DefaultPurgeDays
	}
	for _, name := range sortedKeys(classes) {
		reg.TaskClasses = append(reg.TaskClasses, api.TaskClass{Name: name, Timeout: classes[name].Timeout})
	}
	for _, name := range sortedKeys(c.Tools) {
		t := c.Tools[name]
		eff := t.Timeout
		if eff <= 0 {
			eff = classes[t.TaskClass].Timeout
		}
		reg.Tools = append(reg.Tools, api.Tool{
			Name:             name,
			Description:      t.Description,
			TaskClass:        t.TaskClass,
			Timeout:          t.Timeout,
			EffectiveTimeout: eff,
		})
	}
	for _, s := range scripts {
		reg.Scripts = append(reg.Scripts, api.Script{
			Path:        s.Path,
			Name:        s.Name,
			Description: s.Description,
			Inputs:      s.Inputs,
			Outputs:     s.Outputs,
			Tags:        append([]string(nil), s.Tags...),
		})
	}
	return reg
}
