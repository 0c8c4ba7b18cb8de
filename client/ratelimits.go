package client

import (
	"context"
	"net/http"

	"github.com/spine-queue/spine/api"
)

type (
	// RateLimit is a rate for the claims of a key's jobs, cluster-wide:
	// at most Limit claims per PeriodSeconds, up to Burst (0: Limit) at
	// once. Set it on a job (JobCreateParams.RateLimit) or as a stream's
	// default (StreamDefaults.RateLimit); a key's rate is the latest
	// create's.
	RateLimit = api.RateLimit
	// RateInfo is one rate key: its rate, the claims it allows now, when
	// it next allows one, and how many queued jobs it holds back.
	RateInfo = api.RateInfo
)

// Rates lists the rate keys in use, by key.
func (c *Client) Rates(ctx context.Context) ([]RateInfo, error) {
	var out api.RateList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/rates"}, &out); err != nil {
		return nil, err
	}
	return out.Rates, nil
}
