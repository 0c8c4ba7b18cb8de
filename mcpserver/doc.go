// Package mcpserver is Spine's MCP (Model Context Protocol) server: tools
// with JSON schemas through which an AI agent works the queue, as a claw
// (list streams, peek, claim, heartbeat, complete, fail, release, comment)
// or as head (enqueue, list, redrive, requeue, cancel, cluster status), and
// resources it reads (the skill file, a stream's instructions).
//
// [New] builds one *mcp.Server (github.com/modelcontextprotocol/go-sdk) for
// one MCP session. Its tools call the queue through a [Backend], so the same
// tools serve /mcp on every node (package httpapi, whose backend calls the
// node's queue service as the session's role, on the leader) and `spine mcp`
// over stdio (whose backend is a [client.Client] of every node of the
// cluster). Either backend enforces every permission of the API and answers
// a refusal as the API does; the role the server is built for only decides
// which tools an agent sees.
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
