package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func (h *harness) level(l int) {
	h.t.Helper()
	mustOK(h.t, h.apply(CmdLevel, &LevelCommand{Now: h.now, Level: l}))
}

// A token is stored under its name and hash (never a secret), refused
// twice or with a bad role, revoked by name; the watchers hear of each
// change; the events of a command name its actor's token.
func TestTokensCreateRevoke(t *testing.T) {
	h := newHarness(t)
	hash := strings.Repeat("0f", 32)
	create := &TokenCreateCommand{Now: h.now, Name: "agent-1", Hash: hash, Role: RoleLeftClaw, Streams: []string{"ml"},
		WorkerID: "w1", ExpiresAt: h.now + 3600e9, Note: "the indexer", Actor: Actor{Role: HeadRole}}
	if r := h.apply(CmdTokenCreate, create); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("create below LevelPolicies: %v", r.Err)
	}
	h.level(LevelPolicies)
	ch := h.f.TokensChanged()
	r := h.apply(CmdTokenCreate, create)
	mustOK(t, r)
	select {
	case <-ch:
	default:
		t.Fatal("a create did not wake the tokens' watchers")
	}
	tk := h.f.Read().TokenByHash(hash)
	if tk == nil || tk != r.Token || tk.Name != "agent-1" || tk.Role != RoleLeftClaw || tk.WorkerID != "w1" || tk.Note != "the indexer" ||
		tk.CreatedBy != "head" || tk.Index != h.idx {
		t.Fatalf("token by hash %+v", tk)
	}
	if h.f.Read().TokenNamed("agent-1") != tk || len(h.f.Read().Tokens()) != 1 {
		t.Fatal("token by name")
	}
	if r := h.apply(CmdTokenCreate, create); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("same name twice: %v", r.Err)
	}
	other := *create
	other.Name = "agent-2"
	if r := h.apply(CmdTokenCreate, &other); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("same hash twice: %v", r.Err)
	}
	other.Hash, other.Role = strings.Repeat("1f", 32), "root"
	if r := h.apply(CmdTokenCreate, &other); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("unknown role: %v", r.Err)
	}

	// The job events of a command name the token its actor carries.
	j := h.create(CreateCommand{Stream: "ml"})
	r = h.apply(CmdClaim, &ClaimCommand{Now: h.now, JobID: j.ID, Actor: Actor{Role: RoleLeftClaw, WorkerID: "w1", Token: "agent-1"},
		AttemptID: "a1", LeaseToken: "l1", LeaseNanos: 60e9})
	mustOK(t, r)
	ev := r.Job.History()[len(r.Job.History())-1]
	if actor, token := ev.Who(); ev.Type != EventClaimed || token != "agent-1" || actor != "left_claw/w1" {
		t.Fatalf("claim event %+v", ev)
	}
	if ev := r.Job.History()[0]; ev.Actor != "head" {
		t.Fatalf("the create's event took a later token: %+v", ev)
	}

	ch = h.f.TokensChanged()
	mustOK(t, h.apply(CmdTokenRevoke, &TokenRevokeCommand{Now: h.now, Name: "agent-1", Actor: head}))
	select {
	case <-ch:
	default:
		t.Fatal("a revoke did not wake the tokens' watchers")
	}
	if h.f.Read().TokenByHash(hash) != nil || h.f.Read().TokenNamed("agent-1") != nil {
		t.Fatal("revoked token still found")
	}
	if r := h.apply(CmdTokenRevoke, &TokenRevokeCommand{Now: h.now, Name: "agent-1", Actor: head}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("revoke twice: %v", r.Err)
	}
}

// A snapshot carries the tokens, and the restore finds them by hash.
func TestTokensInSnapshot(t *testing.T) {
	h := newHarness(t)
	h.level(LevelPolicies)
	hash := strings.Repeat("ab", 32)
	mustOK(t, h.apply(CmdTokenCreate, &TokenCreateCommand{Now: h.now, Name: "ops", Hash: hash, Role: OperatorRole,
		Streams: []string{"a", "b"}, Note: "n", Actor: head}))
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	tk := f2.Read().TokenByHash(hash)
	if tk == nil || tk.Name != "ops" || tk.Role != OperatorRole || len(tk.Streams) != 2 || f2.Read().TokenNamed("ops") == nil {
		t.Fatalf("restored token %+v", tk)
	}
	if stateHash(t, h.f) != stateHash(t, f2) {
		t.Fatal("restored state differs")
	}
}
