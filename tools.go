//go:build tools

// Package tools pins the module's direct dependencies before every package
// that uses them exists. It is never built.
package tools

import (
	_ "github.com/google/uuid"
	_ "github.com/gorilla/mux"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/go-memdb"
	_ "github.com/hashicorp/go-msgpack/v2/codec"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
)
