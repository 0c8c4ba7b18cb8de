package clusterinfo

import "regexp"

// NodeIDRule says what a node id may be (ValidNodeID), in the words of
// the answers that refuse one.
const NodeIDRule = "1 to 255 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"

var nodeIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$`)

// ValidNodeID reports whether id may name a node (NodeIDRule): a host
// name, the default, does.
func ValidNodeID(id string) bool { return nodeIDRE.MatchString(id) }
