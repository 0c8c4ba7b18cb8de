// Package mcpserver is Spine's MCP (Model Context Protocol) server: tools
// with JSON schemas through which an AI agent works the queue, as a claw
// (list streams, peek, claim, heartbeat, complete, fail, release, comment)
// or as head (enqueue, list, redrive, requeue, cancel, cluster status), and
// resources it reads (the skill file, a stream's instructions).
//
// [New] builds one *mcp.Server (github.com/modelcontextprotocol/go-sdk) for
// one MCP session. Its tools call the cluster through a [client.Client], so
// the same code serves /mcp on every node (package httpapi, with a client
// that reaches the node itself under the caller's token) and `spine mcp` over
// stdio (with a client of every node of the cluster): leader forwarding and
// retries are the client's and the API's, and the API enforces every
// permission. The role the server is built for only decides which tools an
// agent sees.
//
// A claim's leases are kept in the server, that is in the session: heartbeat,
// complete, fail and release name only the job, and the session supplies its
// worker id, attempt id and lease token, so an agent cannot lose or garble
// them. The claim's answer still shows them, for an agent that must finish a
// job from another session (its node died); a lease_token given to a call
// wins over the session's.
//
// A refused call is a tool error (IsError), never a protocol error, and its
// text says what happened and what to do next: drop a job whose lease ended
// and claim again, call again after an election, try another node.
// docs/mcp.md is the user's guide.
package mcpserver
