package chaos

import (
	"fmt"
	"strings"
)

// The classes of [Problem] the verdict line counts.
const (
	ClassLost   = "lost"
	ClassDouble = "double"
)

// Verdict is the one-line outcome of a fault scenario: what `make chaos`
// prints for each, whether it ran the random workload (Run) or a scripted
// scenario of its own (power loss, corruption).
type Verdict struct {
	Scenario string // e.g. "kills+pauses", "partitions/5", "power-loss"
	Nodes    int
	Seed     int64 // 0: the scenario draws nothing at random
	Ops      int   // client operations carried out
	Faults   int   // faults injected
	// Linearizable is "yes", "no", "unknown" (the check ran out of time)
	// or "n/a" (no history checked: a scripted scenario).
	Linearizable string
	Acked        int // acknowledged creates
	Lost         int // acknowledged jobs missing afterwards
	Double       int // jobs completed twice, or run again after an acknowledged complete
	Diverged     bool
	Pass         bool
	Note         string // what else the scenario wants said (one line)
}

// String is the verdict line, beginning "VERDICT" so that a log can be
// grepped for every scenario's.
func (v Verdict) String() string {
	res := "PASS"
	if !v.Pass {
		res = "FAIL"
	}
	div := "no"
	if v.Diverged {
		div = "YES"
	}
	lin := v.Linearizable
	if lin == "" {
		lin = "n/a"
	}
	s := fmt.Sprintf("VERDICT %-22s %s nodes=%d ops=%d faults=%d linearizable=%s acked=%d lost=%d double_completions=%d diverged=%s",
		v.Scenario, res, v.Nodes, v.Ops, v.Faults, lin, v.Acked, v.Lost, v.Double, div)
	if v.Seed != 0 {
		s += fmt.Sprintf(" seed=%d", v.Seed)
	}
	if v.Note != "" {
		s += " (" + strings.TrimSpace(v.Note) + ")"
	}
	return s
}

// Verdict sums a run's report up under the name scenario.
func (r *Report) Verdict(scenario string) Verdict {
	v := Verdict{Scenario: scenario, Nodes: r.Nodes, Seed: r.Seed, Faults: len(r.Faults), Acked: r.Acked,
		Lost: r.Lost, Double: r.Double, Pass: r.OK()}
	for _, c := range r.Ops {
		v.Ops += c[0] + c[1] + c[2]
	}
	switch l := r.Linearizability; {
	case !l.Ran:
		v.Linearizable = "n/a"
	case len(l.Illegal) > 0:
		v.Linearizable = "no"
	case len(l.Unknown) > 0:
		v.Linearizable = "unknown"
	default:
		v.Linearizable = "yes"
	}
	v.Diverged = r.Verified && !r.HashesAgree
	if !r.Verified {
		v.Note = "final state not verified"
	}
	return v
}
