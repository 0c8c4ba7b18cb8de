package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// commandSamples returns, for every command type, a zero command, a typical
// one and one with large and unusual fields.
func commandSamples() map[CommandType][]interface{} {
	big := strings.Repeat("é", 70_000)
	bigB := bytes.Repeat([]byte{0, 0xff}, 100_000)
	a := Actor{Role: "left_claw", WorkerID: "w-1"}
	ref := LeaseRef{JobID: "j1", AttemptID: "a1", Token: "t1"}
	return map[CommandType][]interface{}{
		CmdCreate: {&CreateCommand{}, &CreateCommand{Now: 1, ID: "j", Stream: "s", Payload: []byte(`{}`), Actor: head},
			&CreateCommand{Now: -1 << 62, ID: big, Stream: big, Target: "t", Payload: bigB, MaxAttempts: -3, LeaseSeconds: 1 << 40,
				TaskClass: "LLM_HEAVY", IdempotencyKey: big, Actor: a},
			&CreateCommand{ID: "empty payload", Payload: []byte{}},
			&CreateCommand{Now: 1, ID: "j", Stream: "s", Payload: []byte(`{}`), Actor: a, Priority: -7,
				RunAt: 5e9, BackoffBase: 2, BackoffMax: 60, ConcurrencyKey: "tenant-7", ConcurrencyLimit: 2},
			&CreateCommand{Now: 1, ID: "j", Stream: "s", Payload: []byte(`{}`), Actor: a, Priority: 3, Requires: []string{"gpu:a100", "cuda"}},
			&CreateCommand{Now: 1, ID: "j", Stream: "s", Payload: []byte(`{}`), Actor: a, DependsOn: []string{"a", "b"},
				Requires: []string{"gpu"}, RunOnDepFailure: true}},
		CmdClaim: {&ClaimCommand{}, &ClaimCommand{Now: 5, JobID: "j", Streams: []string{"a", "", big}, Targets: []string{"x"},
			Actor: a, AttemptID: "a", LeaseToken: "t", LeaseNanos: 300e9},
			&ClaimCommand{Now: 5, Streams: []string{"a", "", big}, Targets: []string{"x", ""}, Actor: a, AttemptID: "a", LeaseToken: "t", LeaseNanos: 300e9},
			&ClaimCommand{Now: 5, Streams: []string{"a"}, Targets: []string{"x", ""}, Actor: a, AttemptID: "k_key", LeaseToken: "t", LeaseNanos: 300e9, Keyed: true},
			&ClaimCommand{Now: 4, Streams: []string{"a", "b"}, Targets: []string{"left_claw", "w1"}, Actor: a,
				AttemptIDs: []string{"a1", "a2"}, LeaseTokens: []string{"t1", "t2"}, LeaseNanos: 60e9},
			&ClaimCommand{Now: 3, Capabilities: []string{"gpu"}, Probe: true},
			&ClaimCommand{Now: 4, Capabilities: []string{"gpu", "lang:python"}, Streams: []string{"a"}, Targets: []string{"left_claw"}, Actor: a,
				AttemptIDs: []string{"a1"}, LeaseTokens: []string{"t1"}, LeaseNanos: 9},
			&ClaimCommand{Now: 5, Capabilities: []string{"x"}, JobID: "j", Actor: a, AttemptID: "a", LeaseToken: "t", LeaseNanos: 1}},
		CmdGatewayRegister: {&GatewayRegisterCommand{}, &GatewayRegisterCommand{Now: 3, ID: "g1", Address: "http://10.0.0.1:8080",
			Metadata: map[string]string{"zone": "eu", "": big}, Capacity: 8, Actor: a},
			&GatewayRegisterCommand{Now: 3, ID: "g2", Address: "http://10.0.0.2:8080", Capacity: 1, Actor: head,
				Delivery: DeliveryPush, Role: RoleRightClaw, Secret: big}},
		CmdDispatch: {&DispatchCommand{}, &DispatchCommand{Now: 5, Step: DispatchLease, JobID: "j1", Gateway: "g2", AttemptID: "a1",
			LeaseToken: "t1", LeaseNanos: 30e9}, &DispatchCommand{Now: 6, Step: DispatchRefused, JobID: "j1", Gateway: "g2", LeaseToken: "t1", Reason: big}},
		CmdGatewayDeregister: {&GatewayDeregisterCommand{}, &GatewayDeregisterCommand{Now: 3, ID: big, Actor: head}},
		CmdWorkerRegister: {&WorkerRegisterCommand{}, &WorkerRegisterCommand{Now: 3, ID: "w1", Gateway: "g1", Capabilities: []string{"gpu", ""},
			Metadata: map[string]string{"os": "linux"}, Capacity: 2, Actor: a}},
		CmdHealthSet: {&HealthSetCommand{}, &HealthSetCommand{Now: 4, Changes: []HealthChange{{Gateway: true, ID: "g1", Health: HealthSuspect},
			{ID: big, Health: HealthDead}}}},
		CmdRoute: {&RouteCommand{}, &RouteCommand{Now: 4, JobID: "j1", Spec: RouteSpec{Capabilities: []string{"gpu"},
			Labels: map[string]string{"zone": "eu"}, Key: "claim-token-1"}, Actor: head}},
		CmdTaskStep: {&TaskStepCommand{}, &TaskStepCommand{Op: TaskFail, Now: 9, Ref: ref, Actor: a, Result: bigB, Stdout: big, Stderr: "e",
			Error: JobError{Code: "E", Message: "m", Retryable: true}, Requeue: true, Reason: "later"}},
		CmdFeedOn: {&FeedOnCommand{}, &FeedOnCommand{Now: -5}},
		CmdLevel:  {&LevelCommand{}, &LevelCommand{Now: 7, Level: LatestLevel}},
		CmdScheduleSet: {&ScheduleSetCommand{}, &ScheduleSetCommand{Now: 1, Replace: true, Actor: a, Schedule: &Schedule{Name: "n", Cron: "*/5 * * * * *",
			Timezone: "Europe/Paris", Overlap: OverlapQueue, Catchup: CatchupAll, CatchupWindow: 60, Note: "x", Paused: true,
			Template: &CreateCommand{Stream: "s", Payload: []byte(`{}`), Priority: 3, Requires: []string{"gpu"}},
			Recent:   []ScheduleRun{{Tick: 5, JobID: "j"}, {Tick: 6, Trigger: true, Error: "e"}}}}},
		CmdScheduleDelete:   {&ScheduleDeleteCommand{}, &ScheduleDeleteCommand{Now: 2, Name: "n", Actor: a}},
		CmdSchedulePause:    {&SchedulePauseCommand{}, &SchedulePauseCommand{Now: 2, Name: "n", Pause: true, Actor: a}},
		CmdScheduleFire:     {&ScheduleFireCommand{}, &ScheduleFireCommand{Now: 3, Name: "n", Through: 9e9, ID: "a", Trigger: true, Dropped: 4}},
		CmdWorkerDeregister: {&WorkerDeregisterCommand{}, &WorkerDeregisterCommand{Now: 3, ID: "w1", Actor: a}},
		CmdHeartbeat: {&HeartbeatCommand{}, &HeartbeatCommand{Now: 9, Ref: ref, Actor: a, LeaseNanos: 1},
			&HeartbeatCommand{Now: 3, Ref: LeaseRef{JobID: "j", AttemptID: "a", Token: "t"}, Actor: a, LeaseNanos: 9,
				Progress: []byte(`{"pct":40}`), Checkpoint: []byte(`{"page":7}`)}, &HeartbeatCommand{Progress: []byte{}}},
		CmdSessionCreate: {&SessionCreateCommand{}, &SessionCreateCommand{Now: 9, ID: "ses_1", Name: "api-v2", Description: big, Actor: head}},
		CmdSessionEnd:    {&SessionEndCommand{}, &SessionEndCommand{Now: 9, Name: "api-v2", Actor: head}},
		CmdStreamCreate: {&StreamCreateCommand{}, &StreamCreateCommand{Now: 9, ID: "str_1", Name: "auth", Session: "api-v2",
			Instructions: big, Actor: head}},
		CmdStreamEnd: {&StreamEndCommand{}, &StreamEndCommand{Now: 9, Name: "auth", Actor: a}},
		CmdPromote:   {&PromoteCommand{}, &PromoteCommand{Now: 7e9, Max: 512}},
		CmdCancel:    {&CancelCommand{}, &CancelCommand{Now: 9, JobID: "j1", Reason: "not needed", Actor: a}},
		CmdTokenCreate: {&TokenCreateCommand{}, &TokenCreateCommand{Now: 9, Name: "agent-7", Hash: strings.Repeat("ab", 32), Role: RoleLeftClaw,
			Streams: []string{"ml", "ops"}, WorkerID: "w-7", ExpiresAt: 1 << 62, Note: big, Actor: head}},
		CmdTokenRevoke: {&TokenRevokeCommand{}, &TokenRevokeCommand{Now: 9, Name: "agent-7", Actor: head}},
		CmdStreamDefaults: {&StreamDefaultsCommand{}, &StreamDefaultsCommand{Now: 9, Stream: "ml", ConcurrencyKey: "gpu-box", ConcurrencyLimit: 4, Actor: a},
			&StreamDefaultsCommand{Now: -1, Stream: "ml", ConcurrencyLimit: 2, Actor: a}},
		CmdStreamPause: {&StreamPauseCommand{}, &StreamPauseCommand{Now: 9, Stream: "auth", Pause: true, Reason: "deploy", Actor: a},
			&StreamPauseCommand{Now: -1, Stream: "auth", Actor: a}},
		CmdRegistrySet: {&RegistrySetCommand{}, &RegistrySetCommand{Now: 9, Actor: head, Registry: Registry{
			Project: Project{Name: "p", RepoPath: "/r", PRDPath: "docs/PRD.md"}, Classes: DefaultTaskClasses,
			Tools:      []Tool{{Name: "run-bash", Description: big, TaskClass: "MEDIUM_SCRIPT", Timeout: 1800}},
			ScriptDirs: []string{"scripts", ""}, PurgeDays: 3, UpdatedAt: -1,
			Scripts: []Script{{Path: "scripts/a.sh", Name: "a", Description: "d", Inputs: "i", Outputs: "o", Tags: []string{"x", ""}}}}}},
		CmdTaskCreate: {&TaskCreateCommand{}, &TaskCreateCommand{Now: 9, ID: "t", Stream: "auth", ToolName: "run-bash", Timeout: 1 << 40,
			Payload: bigB, IdempotencyKey: big, ClonedFrom: "t0", Actor: a}},
		CmdTaskPurge: {&TaskPurgeCommand{}, &TaskPurgeCommand{Now: 9, Before: -3, Max: 1000}},
		CmdComplete:  {&CompleteCommand{}, &CompleteCommand{Now: 9, Ref: ref, Actor: a, Result: bigB, Stdout: big, Stderr: "e"}},
		CmdCompleteRefused: {&CompleteRefusedCommand{}, &CompleteRefusedCommand{Now: 9, Ref: ref, Actor: a, Text: "1 mismatch: /n: expected type integer, got type string"},
			&CompleteRefusedCommand{Now: -1, Ref: ref, Text: big}},
		CmdFail: {&FailCommand{}, &FailCommand{Now: 9, Ref: ref, Actor: a, Requeue: true, Stdout: "o",
			Error: JobError{Code: "E", Message: big, Stack: "s", Retryable: true}}},
		CmdRelease: {&ReleaseCommand{}, &ReleaseCommand{Now: 9, Ref: ref, Actor: a, Reason: "later"},
			&ReleaseCommand{Now: 2, Ref: LeaseRef{JobID: "j", AttemptID: "a", Token: "t"}, Actor: a, Reason: "no gpu", NotBefore: 9e9},
			&ReleaseCommand{Now: 2, Ref: LeaseRef{JobID: "j", AttemptID: "a", Token: "t"}, Actor: Actor{Role: "left_claw", WorkerID: "w1"},
				Reason: "no gpu", NotBefore: 9e9, NotFor: true}},
		CmdReap:       {&ReapCommand{}, &ReapCommand{Now: 9, Max: 100}},
		CmdComment:    {&CommentCommand{}, &CommentCommand{Now: 9, JobID: "j", Actor: a, Text: big}},
		CmdRedrive:    {&RedriveCommand{}, &RedriveCommand{Now: 9, JobID: "j", Actor: head}},
		CmdPurge:      {&PurgeCommand{}, &PurgeCommand{Now: 9, Before: -3, Max: 1000}},
		CmdBlobChunk:  {&BlobChunkCommand{}, &BlobChunkCommand{BlobID: "b", Seq: 7, Data: bigB}},
		CmdBlobCommit: {&BlobCommitCommand{}, &BlobCommitCommand{Now: 9, BlobID: "b", Size: 1 << 33, ContentType: "text/plain", Chunks: 3}},
	}
}

// Every command of the table round-trips in the tagged encoding, and in
// the positional one of the builds before LevelTagged (under the type of
// the form that carries its fields); a strict prefix is refused unless it
// ends at a field boundary (then it reads as the command without the rest);
// a trailing byte is refused.
func TestCommandRoundTrip(t *testing.T) {
	samples := commandSamples()
	for _, ct := range registered() {
		if !ct.current() {
			if len(samples[ct]) != 0 {
				t.Fatalf("%s is an old form: its samples belong to %s", ct, commandTable[ct].of)
			}
			continue
		}
		if len(samples[ct]) == 0 {
			t.Fatalf("no sample for %s", ct)
		}
		for _, cmd := range samples[ct] {
			data, err := Encode(ct, cmd)
			if err != nil {
				t.Fatalf("%s: %v", ct, err)
			}
			if data[0] != byte(ct) || data[1] != bodyV2 {
				t.Fatalf("%s: framing %x", ct, data[:2])
			}
			gotT, got, err := DecodeCommand(data)
			if err != nil || gotT != ct {
				t.Fatalf("%s: decode: %v (type %s)", ct, err, gotT)
			}
			if !reflect.DeepEqual(got, cmd) {
				t.Fatalf("%s: round trip\n got %+v\nwant %+v", ct, got, cmd)
			}
			// A value encodes as its pointer does.
			byValue, err := Encode(ct, reflect.ValueOf(cmd).Elem().Interface())
			if err != nil || !bytes.Equal(byValue, data) {
				t.Fatalf("%s: by value: %v", ct, err)
			}
			checkPrefixes(t, ct, LatestLevel, data)

			// The positional form: same fields back, same bytes again. (A
			// command added from LevelTagged on has none.)
			_, v1 := cmd.(v1Codec)
			_, forms := cmd.(formEncoder)
			if !v1 && !forms {
				continue
			}
			old, err := EncodeAt(LevelTagged-1, ct, cmd)
			if err != nil {
				t.Fatalf("%s: positional: %v", ct, err)
			}
			if old[1] != bodyV1 || CommandType(old[0]) != ct && commandTable[old[0]].of != ct {
				t.Fatalf("%s: positional framing %x", ct, old[:2])
			}
			gotT, back, err := DecodeCommand(old)
			if err != nil || gotT != ct {
				t.Fatalf("%s: positional decode: %v (type %s)", ct, err, gotT)
			}
			if again, _ := Encode(ct, back); !bytes.Equal(again, data) {
				t.Fatalf("%s: positional round trip\n got %+v\nwant %+v", ct, back, cmd)
			}
			if again, _ := EncodeAt(LevelTagged-1, ct, back); !bytes.Equal(again, old) {
				t.Fatalf("%s: positional re-encoding differs", ct)
			}
			checkPrefixes(t, ct, LevelTagged-1, old)
		}
	}
}

func checkPrefixes(t *testing.T, ct CommandType, level int, data []byte) {
	t.Helper()
	for n := 1; n < len(data) && n < 200; n++ {
		_, short, err := DecodeCommand(data[:n])
		if err != nil {
			continue
		}
		if again, _ := EncodeAt(level, ct, short); !bytes.Equal(again, data[:n]) {
			t.Fatalf("%s: prefix of %d bytes misread", ct, n)
		}
	}
	if _, _, err := DecodeCommand(append(data[:len(data):len(data)], 0)); err == nil {
		t.Fatalf("%s: trailing byte accepted", ct)
	}
}

func TestEncodeTypeMismatch(t *testing.T) {
	if _, err := Encode(CmdClaim, &CreateCommand{}); err == nil {
		t.Fatal("create encoded as claim")
	}
}

// A log written with msgpack bodies (before the binary encoding) still
// applies.
func TestLegacyMsgpackBody(t *testing.T) {
	legacy := func(ct CommandType, cmd interface{}) []byte {
		var body []byte
		if err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(cmd); err != nil {
			t.Fatal(err)
		}
		return append([]byte{byte(ct)}, body...)
	}
	for ct, cmds := range commandSamples() {
		for _, cmd := range cmds {
			_, got, err := DecodeCommand(legacy(ct, cmd))
			if err != nil {
				t.Fatalf("%s: %v", ct, err)
			}
			if ct == CmdCreate || ct == CmdReap || ct == CmdRedrive {
				if !reflect.DeepEqual(got, cmd) && !reflect.DeepEqual(normNil(got), normNil(cmd)) {
					t.Fatalf("%s: legacy\n got %+v\nwant %+v", ct, got, cmd)
				}
			}
		}
	}
	h := newHarness(t)
	h.idx++
	r := h.f.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: legacy(CmdCreate, &CreateCommand{Now: 1, ID: "old", Payload: []byte(`1`), Actor: head})}).(*Result)
	if r.Err != nil || r.Job.ID != "old" || r.Job.Stream != DefaultStream {
		t.Fatalf("legacy create: %+v", r)
	}
}

// normNil makes empty byte slices nil (msgpack does not keep the difference).
func normNil(v interface{}) interface{} {
	if c, ok := v.(*CreateCommand); ok {
		cc := *c
		if len(cc.Payload) == 0 {
			cc.Payload = nil
		}
		cc.form = 0
		return &cc
	}
	return v
}

func TestDecodeErrorPanicsInApply(t *testing.T) {
	h := newHarness(t)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "decode") {
			t.Fatalf("recovered %v, want a decode panic", r)
		}
	}()
	h.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(CmdCreate), bodyV1, 0xff}})
}

// FuzzDecode: decoding never panics, and what decodes re-encodes to an
// entry that decodes to the same command.
func FuzzDecode(f *testing.F) {
	for ct, cmds := range commandSamples() {
		for _, cmd := range cmds {
			if data, err := Encode(ct, cmd); err == nil && len(data) < 4096 {
				f.Add(data)
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte{byte(CmdCreate)})
	f.Add([]byte{byte(CmdCreate), 0x81, 0xa2, 'I', 'D', 0xa1, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		ct, cmd, err := DecodeCommand(data)
		if err != nil {
			if !errors.Is(err, errCorrupt) && !errors.Is(err, errUnknownCommand) {
				t.Fatalf("error %v is not a decode error", err)
			}
			return
		}
		again, err := Encode(ct, cmd)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		_, cmd2, err := DecodeCommand(again)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again2, _ := Encode(ct, cmd2); !bytes.Equal(again, again2) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", cmd, cmd2)
		}
	})
}
