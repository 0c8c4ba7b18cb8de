package testcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Status is the part of a node's GET /cluster/status the harness reads.
// The state-hash fields are pointers: nil when the node does not report
// them, which CheckConverged reports as an error rather than skipping.
type Status struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Leader       struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
	// HashIndex is the index of the last command entry folded into
	// StateHash, the node's running hash of the commands it applied.
	HashIndex *uint64 `json:"hash_index"`
	StateHash *string `json:"state_hash"`
	// HashMismatches counts the times the node saw a peer report another
	// hash for the same index (must stay 0).
	HashMismatches *uint64 `json:"hash_mismatches"`
}

// Status asks one node for GET /cluster/status (head token).
func (c *Cluster) Status(n *Node) (*Status, error) {
	return fetchStatus(c.client, n.ID, n.URL, HeadToken)
}

func fetchStatus(cl *http.Client, id, url, token string) (*Status, error) {
	req, err := http.NewRequest(http.MethodGet, url+"/cluster/status", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := cl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s /cluster/status: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /cluster/status: %s", id, resp.Status)
	}
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("%s /cluster/status: %w", id, err)
	}
	return &st, nil
}

// CheckConverged checks that the replicas hold the same state. It waits
// (up to timeout) until every running node reports the same applied_index
// in /cluster/status, then requires that they all report the same
// hash_index and state_hash and that none has counted a hash mismatch with
// a peer. Nodes that are not running (killed and not restarted) are left
// out; a paused node is an error (Resume it first). The error names every
// node's values. Call it once the load has stopped: a leader may still
// append an entry of its own (a no-op after an election), which the wait
// absorbs.
func (c *Cluster) CheckConverged(timeout time.Duration) error {
	var nodes []*Node
	for _, n := range c.Nodes {
		if n.Paused() {
			return fmt.Errorf("testcluster: cannot check convergence: %s is paused (SIGSTOP); resume it first", n.ID)
		}
		if n.Running() {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	return converged(ids(nodes), func(i int) (*Status, error) { return c.Status(nodes[i]) }, timeout)
}

// CheckURLsConverged is CheckConverged for nodes the harness did not start
// (e.g. a local cluster spine run started): the nodes at urls, asked with
// token.
func CheckURLsConverged(urls []string, token string, timeout time.Duration) error {
	cl := &http.Client{Timeout: 5 * time.Second}
	return converged(urls, func(i int) (*Status, error) { return fetchStatus(cl, urls[i], urls[i], token) }, timeout)
}

// converged waits for the nodes named by ids (status(i) asks the i-th) to
// reach the same applied index, then compares their hashes.
func converged(ids []string, status func(i int) (*Status, error), timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for polls := 0; ; polls++ {
		sts := make([]*Status, len(ids))
		var errs []string
		for i := range ids {
			st, err := status(i)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			sts[i] = st
		}
		if len(errs) == 0 && sameApplied(sts) {
			return compareHashes(ids, sts)
		}
		if time.Now().After(deadline) || polls > 100000 {
			msg := fmt.Sprintf("testcluster: the nodes did not reach the same applied_index within %v:\n%s", timeout, describeStatuses(ids, sts))
			if len(errs) > 0 {
				msg += "\n  " + strings.Join(errs, "\n  ")
			}
			return errors.New(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ids(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

func sameApplied(sts []*Status) bool {
	for _, st := range sts {
		if st == nil || st.AppliedIndex != sts[0].AppliedIndex {
			return false
		}
	}
	return true
}

// compareHashes checks statuses taken at the same applied index: every
// node reports the state-hash fields, with the same hash_index and
// state_hash, and no hash mismatch.
func compareHashes(ids []string, sts []*Status) error {
	var problems []string
	for i, st := range sts {
		var missing []string
		if st.HashIndex == nil {
			missing = append(missing, "hash_index")
		}
		if st.StateHash == nil {
			missing = append(missing, "state_hash")
		} else if *st.StateHash == "" {
			problems = append(problems, fmt.Sprintf("%s: state_hash is empty (the node does not know its state hash)", ids[i]))
		} else if !isHex64(*st.StateHash) {
			problems = append(problems, fmt.Sprintf("%s: state_hash %q is not 64 hex digits", ids[i], *st.StateHash))
		}
		if st.HashMismatches == nil {
			missing = append(missing, "hash_mismatches")
		} else if *st.HashMismatches > 0 {
			problems = append(problems, fmt.Sprintf("%s: hash_mismatches %d (it saw a peer report another hash for the same index)", ids[i], *st.HashMismatches))
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("%s: /cluster/status has no %s", ids[i], strings.Join(missing, ", ")))
		}
	}
	if len(problems) == 0 {
		for i, st := range sts[1:] {
			if *st.HashIndex != *sts[0].HashIndex || *st.StateHash != *sts[0].StateHash {
				problems = append(problems, fmt.Sprintf("%s and %s hold different states at applied index %d",
					ids[0], ids[i+1], sts[0].AppliedIndex))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("testcluster: replicas diverge: %s\n%s", strings.Join(problems, "; "), describeStatuses(ids, sts))
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// describeStatuses is one line per node with every value compared.
func describeStatuses(ids []string, sts []*Status) string {
	var b strings.Builder
	for i, st := range sts {
		if i > 0 {
			b.WriteByte('\n')
		}
		if st == nil {
			fmt.Fprintf(&b, "  %s: no status", ids[i])
			continue
		}
		u := func(p *uint64) string {
			if p == nil {
				return "MISSING"
			}
			return fmt.Sprint(*p)
		}
		h := "MISSING"
		if st.StateHash != nil {
			h = *st.StateHash
		}
		fmt.Fprintf(&b, "  %s: state %s, term %d, applied_index %d, commit_index %d, hash_index %s, state_hash %s, hash_mismatches %s",
			ids[i], st.State, st.Term, st.AppliedIndex, st.CommitIndex, u(st.HashIndex), h, u(st.HashMismatches))
	}
	return b.String()
}
