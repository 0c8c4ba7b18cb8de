package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn in host i's namespace: the sockets fn opens (listeners,
// connections) belong to that host and keep doing so after fn returns. It
// runs fn on an OS thread of its own, which is thrown away afterwards.
func (t *Net) Do(i int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, switched to another namespace, ends
		// with this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		f, err := os.Open("/var/run/netns/" + t.Namespace(i))
		if err != nil {
			errc <- fmt.Errorf("netns: %w", err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: setns %s: %w", t.Namespace(i), err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
