package httpapi

import (
	"bytes"
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

// hasSchema reports whether a request gives a resultSchema (null is none).
func hasSchema(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}
