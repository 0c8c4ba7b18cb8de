package api

import "time"

// Token roles: a named token carries head's, a claw's, or the read-only
// operator's, who may read everything head may read and change nothing.
const (
	RoleHead      = "head"
	RoleLeftClaw  = "left_claw"
	RoleRightClaw = "right_claw"
	RoleOperator  = "operator"
)

// TokenCreateRequest is the body of POST /v1/tokens.
type TokenCreateRequest struct {
	// Name names the token (1-128 letters, digits, '_', '.', ':' or '-'):
	// the job events it causes name it.
	Name string `json:"name"`
	// Role is head, left_claw, right_claw or operator.
	Role string `json:"role"`
	// Streams, when set, are the only streams the token sees, claims from
	// and creates in.
	Streams []string `json:"streams,omitempty"`
	// WorkerID, when set (claw tokens only), is the only worker the token
	// acts as: a call naming another worker id is refused, one naming none
	// acts as this one.
	WorkerID string `json:"workerId,omitempty"`
	// ExpiresAt, or ExpiresInSeconds, when set, is when the token stops
	// being accepted.
	ExpiresAt        time.Time `json:"expiresAt,omitzero"`
	ExpiresInSeconds int64     `json:"expiresInSeconds,omitempty"`
	Note             string    `json:"note,omitempty"`
}

// Token is a named token as listed: never its secret.
type Token struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Streams   []string  `json:"streams,omitempty"`
	WorkerID  string    `json:"workerId,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Expired is set once ExpiresAt has passed (by the answering node's
	// clock): the token is refused.
	Expired   bool      `json:"expired,omitempty"`
	Note      string    `json:"note,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
}

// TokenCreated is the answer of POST /v1/tokens: the token and its secret,
// shown this once and never again (only its hash is stored).
type TokenCreated struct {
	Token
	Secret string `json:"secret"`
}

// TokenList is the answer of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
	// Max is the most named tokens a cluster holds.
	Max int `json:"max"`
}

// WhoAmI is the answer of GET /v1/whoami: who the caller's token makes it.
type WhoAmI struct {
	Role string `json:"role"`
	// Token names the caller's named token ("" for an environment token).
	Token     string    `json:"token,omitempty"`
	Streams   []string  `json:"streams,omitempty"`
	WorkerID  string    `json:"workerId,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	ReadOnly  bool      `json:"readOnly,omitempty"`
}
