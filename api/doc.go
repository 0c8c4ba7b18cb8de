// Package api is Spine's HTTP API contract, declared once for the server
// (package httpapi) and the Go client (package client): the job and its
// history as the API shows them, the request bodies, the worker contract v1,
// health and cluster status, the error body and its codes, and the header
// names. docs/api.md and docs/openapi.yaml describe the same contract in
// prose.
//
// The package imports only the Go standard library, so that a program that
// talks to Spine (or vendors the client) pulls in nothing of the server. Its
// sibling api/wire is the framing of the multiplexed connection below the
// HTTP API.
//
// # JSON
//
// Every answer type encodes byte for byte as the server writes it: field
// order, omitted fields and null included. A job's "target" and a list's
// "nextCursor" are null when empty ([NullableString]); the server always
// sends lists (jobs, comments, events, attempts) as arrays, never null.
// Times are [time.Time] values in UTC (see [Time]), which encode as RFC 3339
// with nanoseconds.
//
// Requests decode the way the server needs them: [JobCreateRequest] records
// which optional fields its body named, so an explicit "maxAttempts": 0 can
// be refused rather than read as "not given"; [JobError] accepts the plain
// string form of an error as well as the object.
package api
