package httpapi

import (
	"net/http"
	"strings"

	"github.com/spine-queue/spine/api"
)

// routes is the API's table: method, path, how the route meets consistency
// (kind), who may call it, and its handler. docs/openapi.yaml documents the
// same table (openapi_test.go checks they agree).
func (s *Server) routes() {
	s.router = http.NewServeMux()
	s.methods = map[string][]string{}
	s.allowed = map[string]allow{}
	s.paths = http.NewServeMux()
	// Every request no route takes: 405 when its path is a route's with
	// other methods, else 404, in the API's JSON.
	s.router.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.setLeaderHeaders(w)
		if _, path := s.paths.Handler(r); path != "" {
			w.Header().Set("Allow", strings.Join(s.methods[path], ", "))
			s.writeError(w, errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		s.writeError(w, errorf(http.StatusNotFound, api.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})

	s.route("GET", "/health", kindLocal, allowPublic, s.handleHealth)
	s.route("GET", "/skill.md", kindLocal, allowPublic, s.handleSkill)
	s.route("GET", "/openapi.yaml", kindLocal, allowPublic, s.handleOpenAPI)
	s.route("GET", "/metrics", kindLocal, allowHead|allowGlobal, s.handleMetrics)

	s.route("POST", "/jobs", kindWrite, allowHead, s.handleCreate)
	s.route("GET", "/jobs", kindRead, allowAll, s.handleList)
	s.route("GET", "/jobs/{id}", kindRead, allowAll, s.handleGet)
	s.route("GET", "/jobs/{id}/events", kindRead, allowAll, s.handleEvents)
	s.route("GET", "/jobs/{id}/attempts", kindRead, allowAll, s.handleAttempts)
	s.route("POST", "/jobs/{id}/claim", kindWrite, allowClaws, s.handleClaim)
	s.route("POST", "/jobs/{id}/heartbeat", kindLocalFirst, allowAll, s.handleHeartbeat)
	s.route("POST", "/jobs/{id}/complete", kindWrite, allowAll, s.handleComplete)
	s.route("POST", "/jobs/{id}/fail", kindWrite, allowAll, s.handleFail)
	s.route("POST", "/jobs/{id}/release", kindWrite, allowAll, s.handleRelease)
	s.route("POST", "/jobs/{id}/comment", kindWrite, allowAll, s.handleComment)
	s.route("POST", "/jobs/{id}/cancel", kindWrite, allowHead, s.handleCancel)

	s.route("POST", "/blobs", kindWrite, allowAll, s.handleBlobPut)
	s.bodyLimits = map[string]int64{"POST /blobs": s.queue.Config().MaxBlobBytes + 1<<20} // multipart framing
	s.route("GET", "/blobs/{id}", kindLocal, allowAll, s.handleBlobGet)

	s.route("POST", "/internal/worker/claim", kindLongPoll, allowClaws, s.handleWorkerClaim)
	s.route("POST", "/internal/worker/heartbeat", kindLocalFirst, allowClaws, s.handleWorkerHeartbeat)
	s.route("POST", "/internal/worker/complete", kindWrite, allowClaws, s.handleWorkerComplete)
	s.route("POST", "/internal/worker/fail", kindWrite, allowClaws, s.handleWorkerFail)
	s.route("POST", "/internal/worker/release", kindWrite, allowClaws, s.handleWorkerRelease)
	s.route("GET", "/internal/worker/held", kindRead, allowClaws, s.handleWorkerHeld)

	s.route("GET", "/dlq", kindRead, allowHead, s.handleDLQList)
	s.route("POST", "/dlq/{id}/redrive", kindWrite, allowHead, s.handleRedrive)

	s.streamRoutes()
	s.tokenRoutes()
	s.scheduleRoutes()
	s.rateRoutes()
	s.devqRoutes()
	s.controlPlaneRoutes()
	s.readModelRoutes()
	s.taskRoutes()
	s.uiRoutes()
	s.mcpRoutes()
	s.staleFilters = map[string]bool{"GET /api/tasks": true}

	s.route("GET", "/cluster/status", kindLocal, allowHead, s.handleClusterStatus)
	s.route("GET", "/cluster/nodes", kindLocal, allowAll, s.handleClusterNodes)
	s.route("POST", "/cluster/join", kindWrite, allowHead|allowGlobal, s.handleJoin)
	s.route("POST", "/cluster/remove", kindWrite, allowHead|allowGlobal, s.handleRemove)
	s.route("POST", "/cluster/transfer-leader", kindWrite, allowHead|allowGlobal, s.handleTransfer)
	s.route("GET", "/v1/keyring", kindLocal, allowHead|allowGlobal, s.handleKeyring)
	s.route("POST", "/v1/keyring/{op}", kindLocal, allowHead|allowGlobal, s.handleKeyringChange)
	s.route("GET", "/v1/snapshot", kindLocal, allowHead|allowGlobal, s.handleSnapshotSave)
	s.route("PUT", "/v1/snapshot", kindLocal, allowHead|allowGlobal, s.handleSnapshotRestore)
}
