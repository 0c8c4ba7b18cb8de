package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spine-queue/spine/api"
)

type (
	// Token is a named token as listed (never its secret).
	Token = api.Token
	// TokenCreateParams is a token create's request.
	TokenCreateParams = api.TokenCreateRequest
	// TokenCreated is a created token with its secret, shown this once.
	TokenCreated = api.TokenCreated
	// WhoAmI is who the client's token makes it.
	WhoAmI = api.WhoAmI
)

func tokenPath(name string) string { return "/v1/tokens/" + url.PathEscape(name) }

// TokenCreate creates a named token (head) and returns it with its secret,
// which the cluster never shows again. The create is sent once: a lost
// answer is not retried (a retry would be refused as a token that exists,
// and its secret would be lost with the answer; revoke it and create
// another).
func (c *Client) TokenCreate(ctx context.Context, p *TokenCreateParams) (*TokenCreated, error) {
	req, err := jsonRequest(http.MethodPost, "/v1/tokens", p)
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, retryUnsent
	var out TokenCreated
	if _, _, err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens lists the named tokens (head), by name.
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var out api.TokenList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/v1/tokens"}, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// Token reads one named token (head).
func (c *Client) Token(ctx context.Context, name string) (*Token, error) {
	var out Token
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: tokenPath(name)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TokenRevoke revokes a named token (head): every node refuses it once it
// applied the revoke, and ends the long polls, event streams and MCP
// sessions it holds.
func (c *Client) TokenRevoke(ctx context.Context, name string) (*Token, error) {
	var out Token
	if _, _, err := c.call(ctx, &request{method: http.MethodDelete, path: tokenPath(name), write: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WhoAmI asks who the client's token makes it.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var out WhoAmI
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/v1/whoami"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
