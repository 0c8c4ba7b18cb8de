package api

// HTTP header names of the API.
const (
	// HeaderNode, on every answer, is the id of the node that served the
	// request (the node the caller talked to, also when it forwarded).
	HeaderNode = "X-Spine-Node"
	// HeaderLeader, on every answer, is the leader's id as the serving node
	// knows it (absent while it knows none).
	HeaderLeader = "X-Spine-Leader"
	// HeaderLeaderAddr, on every answer, is the leader's HTTP base URL as
	// the serving node knows it (absent while it knows none).
	HeaderLeaderAddr = "X-Spine-Leader-Addr"
	// HeaderIndex, on every answer, is a Raft index: of the write, or of the
	// state a read saw.
	HeaderIndex = "X-Spine-Index"
	// HeaderMinIndex, on a request, is the highest HeaderIndex the caller has
	// seen: a node answering from its own state first applies at least that
	// much, so a caller reads its own writes through any node. A value that
	// is not an unsigned integer is refused with 400.
	HeaderMinIndex = "X-Spine-Min-Index"
	// HeaderForwardedBy marks a request a follower forwarded to the leader
	// (its value is the follower's id), so that it is never forwarded again.
	// Only nodes send it; a client must not.
	HeaderForwardedBy = "X-Spine-Forwarded-By"
	// HeaderIdempotencyKey, on POST /jobs, makes a repeated create answer
	// the first job. It is the same key as the body's "idempotencyKey"; when
	// both are given they must be equal.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderEventsAfter, on GET /v1/events, is the seq the stream starts
	// after: a client that asked for "from now" resumes from it if the
	// connection drops before any event arrives.
	HeaderEventsAfter = "X-Spine-Events-After"
)
