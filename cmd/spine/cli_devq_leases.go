package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A claim's lease token and attempt id are kept on the claimer's machine,
// one file per task, so "spine complete ID" needs neither from the user.
// A complete or fail that was answered keeps the file, marked finished: a
// repeat of it then names the same attempt and lease, and the server
// answers it as the first (the worker contract's rule, seed 002:
// idempotent by job and attempt, guarded by the lease token). Finished
// files are removed by a later claim once older than finishedLeaseKeep.

type lease struct {
	Token     string `json:"lease_token"`
	AttemptID string `json:"attempt_id"`
	// Finished is set once a complete or fail of the attempt was answered.
	Finished bool `json:"finished,omitempty"`
}

// finishedLeaseKeep is how long a finished lease is kept for a repeat:
// longer than the default purge of finished tasks (3 days), after which
// the task itself is gone.
const finishedLeaseKeep = 7 * 24 * time.Hour

// leaseDir is SPINE_LEASE_DIR, else $XDG_STATE_HOME/spine/leases, else
// ~/.local/state/spine/leases.
func leaseDir(env *cliEnv) (string, error) {
	if d := env.getenv("SPINE_LEASE_DIR"); d != "" {
		return d, nil
	}
	if d := env.getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "spine", "leases"), nil
	}
	home := env.getenv("HOME")
	if home == "" {
		return "", errors.New("no HOME, XDG_STATE_HOME or SPINE_LEASE_DIR to keep lease tokens in")
	}
	return filepath.Join(home, ".local", "state", "spine", "leases"), nil
}

func leaseFile(env *cliEnv, id string) (string, error) {
	d, err := leaseDir(env)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, strings.ReplaceAll(id, string(os.PathSeparator), "_")+".json"), nil
}

func saveLease(env *cliEnv, id string, l lease) error {
	p, err := leaseFile(env, id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if !l.Finished {
		pruneFinishedLeases(filepath.Dir(p), time.Now().Add(-finishedLeaseKeep))
	}
	b, _ := json.Marshal(l)
	return os.WriteFile(p, b, 0o600)
}

// pruneFinishedLeases removes the finished leases of dir last written
// before cutoff. A lease still running is never removed.
func pruneFinishedLeases(dir string, cutoff time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		var l lease
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &l) == nil && l.Finished {
			_ = os.Remove(p)
		}
	}
}

// fillLease fills the token and attempt id the user did not give from the
// saved lease, if there is one.
func fillLease(env *cliEnv, id string, token, attempt *string) {
	if *token != "" {
		return
	}
	p, err := leaseFile(env, id)
	if err != nil {
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return
	}
	var l lease
	if json.Unmarshal(b, &l) == nil {
		*token = l.Token
		if *attempt == "" {
			*attempt = l.AttemptID
		}
	}
}

// finishLease marks the saved lease of task id finished (its complete or
// fail was answered), keeping it so a repeat names the same attempt.
func finishLease(env *cliEnv, id, token, attempt string) {
	if token == "" {
		return
	}
	_ = saveLease(env, id, lease{Token: token, AttemptID: attempt, Finished: true})
}
