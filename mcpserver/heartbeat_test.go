package mcpserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/mcpserver"
)

// A session that ends when idle asks for heartbeats at most half that far
// apart, however long the lease: an agent that heartbeats as told keeps
// its session, and the leases in it.
func TestHeartbeatIntervalKeepsTheSession(t *testing.T) {
	url := startAPI(t)
	head := session(t, url, headTok)
	var enq struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	call(t, head, "enqueue", map[string]any{"payload": 1, "lease_seconds": 3600}, &enq)

	claw := connect(t, mcpserver.Config{Backend: newClient(t, url, clawTok), Role: mcpserver.RoleClaw, SessionIdle: 2 * time.Minute})
	var cl struct {
		Jobs []struct {
			LeaseSeconds             float64 `json:"lease_seconds"`
			HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
		} `json:"jobs"`
		Next string `json:"next"`
	}
	call(t, claw, "claim", map[string]any{"wait_seconds": 0}, &cl)
	if len(cl.Jobs) != 1 || cl.Jobs[0].LeaseSeconds != 3600 || cl.Jobs[0].HeartbeatIntervalSeconds != 60 || !strings.Contains(cl.Next, "every 60 s") {
		t.Fatalf("claim of a job with a 1 h lease in a session idle after 2 min: %+v", cl)
	}
	var held struct {
		Jobs []struct {
			HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
		} `json:"jobs"`
	}
	call(t, claw, "held_jobs", nil, &held)
	if len(held.Jobs) != 1 || held.Jobs[0].HeartbeatIntervalSeconds != 60 {
		t.Fatalf("held_jobs: %+v", held)
	}
	var hb struct {
		Next string `json:"next"`
	}
	call(t, claw, "heartbeat", map[string]any{"job_id": enq.Job.ID}, &hb)
	if !strings.Contains(hb.Next, "within 60 s") {
		t.Fatalf("heartbeat: %+v", hb)
	}
}
