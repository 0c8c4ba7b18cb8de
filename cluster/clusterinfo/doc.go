// Package clusterinfo is the vocabulary of the replication layer that the
// layers above it speak: the cluster's status, a member to add, a node's
// metrics, the keys of its gossip ring, a snapshot's description, the rules
// of a node id and a gossip key, and the sentinel errors of package cluster.
// It imports only the standard library, so the HTTP API (httpapi) reaches
// the cluster through an interface and this package, never through package
// cluster or raft (docs/design.md, "Layers"). Package cluster declares the
// same names as aliases of these, so either spelling is the same type and
// the same error value.
package clusterinfo
