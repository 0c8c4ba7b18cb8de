// Package devconfig reads and writes spine.yml, the developer queue's
// project configuration (seed 004 §16: the project, task classes, the tool
// registry, the script directories and the purge retention), and builds the
// script index (§11) from the script directories it names. Config.Registry
// turns both into the api.Registry that `spine reload` puts in force.
package devconfig

import "sort"

// FileName is the configuration's conventional file name.
const FileName = "spine.yml"

// DefaultPort is the server port DefaultConfig writes: spine's HTTP port.
const DefaultPort = 36725

// DefaultPurgeDays is the retention of finished tasks, in days, when
// spine.yml sets none.
const DefaultPurgeDays = 3

// MaxPurgeDays is the longest retention of finished tasks the cluster takes
// (ten years; fsm.MaxPurgeDays).
const MaxPurgeDays = 3650

// Config is the content of spine.yml. Task classes and tools are keyed by
// name; TaskClasses holds only the classes the file names (the defaults
// apply besides them, see Classes).
type Config struct {
	Project     Project
	Server      Server
	Purge       Purge
	ScriptDirs  []string
	TaskClasses map[string]TaskClass
	Tools       map[string]Tool
}

// Project describes the project the queue serves.
type Project struct {
	Name     string
	RepoPath string
	PRDPath  string
}

// Server holds the server settings; Port 0 means none is set.
type Server struct {
	Port int
}

// Purge holds the retention of finished tasks; OlderThanDays 0 means the
// default (DefaultPurgeDays).
type Purge struct {
	OlderThanDays int
}

// TaskClass is a task class's default timeout, in seconds.
type TaskClass struct {
	Timeout int64
}

// Tool is a registered tool. Timeout (seconds) overrides its class's
// timeout; 0 means the class's.
type Tool struct {
	Description string
	TaskClass   string
	Timeout     int64
}

// DefaultTaskClasses returns seed 004's task classes and their timeouts:
// FAST_SCRIPT 30, MEDIUM_SCRIPT 300, LLM_LITE 300, LLM_HEAVY 900 seconds.
func DefaultTaskClasses() map[string]TaskClass {
	return map[string]TaskClass{
		"FAST_SCRIPT":   {Timeout: 30},
		"MEDIUM_SCRIPT": {Timeout: 300},
		"LLM_LITE":      {Timeout: 300},
		"LLM_HEAVY":     {Timeout: 900},
	}
}

// defaultClassOrder is the order the seed lists the default classes in.
var defaultClassOrder = []string{"FAST_SCRIPT", "MEDIUM_SCRIPT", "LLM_LITE", "LLM_HEAVY"}

// DefaultConfig returns the configuration `spine setup` starts from: the
// four default task classes, no tools, no script directories, a purge
// retention of DefaultPurgeDays and the server on DefaultPort.
func DefaultConfig(projectName string) *Config {
	return &Config{
		Project:     Project{Name: projectName},
		Server:      Server{Port: DefaultPort},
		Purge:       Purge{OlderThanDays: DefaultPurgeDays},
		ScriptDirs:  []string{},
		TaskClasses: DefaultTaskClasses(),
		Tools:       map[string]Tool{},
	}
}

// Classes returns the task classes in force: the defaults, overridden and
// extended by the file's.
func (c *Config) Classes() map[string]TaskClass {
	out := DefaultTaskClasses()
	for name, tc := range c.TaskClasses {
		out[name] = tc
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
