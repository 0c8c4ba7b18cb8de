package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
)

// Head's tools for named tokens: one credential for each agent.

type tokenCreateIn struct {
	Name             string   `json:"name" jsonschema:"the token's name (letters, digits, '_', '.', ':' or '-'); the job events it causes name it"`
	Role             string   `json:"role" jsonschema:"head, left_claw, right_claw, or operator (reads everything head reads, changes nothing)"`
	Streams          []string `json:"streams,omitempty" jsonschema:"the only streams the token sees, claims from and creates in (none: every stream)"`
	WorkerID         string   `json:"worker_id,omitempty" jsonschema:"claw tokens: the only worker id the token acts as"`
	ExpiresInSeconds int64    `json:"expires_in_seconds,omitempty" range:"1,3153600000" jsonschema:"seconds until the token stops being accepted (none: until revoked)"`
	Note             string   `json:"note,omitempty" jsonschema:"what the token is for (at most 1024 bytes)"`
}

type tokenNameIn struct {
	Name string `json:"name" jsonschema:"the token's name"`
}

type tokenListOut struct {
	Tokens []api.Token `json:"tokens"`
}

func (s *server) addTokenTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "token_create",
		Title: "Create a named token",
		Description: "Create a token for one agent: a role, optional stream scopes, an optional worker id it is bound to, an optional " +
			"expiry and a note. The answer's secret is shown this once (only its hash is stored): hand it to the agent as its bearer " +
			"token (SPINE_TOKEN). Every job event the agent causes names the token.",
		Annotations: writes("Create a named token", false, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in tokenCreateIn) (*mcp.CallToolResult, api.TokenCreated, error) {
		if in.Name == "" || in.Role == "" {
			return nil, api.TokenCreated{}, errors.New("token_create: name and role are required")
		}
		out, err := s.c.TokenCreate(ctx, &api.TokenCreateRequest{Name: in.Name, Role: in.Role, Streams: in.Streams, WorkerID: in.WorkerID,
			ExpiresInSeconds: in.ExpiresInSeconds, Note: in.Note})
		if err != nil {
			return nil, api.TokenCreated{}, s.advise(err, "token_create", "")
		}
		return nil, *out, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:        "token_list",
		Title:       "List named tokens",
		Description: "The named tokens: name, role, scopes, bound worker id, expiry (expired ones are refused) and note; never a secret.",
		Annotations: readOnly("List named tokens"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, tokenListOut, error) {
		list, err := s.c.Tokens(ctx)
		if err != nil {
			return nil, tokenListOut{}, s.advise(err, "token_list", "")
		}
		return nil, tokenListOut{Tokens: list}, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "token_revoke",
		Title: "Revoke a named token",
		Description: "Revoke a named token: every node refuses it at once, and its open long polls, event streams and MCP sessions end. " +
			"The agent that held it can do nothing more until given another token.",
		Annotations: writes("Revoke a named token", false, true),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in tokenNameIn) (*mcp.CallToolResult, api.Token, error) {
		if in.Name == "" {
			return nil, api.Token{}, errors.New("token_revoke: name is required")
		}
		out, err := s.c.TokenRevoke(ctx, in.Name)
		if err != nil {
			return nil, api.Token{}, s.advise(err, "token_revoke", "")
		}
		return nil, *out, nil
	})
}
