// Package spine holds the files the binary ships: the SKILL.md that teaches
// an AI agent to be a Spine worker, and the developer queue's watcher.
package spine

import _ "embed"

// SkillMD is the default document served at GET /skill.md.
//
//go:embed SKILL.md
var SkillMD []byte

// WatcherScript is scripts/spine-watcher.sh, which spine run starts for
// each stream it watches.
//
//go:embed scripts/spine-watcher.sh
var WatcherScript []byte

// OpenAPI is docs/openapi.yaml, served at GET /openapi.yaml: the API's
// routes, which a test checks against the router.
//
//go:embed docs/openapi.yaml
var OpenAPI []byte
