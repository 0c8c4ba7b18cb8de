package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// The reference shapes below are the server's own view types as they were
// when the contract moved into this package (httpapi's jobView, eventView,
// attemptView, listView, errorBody, the worker answers and GET /health,
// which were maps, and cluster.Status). The api types must encode byte for
// byte as they did: field order, omitted fields, nulls and empty arrays.

type refJobError struct {
	Code      string `json:"code,omitempty"`
	Message   string `json:"message"`
	Stack     string `json:"stack,omitempty"`
	Retryable bool   `json:"retryable"`
}

type refJob struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Target         *string         `json:"target"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	LeaseSeconds   int64           `json:"leaseSeconds,omitempty"`
	TaskClass      string          `json:"taskClass,omitempty"`
	ClaimedBy      string          `json:"claimedBy,omitempty"`
	WorkerID       string          `json:"workerId,omitempty"`
	AttemptID      string          `json:"attemptId,omitempty"`
	LeaseToken     string          `json:"leaseToken,omitempty"`
	LeaseExpiresAt string          `json:"leaseExpiresAt,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *refJobError    `json:"error,omitempty"`
	Stdout         string          `json:"stdout,omitempty"`
	Stderr         string          `json:"stderr,omitempty"`
	Comments       []refComment    `json:"comments"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	UpdatedAt      string          `json:"updatedAt"`
	StartedAt      string          `json:"startedAt,omitempty"`
	FinishedAt     string          `json:"finishedAt,omitempty"`
	CreateIndex    uint64          `json:"createIndex"`
	ModifyIndex    uint64          `json:"modifyIndex"`
}

type refComment struct {
	At    string `json:"at"`
	Actor string `json:"actor"`
	Text  string `json:"text"`
}

type refEvent struct {
	Seq       int    `json:"seq"`
	At        string `json:"at"`
	Type      string `json:"type"`
	Actor     string `json:"actor"`
	From      string `json:"from,omitempty"`
	To        string `json:"to,omitempty"`
	AttemptID string `json:"attemptId,omitempty"`
	WorkerID  string `json:"workerId,omitempty"`
	Text      string `json:"text,omitempty"`
}

type refAttempt struct {
	ID        string       `json:"id"`
	Owner     string       `json:"owner"`
	WorkerID  string       `json:"workerId,omitempty"`
	StartedAt string       `json:"startedAt"`
	EndedAt   string       `json:"endedAt,omitempty"`
	Outcome   string       `json:"outcome"`
	Error     *refJobError `json:"error,omitempty"`
}

type refList struct {
	Jobs       []*refJob `json:"jobs"`
	NextCursor *string   `json:"nextCursor"`
}

type refErrorBody struct {
	Error refErrorDetail `json:"error"`
}

type refErrorDetail struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Leader  string  `json:"leader,omitempty"`
	Job     *refJob `json:"job,omitempty"`
}

type refClaim struct {
	Claimed           bool            `json:"claimed"`
	JobID             string          `json:"job_id,omitempty"`
	AttemptID         string          `json:"attempt_id,omitempty"`
	LeaseToken        string          `json:"lease_token,omitempty"`
	Stream            string          `json:"stream,omitempty"`
	MessageID         string          `json:"message_id,omitempty"`
	Payload           json.RawMessage `json:"payload,omitempty"`
	LeaseTTLSeconds   float64         `json:"lease_ttl_seconds,omitempty"`
	HeartbeatInterval float64         `json:"heartbeat_interval_seconds,omitempty"`
	Attempt           int             `json:"attempt,omitempty"`
	MaxAttempts       int             `json:"max_attempts,omitempty"`
}

type refClusterStatus struct {
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
	Nodes               []refNodeStatus `json:"nodes"`
	Term                uint64          `json:"term"`
	CommitIndex         uint64          `json:"commit_index"`
	AppliedIndex        uint64          `json:"applied_index"`
	NodeID              string          `json:"node_id"`
	State               string          `json:"state"`
	LastContact         string          `json:"last_contact"`
	LogBatches          uint64          `json:"log_batches"`
	LogEntries          uint64          `json:"log_entries"`
	LogAppendSeconds    float64         `json:"log_append_seconds"`
	LogWritesOverlapped uint64          `json:"log_writes_overlapped"`
	HashIndex           uint64          `json:"hash_index"`
	StateHash           string          `json:"state_hash"`
	HashChecks          uint64          `json:"hash_checks"`
	HashMismatches      uint64          `json:"hash_mismatches"`
	Level               int             `json:"level"`
}

type refNodeStatus struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr"`
	Suffrage   string `json:"suffrage"`
	Alive      bool   `json:"alive"`
	HashIndex  uint64 `json:"hash_index,omitempty"`
	StateHash  string `json:"state_hash,omitempty"`
	Supported  *int   `json:"supported_level,omitempty"`
}

// ts is the server's rendering of a unix-nanosecond time; zero is "".
func ts(n int64) string {
	if n == 0 {
		return ""
	}
	return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
}

// encode is the server's writeJSON: a json.Encoder, HTML escaping on.
func encode(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return b.String()
}

func sameJSON(t *testing.T, what string, got, ref any) {
	t.Helper()
	g, r := encode(t, got), encode(t, ref)
	if g != r {
		t.Errorf("%s:\n got %s\nwant %s", what, g, r)
	}
}

// stamped is a comment as the state machine holds it.
type stamped struct {
	at          int64
	actor, text string
}

// jobCase is a job as the state machine holds it (unix-nanosecond times),
// rendered both ways.
type jobCase struct {
	name                                string
	target                              string
	payload                             string
	status                              string
	attempts, maxAttempts               int
	leaseSeconds                        int64
	taskClass, claimedBy, workerID      string
	attemptID, leaseToken               string
	leaseExpires                        int64
	result                              string
	err                                 *refJobError
	stdout, stderr                      string
	comments                            []stamped
	key                                 string
	created, updated, started, finished int64
	createIndex, modifyIndex            uint64
}

func (c jobCase) ref() *refJob {
	v := &refJob{ID: "j-" + c.name, Stream: "default", Payload: json.RawMessage(c.payload), Status: c.status,
		Attempts: c.attempts, MaxAttempts: c.maxAttempts, LeaseSeconds: c.leaseSeconds, TaskClass: c.taskClass,
		ClaimedBy: c.claimedBy, WorkerID: c.workerID, AttemptID: c.attemptID, LeaseToken: c.leaseToken,
		LeaseExpiresAt: ts(c.leaseExpires), Error: c.err, Stdout: c.stdout, Stderr: c.stderr,
		Comments: make([]refComment, 0, len(c.comments)), IdempotencyKey: c.key,
		CreatedAt: ts(c.created), UpdatedAt: ts(c.updated), StartedAt: ts(c.started), FinishedAt: ts(c.finished),
		CreateIndex: c.createIndex, ModifyIndex: c.modifyIndex}
	if c.result != "" {
		v.Result = json.RawMessage(c.result)
	}
	if c.target != "" {
		tg := c.target
		v.Target = &tg
	}
	for _, cm := range c.comments {
		v.Comments = append(v.Comments, refComment{At: ts(cm.at), Actor: cm.actor, Text: cm.text})
	}
	return v
}

func (c jobCase) api() *api.Job {
	j := &api.Job{ID: "j-" + c.name, Stream: "default", Target: api.NullableString(c.target), Payload: json.RawMessage(c.payload),
		Status: api.JobStatus(c.status), Attempts: c.attempts, MaxAttempts: c.maxAttempts,
		LeaseSeconds: int(c.leaseSeconds), TaskClass: c.taskClass, ClaimedBy: c.claimedBy, WorkerID: c.workerID,
		AttemptID: c.attemptID, LeaseToken: c.leaseToken, LeaseExpiresAt: api.Time(c.leaseExpires),
		Stdout: c.stdout, Stderr: c.stderr, IdempotencyKey: c.key,
		CreatedAt: api.Time(c.created), UpdatedAt: api.Time(c.updated), StartedAt: api.Time(c.started),
		FinishedAt: api.Time(c.finished), CreateIndex: c.createIndex, ModifyIndex: c.modifyIndex}
	if c.result != "" {
		j.Result = json.RawMessage(c.result)
	}
	if c.err != nil {
		j.Error = &api.JobError{Code: c.err.Code, Message: c.err.Message, Stack: c.err.Stack, Retryable: c.err.Retryable}
	}
	j.Comments = []api.Comment{} // as the server sends them
	for _, cm := range c.comments {
		j.Comments = append(j.Comments, api.Comment{At: api.Time(cm.at), Actor: cm.actor, Text: cm.text})
	}
	return j
}

const t0 = int64(1767225600123456789) // 2026-01-01T00:00:00.123456789Z

var jobCases = []jobCase{
	{name: "queued", payload: `{"n":1}`, status: "queued", maxAttempts: 5, created: t0, updated: t0,
		createIndex: 7, modifyIndex: 7},
	{name: "running", target: "left_claw", payload: `"<html> & stuff"`, status: "running", attempts: 2, maxAttempts: 3,
		leaseSeconds: 60, taskClass: "LLM_HEAVY", claimedBy: "left_claw", workerID: "w-1", attemptID: "a-2",
		leaseToken: "tok", leaseExpires: t0 + 60e9, key: "k-1",
		comments: []stamped{{t0 + 1000, "head", "look <here>"}, {t0 + 1e9, "left_claw", "ok"}},
		created:  t0, updated: t0 + 2e9, started: t0 + 1e9, createIndex: 7, modifyIndex: 12},
	{name: "failed", payload: `[1,2]`, status: "dead", attempts: 3, maxAttempts: 3,
		err:    &refJobError{Code: "boom", Message: "it broke", Stack: "main.go:1", Retryable: true},
		stdout: "out", stderr: "err", created: t0, updated: t0 + 5e9, started: t0 + 1e9, finished: t0 + 5e9,
		createIndex: 7, modifyIndex: 20},
	{name: "done", payload: `null`, status: "done", attempts: 1, maxAttempts: 5, result: `{"ok":true}`,
		err: &refJobError{Message: "plain"}, created: t0, updated: t0 + 1, started: t0 + 1, finished: t0 + 1e9 + 1,
		createIndex: 1, modifyIndex: 2},
}

func TestJobEncodesAsTheServerView(t *testing.T) {
	for _, c := range jobCases {
		sameJSON(t, c.name, c.api(), c.ref())
		// By value too (MarshalJSON has a value receiver).
		sameJSON(t, c.name+" by value", *c.api(), c.ref())
	}
	// Untargeted: null, never omitted or "". No comments: [], never null.
	out := encode(t, jobCases[0].api())
	if !strings.Contains(out, `"target":null`) || !strings.Contains(out, `"comments":[]`) || !strings.Contains(out, `"payload":{"n":1}`) {
		t.Errorf("queued job = %s", out)
	}
}

func TestJobRoundTrip(t *testing.T) {
	for _, c := range jobCases {
		j := c.api()
		if j.Comments == nil {
			j.Comments = []api.Comment{} // what decoding "comments":[] gives
		}
		// Raw JSON is encoded with <, > and & escaped, as everything is.
		var esc bytes.Buffer
		json.HTMLEscape(&esc, j.Payload)
		j.Payload = esc.Bytes()
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		var back api.Job
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(&back, j) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", c.name, back, *j)
		}
	}
	// A null target decodes as "".
	var j api.Job
	if err := json.Unmarshal([]byte(`{"id":"x","target":null,"comments":null}`), &j); err != nil || j.Target != "" || j.ID != "x" {
		t.Fatalf("null target: %+v, %v", j, err)
	}
	// Duplicate is never on the wire.
	j.Duplicate = true
	if b, _ := json.Marshal(j); strings.Contains(strings.ToLower(string(b)), "duplicate") {
		t.Errorf("Duplicate encoded: %s", b)
	}
}

func TestListsEncodeAsTheServerViews(t *testing.T) {
	// GET /jobs, a middle page and the last (empty) page.
	next := "42"
	ref := refList{Jobs: []*refJob{jobCases[0].ref(), jobCases[1].ref()}, NextCursor: &next}
	sameJSON(t, "page", api.JobList{Jobs: []*api.Job{jobCases[0].api(), jobCases[1].api()}, NextCursor: "42"}, ref)
	sameJSON(t, "last page", api.JobList{Jobs: []*api.Job{}}, refList{Jobs: []*refJob{}})
	sameJSON(t, "last page by pointer", &api.JobList{Jobs: []*api.Job{}}, refList{Jobs: []*refJob{}})

	// Events and attempts were maps: keys in sorted order.
	events := []refEvent{
		{Seq: 1, At: ts(t0), Type: "created", Actor: "head", To: "queued"},
		{Seq: 2, At: ts(t0 + 1), Type: "claimed", Actor: "left_claw", From: "queued", To: "running", AttemptID: "a-1", WorkerID: "w"},
		{Seq: 3, At: ts(t0 + 2), Type: "comment", Actor: "head", Text: "hi"},
	}
	apiEvents := []*api.JobEvent{
		{Seq: 1, At: api.Time(t0), Type: "created", Actor: "head", To: api.JobStatusQueued},
		{Seq: 2, At: api.Time(t0 + 1), Type: "claimed", Actor: "left_claw", From: api.JobStatusQueued, To: api.JobStatusRunning, AttemptID: "a-1", WorkerID: "w"},
		{Seq: 3, At: api.Time(t0 + 2), Type: "comment", Actor: "head", Text: "hi"},
	}
	sameJSON(t, "events", api.JobEventList{JobID: "j", Events: apiEvents}, map[string]interface{}{"jobId": "j", "events": events})
	sameJSON(t, "no events", api.JobEventList{JobID: "j", Events: []*api.JobEvent{}}, map[string]interface{}{"jobId": "j", "events": []refEvent{}})

	attempts := []refAttempt{
		{ID: "a-1", Owner: "left_claw", WorkerID: "w", StartedAt: ts(t0), EndedAt: ts(t0 + 9), Outcome: "failed",
			Error: &refJobError{Code: "x", Message: "y"}},
		{ID: "a-2", Owner: "right_claw", StartedAt: ts(t0 + 10), Outcome: "running"},
	}
	apiAttempts := []*api.JobAttempt{
		{ID: "a-1", Owner: "left_claw", WorkerID: "w", StartedAt: api.Time(t0), EndedAt: api.Time(t0 + 9),
			Outcome: api.OutcomeFailed, Error: &api.JobError{Code: "x", Message: "y"}},
		{ID: "a-2", Owner: "right_claw", StartedAt: api.Time(t0 + 10), Outcome: api.OutcomeRunning},
	}
	sameJSON(t, "attempts", api.JobAttemptList{JobID: "j", Attempts: apiAttempts}, map[string]interface{}{"jobId": "j", "attempts": attempts})
	sameJSON(t, "no attempts", api.JobAttemptList{JobID: "j", Attempts: []*api.JobAttempt{}}, map[string]interface{}{"jobId": "j", "attempts": []refAttempt{}})

	// Decoding a page: null cursor is "".
	var l api.JobList
	if err := json.Unmarshal([]byte(encode(t, ref)), &l); err != nil || l.NextCursor != "42" || len(l.Jobs) != 2 || l.Jobs[1].Target != "left_claw" {
		t.Fatalf("decode page: %+v %v", l, err)
	}
	l = api.JobList{}
	if err := json.Unmarshal([]byte(`{"jobs":[],"nextCursor":null}`), &l); err != nil || l.NextCursor != "" {
		t.Fatalf("decode last page: %+v %v", l, err)
	}
}

func TestErrorBodiesEncodeAsTheServer(t *testing.T) {
	sameJSON(t, "plain", api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeNotFound, Message: "no job x"}},
		refErrorBody{Error: refErrorDetail{Code: "not_found", Message: "no job x"}})
	sameJSON(t, "no leader", api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeNoLeader, Message: "m", Leader: "http://n1"}},
		refErrorBody{Error: refErrorDetail{Code: "no_leader", Message: "m", Leader: "http://n1"}})
	c := jobCases[1]
	sameJSON(t, "with job", api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeStaleLease, Message: "m", Job: c.api()}},
		refErrorBody{Error: refErrorDetail{Code: "stale_lease", Message: "m", Job: c.ref()}})
	// A refused worker call was a map: {"error":…,"ok":false}.
	sameJSON(t, "worker refusal", api.WorkerRefusal{Error: api.ErrorDetail{Code: api.CodeStaleLease, Message: "m"}},
		map[string]interface{}{"ok": false, "error": refErrorDetail{Code: "stale_lease", Message: "m"}})
	// It decodes as an error body too.
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(encode(t, api.WorkerRefusal{Error: api.ErrorDetail{Code: "stale_lease", Message: "m"}})), &eb); err != nil || eb.Error.Code != api.CodeStaleLease {
		t.Fatalf("refusal as error body: %+v %v", eb, err)
	}
}

func TestWorkerAnswersEncodeAsTheServer(t *testing.T) {
	sameJSON(t, "claimed", api.WorkerClaim{Claimed: true, JobID: "j", AttemptID: "a", LeaseToken: "t", Stream: "s",
		MessageID: "17", Payload: json.RawMessage(`{"x":1}`), LeaseTTLSeconds: 300, HeartbeatIntervalSeconds: 100,
		Attempt: 1, MaxAttempts: 5},
		refClaim{Claimed: true, JobID: "j", AttemptID: "a", LeaseToken: "t", Stream: "s", MessageID: "17",
			Payload: json.RawMessage(`{"x":1}`), LeaseTTLSeconds: 300, HeartbeatInterval: 100, Attempt: 1, MaxAttempts: 5})
	sameJSON(t, "not claimed", api.WorkerClaim{}, refClaim{})
	sameJSON(t, "heartbeat", api.WorkerHeartbeatResult{OK: true, LeaseExpiresAt: api.Time(t0)},
		map[string]interface{}{"ok": true, "lease_expires_at": ts(t0)})
	for _, dup := range []bool{false, true} {
		sameJSON(t, "complete", api.WorkerCompleteAck{OK: true, Ack: true, Duplicate: dup},
			map[string]interface{}{"ok": true, "ack": true, "duplicate": dup})
		for _, requeued := range []bool{false, true} {
			sameJSON(t, "fail", api.WorkerAck{OK: true, Ack: true, Requeued: requeued, DLQ: !requeued, Duplicate: dup},
				map[string]interface{}{"ok": true, "ack": true, "requeued": requeued, "dlq": !requeued, "duplicate": dup})
		}
	}
	// The client decodes a complete's answer into a WorkerAck.
	var ack api.WorkerAck
	if err := json.Unmarshal([]byte(encode(t, api.WorkerCompleteAck{OK: true, Ack: true, Duplicate: true})), &ack); err != nil ||
		ack != (api.WorkerAck{OK: true, Ack: true, Duplicate: true}) {
		t.Fatalf("complete as WorkerAck: %+v %v", ack, err)
	}
	w := api.WorkerClaim{LeaseTTLSeconds: 30}
	if w.LeaseTTL() != 30*time.Second || w.HeartbeatInterval() != 10*time.Second {
		t.Errorf("LeaseTTL %v HeartbeatInterval %v", w.LeaseTTL(), w.HeartbeatInterval())
	}
	w = api.WorkerClaim{LeaseTTLSeconds: 30, HeartbeatIntervalSeconds: 2.5}
	if w.HeartbeatInterval() != 2500*time.Millisecond {
		t.Errorf("HeartbeatInterval %v", w.HeartbeatInterval())
	}
	if (&api.WorkerClaim{}).HeartbeatInterval() != 10*time.Second {
		t.Errorf("default HeartbeatInterval")
	}
}

func TestHealthEncodesAsTheServer(t *testing.T) {
	now := time.Unix(0, t0+5).UTC()
	ref := map[string]interface{}{
		"ok": true, "node_id": "n1", "role": "leader", "state": "Leader",
		"leader_id": "n1", "leader_addr": "http://127.0.0.1:1",
		"applied_index": uint64(42), "commit_index": uint64(43), "term": uint64(2),
		"time":             now.Format(time.RFC3339Nano),
		"claim_waiters":    int64(3),
		"local_heartbeats": uint64(4),
		"mux_connections":  5,
		"log_batches":      uint64(6), "log_entries": uint64(7),
		"log_append_seconds": 0.125, "log_writes_overlapped": uint64(8),
		"hash_index": uint64(40), "state_hash": "abcd",
		"hash_checks": uint64(9), "hash_mismatches": uint64(0),
		"lease_misses": uint64(1), "mcp_sessions": 6,
	}
	h := api.Health{OK: true, NodeID: "n1", Role: "leader", State: "Leader", LeaderID: "n1", LeaderAddr: "http://127.0.0.1:1",
		AppliedIndex: 42, CommitIndex: 43, Term: 2, Time: now, ClaimWaiters: 3, LocalHeartbeats: 4, MuxConnections: 5,
		LogBatches: 6, LogEntries: 7, LogAppendSeconds: 0.125, LogWritesOverlapped: 8, HashIndex: 40, StateHash: "abcd",
		HashChecks: 9, LeaseMisses: 1, MCPSessions: 6}
	sameJSON(t, "bare", h, ref)

	// The optional fields, including a zero timer slack (which is a value).
	ref["last_contact"] = ts(t0 - 1e6)
	ref["cpu_seconds"] = 1.5
	ref["timer_slack_ns"] = int64(0)
	cpu, slack := 1.5, int64(0)
	h.LastContact, h.CPUSeconds, h.TimerSlackNS = api.Time(t0-1e6), &cpu, &slack
	sameJSON(t, "full", h, ref)
}

func TestClusterStatusEncodesAsTheServer(t *testing.T) {
	two := 2
	ref := refClusterStatus{Nodes: []refNodeStatus{
		{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "http://127.0.0.1:2", GossipAddr: "127.0.0.1:3", Suffrage: "voter", Alive: true, HashIndex: 4, StateHash: "ab", Supported: &two},
		{ID: "n2", RaftAddr: "127.0.0.1:5", Suffrage: "nonvoter"},
	}, Term: 3, CommitIndex: 10, AppliedIndex: 9, NodeID: "n1", State: "Leader", LastContact: "0s",
		LogBatches: 1, LogEntries: 2, LogAppendSeconds: 0.5, LogWritesOverlapped: 1, HashIndex: 9, StateHash: "cd", HashChecks: 4, HashMismatches: 1, Level: 1}
	ref.Leader.ID, ref.Leader.HTTPAddr = "n1", "http://127.0.0.1:2"
	st := api.ClusterStatus{Leader: api.ClusterLeader{ID: "n1", HTTPAddr: "http://127.0.0.1:2"}, Nodes: []*api.ClusterNode{
		{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "http://127.0.0.1:2", GossipAddr: "127.0.0.1:3", Suffrage: "voter", Alive: true, HashIndex: 4, StateHash: "ab", SupportedLevel: &two},
		{ID: "n2", RaftAddr: "127.0.0.1:5", Suffrage: "nonvoter"},
	}, Term: 3, CommitIndex: 10, AppliedIndex: 9, NodeID: "n1", State: "Leader", LastContact: "0s",
		LogBatches: 1, LogEntries: 2, LogAppendSeconds: 0.5, LogWritesOverlapped: 1, HashIndex: 9, StateHash: "cd", HashChecks: 4, HashMismatches: 1, Level: 1}
	sameJSON(t, "status", st, ref)
	sameJSON(t, "member", api.Member{NodeID: "n3", RaftAddr: "r", HTTPAddr: "h", GossipAddr: "g"},
		struct {
			ID         string `json:"node_id"`
			RaftAddr   string `json:"raft_addr"`
			HTTPAddr   string `json:"http_addr"`
			GossipAddr string `json:"gossip_addr"`
		}{"n3", "r", "h", "g"})
	sameJSON(t, "blob", api.Blob{ID: "ab", Size: 3, ContentType: "text/plain", Duplicate: true},
		struct {
			ID          string `json:"id"`
			Size        int64  `json:"size"`
			ContentType string `json:"contentType"`
		}{"ab", 3, "text/plain"})
}

func TestJobCreateRequestPresence(t *testing.T) {
	type has struct{ max, stream, lease bool }
	for _, c := range []struct {
		body string
		want has
		req  api.JobCreateRequest
	}{
		{`{"payload":1}`, has{}, api.JobCreateRequest{Payload: json.RawMessage(`1`)}},
		{`{"payload":1,"maxAttempts":0,"stream":"","leaseSeconds":0}`, has{true, true, true}, api.JobCreateRequest{Payload: json.RawMessage(`1`)}},
		{`{"payload":1,"maxAttempts":null,"stream":null,"leaseSeconds":null}`, has{}, api.JobCreateRequest{Payload: json.RawMessage(`1`)}},
		{`{"payload":{"a":[1]},"maxAttempts":3,"target":"left_claw","stream":"s","leaseSeconds":60,"taskClass":"c","idempotencyKey":"k"}`,
			has{true, true, true}, api.JobCreateRequest{Payload: json.RawMessage(`{"a":[1]}`), MaxAttempts: 3, Target: "left_claw",
				Stream: "s", LeaseSeconds: 60, TaskClass: "c", IdempotencyKey: "k"}},
		{`{"payload":1,"target":null,"stream":"x"}`, has{stream: true}, api.JobCreateRequest{Payload: json.RawMessage(`1`), Stream: "x"}},
	} {
		var r api.JobCreateRequest
		if err := json.Unmarshal([]byte(c.body), &r); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if got := (has{r.HasMaxAttempts(), r.HasStream(), r.HasLeaseSeconds()}); got != c.want {
			t.Errorf("%s: Has = %+v, want %+v", c.body, got, c.want)
		}
		if r.Target != c.req.Target || r.Stream != c.req.Stream || r.MaxAttempts != c.req.MaxAttempts ||
			r.LeaseSeconds != c.req.LeaseSeconds || r.TaskClass != c.req.TaskClass || r.IdempotencyKey != c.req.IdempotencyKey ||
			!bytes.Equal(r.Payload, c.req.Payload) {
			t.Errorf("%s: decoded %+v, want %+v", c.body, r, c.req)
		}
		// A decoded request encodes as its body did (nulls are absent).
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		var r2 api.JobCreateRequest
		if err := json.Unmarshal(b, &r2); err != nil || (has{r2.HasMaxAttempts(), r2.HasStream(), r2.HasLeaseSeconds()}) != c.want {
			t.Errorf("%s: re-encoded as %s, which decodes as %+v (%v)", c.body, b, r2, err)
		}
	}

	// Built in Go: zero fields are not sent, set ones are, in the order of
	// the fields.
	b, _ := json.Marshal(&api.JobCreateRequest{Payload: json.RawMessage(`{"x":1}`)})
	if string(b) != `{"payload":{"x":1}}` {
		t.Errorf("minimal create = %s", b)
	}
	r := api.JobCreateRequest{Payload: json.RawMessage(`2`), MaxAttempts: 3, Target: "t", Stream: "s", LeaseSeconds: 9, TaskClass: "c", IdempotencyKey: "k"}
	b, _ = json.Marshal(r)
	if string(b) != `{"payload":2,"maxAttempts":3,"target":"t","stream":"s","leaseSeconds":9,"taskClass":"c","idempotencyKey":"k"}` {
		t.Errorf("full create = %s", b)
	}
	if !r.HasMaxAttempts() || !r.HasStream() || !r.HasLeaseSeconds() {
		t.Errorf("Go-built request: Has false for a set field")
	}
	var back api.JobCreateRequest
	if err := json.Unmarshal(b, &back); err != nil || back.MaxAttempts != 3 || back.Stream != "s" || back.LeaseSeconds != 9 ||
		back.Target != "t" || back.TaskClass != "c" || back.IdempotencyKey != "k" || string(back.Payload) != "2" {
		t.Errorf("round trip = %+v, %v", back, err)
	}

	// Type errors name the field and the type the server always named.
	err := json.Unmarshal([]byte(`{"payload":1,"leaseSeconds":"x"}`), &back)
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) || ute.Field != "leaseSeconds" || ute.Type.String() != "int64" {
		t.Errorf("bad leaseSeconds: %v", err)
	}
	err = json.Unmarshal([]byte(`{"payload":1,"maxAttempts":1.5}`), &back)
	if !errors.As(err, &ute) || ute.Field != "maxAttempts" {
		t.Errorf("bad maxAttempts: %v", err)
	}
	// null is a no-op, as for any Unmarshaler.
	back = api.JobCreateRequest{Stream: "keep"}
	if err := json.Unmarshal([]byte(`null`), &back); err != nil || back.Stream != "keep" {
		t.Errorf("null: %+v %v", back, err)
	}
}

func TestJobErrorForms(t *testing.T) {
	var fr api.JobFailRequest
	if err := json.Unmarshal([]byte(`{"error":"it broke","requeue":false}`), &fr); err != nil ||
		fr.Error == nil || *fr.Error != (api.JobError{Message: "it broke"}) || fr.Requeue == nil || *fr.Requeue {
		t.Fatalf("string form: %+v %v", fr, err)
	}
	fr = api.JobFailRequest{}
	if err := json.Unmarshal([]byte(`{"error":{"code":"c","message":"m","stack":"s","retryable":true},"leaseToken":"t","attemptId":"a","stdout":"o"}`), &fr); err != nil ||
		*fr.Error != (api.JobError{Code: "c", Message: "m", Stack: "s", Retryable: true}) || fr.LeaseToken != "t" || fr.AttemptID != "a" || fr.Stdout != "o" {
		t.Fatalf("object form: %+v %v", fr, err)
	}
	fr = api.JobFailRequest{}
	if err := json.Unmarshal([]byte(`{"error":null}`), &fr); err != nil || fr.Error != nil {
		t.Fatalf("null: %+v %v", fr, err)
	}
	for _, bad := range []string{`{"error":5}`, `{"error":[1]}`, `{"error":true}`, `{"error":{"message":5}}`} {
		var ute *json.UnmarshalTypeError
		err := json.Unmarshal([]byte(bad), &fr)
		if !errors.As(err, &ute) || ute.Field != "error" || ute.Type != reflect.TypeFor[api.JobError]() {
			t.Errorf("%s: %v", bad, err)
		}
	}
	var wf api.WorkerFailRequest
	if err := json.Unmarshal([]byte(`{"worker_id":"w","job_id":"j","attempt_id":"a","lease_token":"t","error":"x"}`), &wf); err != nil ||
		wf.Error == nil || wf.Error.Message != "x" {
		t.Fatalf("worker fail string form: %+v %v", wf, err)
	}
	// The Go client sends the object form, and null for no error.
	b, _ := json.Marshal(api.WorkerFailRequest{WorkerID: "w", JobID: "j", AttemptID: "a", LeaseToken: "t"})
	if string(b) != `{"worker_id":"w","job_id":"j","attempt_id":"a","lease_token":"t","error":null}` {
		t.Errorf("worker fail = %s", b)
	}
	if e := (&api.JobError{Code: "c", Message: "m"}); e.Error() != "c: m" {
		t.Errorf("Error() = %q", e.Error())
	}
	if e := (&api.JobError{Message: "m"}); e.Error() != "m" {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestJobStatusAndTime(t *testing.T) {
	for _, s := range []api.JobStatus{api.JobStatusQueued, api.JobStatusRunning, api.JobStatusDone, api.JobStatusFailed, api.JobStatusDead} {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	for _, s := range []api.JobStatus{"", "Queued", "pending"} {
		if s.Valid() {
			t.Errorf("%q valid", s)
		}
	}
	if !api.Time(0).IsZero() {
		t.Error("Time(0) is not zero")
	}
	tm := api.Time(t0)
	if tm.Location() != time.UTC || tm.UnixNano() != t0 {
		t.Errorf("Time(t0) = %v", tm)
	}
	b, _ := json.Marshal(tm)
	if string(b) != strconv.Quote(ts(t0)) {
		t.Errorf("Time(t0) encodes as %s, the server wrote %q", b, ts(t0))
	}
}
