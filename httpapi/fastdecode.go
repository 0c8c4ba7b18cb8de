package httpapi

import (
	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/strictjson"
)

// fastDecode decodes the bodies of the requests every job makes (its
// create, and the worker contract's claim, heartbeat, complete, fail and
// release) in one pass of the v2 decoder (strictjson.Fast), and reports
// whether it did. A body it refuses is decoded by decode's own path, which
// gives the answer and the error it always gave; TestFastMatchesStrict and
// FuzzFastMatchesStrict check, for each type here, that whatever it decodes
// the strict decoder decodes to the same value. A type is added here with
// its case in those tests.
func fastDecode(body []byte, v any) bool {
	switch v := v.(type) {
	case *api.JobCreateRequest:
		return v.DecodeWith(func(fields any) bool { return strictjson.Fast(body, fields) })
	case *api.WorkerClaimRequest:
		return fastInto(body, v)
	case *api.WorkerHeartbeatRequest:
		return fastInto(body, v)
	case *api.WorkerCompleteRequest:
		return fastInto(body, v)
	case *api.WorkerFailRequest:
		return fastInto(body, v)
	case *api.WorkerReleaseRequest:
		return fastInto(body, v)
	}
	return false
}

// fastInto decodes body into a zero T and sets *v to it when that worked,
// so that a refused body leaves *v as it was for the decoder after it.
func fastInto[T any](body []byte, v *T) bool {
	var t T
	if !strictjson.Fast(body, &t) {
		return false
	}
	*v = t
	return true
}
