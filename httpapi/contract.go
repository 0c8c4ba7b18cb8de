package httpapi

import (
	"encoding/json"

	"github.com/spine-queue/spine/fsm"
)

// resultSchema is a job's result contract as the API shows it (nil: none).
func resultSchema(j *fsm.Job) json.RawMessage {
	if s := j.Extra().ResultSchema; s != "" {
		return json.RawMessage(s)
	}
	return nil
}
