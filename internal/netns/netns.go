// Package netns puts test hosts on a network of their own so that tests can
// cut the links between them for real: each host is a Linux network
// namespace with one veth interface on a bridge, and the test process, in
// the root namespace, reaches every host through the bridge (as a client
// on another machine would). A cut drops every IP packet (TCP and UDP, so
// raft, forwarding, joins and gossip alike) from one host to another,
// silently, as a pulled cable or a dropping firewall does: the sender sees
// no error at once, its connections stall until they time out. Cuts are
// one-way; a two-way partition is two cuts.
//
// A cut is a blackhole route in the sender's namespace (iproute2 only: no
// firewall or traffic-control module is needed, which some kernels lack).
// Reverse-path filtering is off in the namespaces, so a one-way cut stays
// one-way: packets from a host to which replies are cut are still taken.
//
// It needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the `ip` command;
// [Available] says whether this machine can. Everything New makes is
// removed by Close.
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Net is a bridge in the root namespace and one namespace per host.
type Net struct {
	tag    string // unique per Net: names of the bridge, namespaces and links
	prefix string // "10.a.b."
	hosts  int

	mu   sync.Mutex
	cuts map[[2]int]bool // (from, to) host indexes, 0-based
}

// Available returns nil if namespaces can be made here, or why not.
func Available() error {
	if runtime.GOOS != "linux" {
		return errors.New("network namespaces are Linux's")
	}
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the ip command (iproute2) is not installed")
	}
	name := fmt.Sprintf("spine-probe-%d", os.Getpid())
	if err := run("ip", "netns", "add", name); err != nil {
		return fmt.Errorf("cannot make a network namespace: %w", err)
	}
	_ = run("ip", "netns", "del", name)
	return nil
}

// counter makes tags unique among the Nets of one process; the pid makes
// them unique among processes.
var (
	counterMu sync.Mutex
	counter   int
)

// New makes a network of n hosts (n from 1 to 200): host i (0-based) is
// namespace [Net.Namespace](i) with address [Net.IP](i) on a /24 that no
// interface of this machine uses yet; the root namespace is .254 on it.
func New(n int) (*Net, error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("netns: %d hosts: want 1 to 200", n)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	counterMu.Lock()
	counter++
	tag := fmt.Sprintf("%x%x", os.Getpid()%0xffff, counter)
	counterMu.Unlock()
	t := &Net{tag: tag, hosts: n, cuts: map[[2]int]bool{}}
	var err error
	if t.prefix, err = freeSubnet(); err != nil {
		return nil, err
	}
	if err := t.build(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// freeSubnet picks a 10.x.y.0/24 that no address of the root namespace is
// in (parallel tests each get their own).
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("netns: ip addr: %w", err)
	}
	for tries := 0; tries < 50; tries++ {
		p := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(256))
		if !bytes.Contains(out, []byte(" "+p)) {
			return p, nil
		}
	}
	return "", errors.New("netns: no free 10.x.y.0/24 subnet")
}

func (t *Net) bridge() string        { return "spb" + t.tag }
func (t *Net) rootLink(i int) string { return fmt.Sprintf("spv%s-%d", t.tag, i) }

// Namespace is host i's namespace name.
func (t *Net) Namespace(i int) string { return fmt.Sprintf("spine-%s-%d", t.tag, i) }

// IP is host i's address.
func (t *Net) IP(i int) string { return fmt.Sprintf("%s%d", t.prefix, i+1) }

// Hosts is the number of hosts.
func (t *Net) Hosts() int { return t.hosts }

func (t *Net) build() error {
	br := t.bridge()
	steps := [][]string{
		{"ip", "link", "add", br, "type", "bridge"},
		{"ip", "addr", "add", t.prefix + "254/24", "dev", br},
		{"ip", "link", "set", br, "up"},
	}
	for i := 0; i < t.hosts; i++ {
		ns, root := t.Namespace(i), t.rootLink(i)
		peer := root + "p"
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", root, "type", "veth", "peer", "name", peer},
			[]string{"ip", "link", "set", peer, "netns", ns},
			[]string{"ip", "link", "set", root, "master", br},
			[]string{"ip", "link", "set", root, "up"},
			[]string{"ip", "-n", ns, "link", "set", peer, "name", "eth0"},
			[]string{"ip", "-n", ns, "addr", "add", t.IP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0"},
		)
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return fmt.Errorf("netns: %w", err)
		}
	}
	return nil
}

// Command is cmd run in host i's namespace: `ip netns exec` execs the
// program itself, so the process's pid is the program's.
func (t *Net) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", t.Namespace(i), name}, args...)...)
}

// Cut drops every packet from host from to host to (one way).
func (t *Net) Cut(from, to int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut(from, to)
}

func (t *Net) cut(from, to int) error {
	if from == to || from < 0 || to < 0 || from >= t.hosts || to >= t.hosts {
		return fmt.Errorf("netns: cut %d -> %d of %d hosts", from, to, t.hosts)
	}
	k := [2]int{from, to}
	if t.cuts[k] {
		return nil
	}
	if err := run("ip", "-n", t.Namespace(from), "route", "add", "blackhole", t.IP(to)+"/32"); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	t.cuts[k] = true
	return nil
}

// Partition cuts every link between hosts of different groups, both ways;
// a host in no group keeps all its links (a bridge between the groups).
func (t *Net) Partition(groups ...[]int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for gi, g := range groups {
		for gj, h := range groups {
			if gi == gj {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					if err := t.cut(a, b); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// Cuts lists the cut links as "from->to" by host index, sorted.
func (t *Net) Cuts() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.cuts {
		out = append(out, fmt.Sprintf("%d->%d", k[0], k[1]))
	}
	sort.Strings(out)
	return out
}

// Heal restores every link.
func (t *Net) Heal() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for k := range t.cuts {
		if err := run("ip", "-n", t.Namespace(k[0]), "route", "del", "blackhole", t.IP(k[1])+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(t.cuts, k)
	}
	return errors.Join(errs...)
}

// Close removes the namespaces, links and bridge. The processes started in
// the namespaces must have exited (a namespace with a process in it lives
// on, unnamed, until the process ends).
func (t *Net) Close() error {
	var errs []error
	for i := 0; i < t.hosts; i++ {
		_ = run("ip", "link", "del", t.rootLink(i)) // takes its peer along
		if err := run("ip", "netns", "del", t.Namespace(i)); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	if err := run("ip", "link", "del", t.bridge()); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
