package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The rate limits: a create's or a stream default's rateLimit, and the
// keys' buckets (GET /rates).
func (s *Server) rateRoutes() {
	s.route("GET", "/rates", kindRead, allowAll, s.handleRates)
}

// rateInput is a request's rateLimit as the service takes it (nil: none).
func rateInput(r *api.RateLimit) *queue.RateInput {
	if r == nil {
		return nil
	}
	return &queue.RateInput{Key: r.Key, Limit: r.Limit, PeriodSeconds: r.PeriodSeconds, Burst: r.Burst}
}

// viewRate is a rate limit as the API shows it (nil: none).
func viewRate(r *fsm.RateLimit) *api.RateLimit {
	if r == nil {
		return nil
	}
	return &api.RateLimit{Key: r.Key, Limit: r.Limit, PeriodSeconds: queue.RatePeriodSeconds(r), Burst: r.Burst}
}

// rateList is the rate keys as the caller sees them (the route's and the UI's).
func (s *Server) rateList(caller queue.Caller) api.RateList {
	out := api.RateList{Rates: []api.RateInfo{}}
	for _, ri := range s.queue.Rates(caller) {
		out.Rates = append(out.Rates, api.RateInfo{RateLimit: *viewRate(&ri.RateLimit), Tokens: ri.Tokens,
			NextAt: api.Time(ri.NextAt), Waiting: ri.Waiting})
	}
	return out
}

func (s *Server) handleRates(w http.ResponseWriter, r *http.Request, c *call) error {
	writeJSON(w, http.StatusOK, s.rateList(c.caller))
	return nil
}

// uiRate says what a rate is, for the web UI: "N per PERIOD, burst B".
func uiRate(v any) string {
	var r fsm.RateLimit
	switch x := v.(type) {
	case fsm.RateLimit:
		r = x
	case *fsm.RateLimit:
		if x == nil {
			return ""
		}
		r = *x
	default:
		return ""
	}
	burst := r.Burst
	if burst == 0 {
		burst = r.Limit
	}
	return fmt.Sprintf("%d per %s, burst %d", r.Limit, time.Duration(r.PeriodNanos), burst)
}
