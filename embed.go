// Package spine holds the files the binary ships: the SKILL.md that teaches
// an AI agent to be a Spine worker.
package spine

import _ "embed"

// SkillMD is the default document served at GET /skill.md.
//
//go:embed SKILL.md
var SkillMD []byte
