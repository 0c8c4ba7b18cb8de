//go:build !linux

package netns

import "errors"

// Do runs fn in host i's namespace (Linux only).
func (t *Net) Do(i int, fn func() error) error {
	return errors.New("netns: network namespaces are Linux's")
}
