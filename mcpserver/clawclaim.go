package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spine-queue/spine/client"
)

// instructionsWait bounds the look-up of the claimed streams' instructions:
// the jobs are claimed, and their leases run, either way.
const instructionsWait = 3 * time.Second

// instructionsOf returns the instructions of the claims' streams, by name,
// as far as they can be read in instructionsWait.
func (s *server) instructionsOf(ctx context.Context, claims []client.WorkerClaim) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, instructionsWait)
	defer cancel()
	out := map[string]string{}
	for _, c := range claims {
		if _, ok := out[c.Stream]; ok {
			continue
		}
		out[c.Stream] = ""
		if st, err := s.c.Stream(ctx, c.Stream); err == nil {
			out[c.Stream] = st.Instructions
		}
	}
	return out
}

// nothingClaimed is the next step of a claim that took nothing.
func nothingClaimed(streams []string, wait time.Duration, elsewhere []StreamQueued) string {
	msg := fmt.Sprintf("No job of %s became claimable within %s.", strings.Join(streams, ", "), wait)
	if len(elsewhere) == 0 {
		return msg + " No other stream has queued work either: call claim again to keep waiting."
	}
	parts := make([]string, 0, len(elsewhere))
	for _, e := range elsewhere {
		parts = append(parts, fmt.Sprintf("%s (%d queued)", e.Name, e.Queued))
	}
	return msg + " Work waits in " + strings.Join(parts, ", ") +
		": call claim with those streams to take it (some of it may be meant for other workers), or claim again to keep waiting."
}
