package systemtest

// HTTP helpers shared by core_test.go and api_test.go. Every name starts
// with "api" so other files of the package can add their own helpers.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

const (
	apiHead  = testcluster.HeadToken
	apiLeft  = testcluster.LeftToken
	apiRight = testcluster.RightToken
	apiBad   = "not-a-token-anyone-has"
)

// apiHTTP never follows redirects: a node must answer, not bounce the caller.
var apiHTTP = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// apiResp is a complete answer.
type apiResp struct {
	Method, URL string
	Status      int
	Header      http.Header
	Body        []byte
}

func (r *apiResp) String() string {
	b := string(r.Body)
	if len(b) > 600 {
		b = b[:600] + "…"
	}
	return fmt.Sprintf("%s %s -> %d %s", r.Method, r.URL, r.Status, strings.TrimSpace(b))
}

// apiRequest sends one request. body: nil (none), []byte or string (raw),
// anything else is JSON-encoded. hdr are header name/value pairs. It never
// calls t, so goroutines may use it.
func apiRequest(method, u, token string, body interface{}, hdr ...string) (*apiResp, error) {
	var rd io.Reader
	isJSON := false
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd, isJSON = bytes.NewReader(data), true
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := apiHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &apiResp{Method: method, URL: u, Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// apiDo is apiRequest that fails the test on a transport error.
func apiDo(t testing.TB, method, u, token string, body interface{}, hdr ...string) *apiResp {
	t.Helper()
	r, err := apiRequest(method, u, token, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return r
}

// apiWant fails the test unless r has status.
func apiWant(t testing.TB, r *apiResp, status int) *apiResp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want %d, got %s", status, r)
	}
	return r
}

// apiGet reads u's 200 JSON answer into v, for a wait that retries: any
// other outcome (a 503 while the cluster elects a leader after a kill or
// a missed lease, a refused connection) is returned, not fatal.
func apiGet(u, token string, v interface{}) error {
	r, err := apiRequest("GET", u, token, nil)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return errors.New(r.String())
	}
	return json.Unmarshal(r.Body, v)
}

// apiDecode unmarshals r's body into v.
func apiDecode(t testing.TB, r *apiResp, v interface{}) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

// apiErrorBody is the JSON shape of every error answer.
type apiErrorBody struct {
	Error *struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Leader  string          `json:"leader"`
		Job     json.RawMessage `json:"job"`
	} `json:"error"`
}

// apiWantError asserts status, a JSON error body with the code and a
// non-empty message, and the X-Spine-* headers.
func apiWantError(t testing.TB, r *apiResp, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want %d %s, got %s", status, code, r)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", r, ct)
	}
	var eb apiErrorBody
	if err := json.Unmarshal(r.Body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("%s: body is not {\"error\":{...}}: %v", r, err)
	}
	if eb.Error.Code != code {
		t.Errorf("%s: code %q, want %q", r, eb.Error.Code, code)
	}
	if strings.TrimSpace(eb.Error.Message) == "" {
		t.Errorf("%s: empty error message", r)
	}
	apiWantHeaders(t, r)
}

// apiWantHeaders asserts the headers every answer carries.
func apiWantHeaders(t testing.TB, r *apiResp) {
	t.Helper()
	for _, h := range []string{"X-Spine-Node", "X-Spine-Leader", "X-Spine-Index"} {
		if r.Header.Get(h) == "" {
			t.Errorf("%s: header %s missing", r, h)
		}
	}
	if v := r.Header.Get("X-Spine-Index"); v != "" {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			t.Errorf("%s: X-Spine-Index %q is not a number", r, v)
		}
	}
}

func apiIndex(r *apiResp) uint64 {
	n, _ := strconv.ParseUint(r.Header.Get("X-Spine-Index"), 10, 64)
	return n
}

// apiJob is the v0 job view.
type apiJob struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Target         *string         `json:"target"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	LeaseSeconds   int64           `json:"leaseSeconds"`
	ClaimedBy      string          `json:"claimedBy"`
	WorkerID       string          `json:"workerId"`
	AttemptID      string          `json:"attemptId"`
	LeaseToken     string          `json:"leaseToken"`
	LeaseExpiresAt string          `json:"leaseExpiresAt"`
	Result         json.RawMessage `json:"result"`
	Error          *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Stack     string `json:"stack"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Comments []struct {
		At    string `json:"at"`
		Actor string `json:"actor"`
		Text  string `json:"text"`
	} `json:"comments"`
	IdempotencyKey string `json:"idempotencyKey"`
	CreatedAt      string `json:"createdAt"`
	UpdatedAt      string `json:"updatedAt"`
	StartedAt      string `json:"startedAt"`
	FinishedAt     string `json:"finishedAt"`
	CreateIndex    uint64 `json:"createIndex"`
	ModifyIndex    uint64 `json:"modifyIndex"`
}

type apiEvent struct {
	Seq       int    `json:"seq"`
	At        string `json:"at"`
	Type      string `json:"type"`
	Actor     string `json:"actor"`
	From      string `json:"from"`
	To        string `json:"to"`
	AttemptID string `json:"attemptId"`
	WorkerID  string `json:"workerId"`
	Text      string `json:"text"`
}

type apiList struct {
	Jobs       []apiJob `json:"jobs"`
	NextCursor *string  `json:"nextCursor"`
}

func apiJobOf(t testing.TB, r *apiResp) apiJob {
	t.Helper()
	var j apiJob
	apiDecode(t, r, &j)
	if j.ID == "" {
		t.Fatalf("%s: job without id", r)
	}
	return j
}

// apiCreate creates a job as head through base and returns it (201).
func apiCreate(t testing.TB, base string, body map[string]interface{}) apiJob {
	t.Helper()
	if body == nil {
		body = map[string]interface{}{}
	}
	if _, ok := body["payload"]; !ok {
		body["payload"] = map[string]interface{}{"n": 1}
	}
	return apiJobOf(t, apiWant(t, apiDo(t, "POST", base+"/jobs", apiHead, body), http.StatusCreated))
}

// apiPost POSTs body to base+path and wants status; it returns the job
// answered on 200.
func apiPost(t testing.TB, base, path, token string, body interface{}, status int) *apiResp {
	t.Helper()
	return apiWant(t, apiDo(t, "POST", base+path, token, body), status)
}

// apiGetJob reads a job (query e.g. "?stale") and wants 200.
func apiGetJob(t testing.TB, base, token, id, query string) apiJob {
	t.Helper()
	return apiJobOf(t, apiWant(t, apiDo(t, "GET", base+"/jobs/"+id+query, token, nil), http.StatusOK))
}

// apiEvents reads a job's event history.
func apiEvents(t testing.TB, base, token, id string) []apiEvent {
	t.Helper()
	var out struct {
		JobID  string     `json:"jobId"`
		Events []apiEvent `json:"events"`
	}
	apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/jobs/"+id+"/events", token, nil), http.StatusOK), &out)
	if out.JobID != id {
		t.Fatalf("events of %s answered jobId %q", id, out.JobID)
	}
	return out.Events
}

// apiListAll follows nextCursor through every page of GET /jobs?query.
func apiListAll(t testing.TB, base, token string, q url.Values) []apiJob {
	t.Helper()
	var all []apiJob
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatal("pagination does not end")
		}
		var l apiList
		apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/jobs?"+q2.Encode(), token, nil), http.StatusOK), &l)
		all = append(all, l.Jobs...)
		if l.NextCursor == nil {
			return all
		}
		if *l.NextCursor == q2.Get("cursor") {
			t.Fatalf("cursor %q does not advance", *l.NextCursor)
		}
		q2.Set("cursor", *l.NextCursor)
	}
}

// apiRoles returns the leader and the followers of c (running nodes only).
func apiRoles(t testing.TB, c *testcluster.Cluster) (*testcluster.Node, []*testcluster.Node) {
	t.Helper()
	l, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var fs []*testcluster.Node
	for _, n := range c.Nodes {
		if n != l && n.Running() {
			fs = append(fs, n)
		}
	}
	return l, fs
}

// apiLeaderCommit is the commit index the current leader reports.
func apiLeaderCommit(t testing.TB, c *testcluster.Cluster) uint64 {
	t.Helper()
	l, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(l)
	if err != nil {
		t.Fatal(err)
	}
	return h.CommitIndex
}

// apiCaughtUp waits until every running node applied what the leader has
// committed.
func apiCaughtUp(t testing.TB, c *testcluster.Cluster) {
	t.Helper()
	if err := c.WaitCaughtUp(apiLeaderCommit(t, c), 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// apiFreeAddr is a free 127.0.0.1 port.
func apiFreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := testcluster.FreePort(true)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// apiMultipart builds a multipart body with one part; field "" omits the
// file part (a text field "other" is sent instead).
func apiMultipart(t testing.TB, field, filename, contentType string, data []byte) (body []byte, ctype string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if field == "" {
		if err := mw.WriteField("other", "no file here"); err != nil {
			t.Fatal(err)
		}
	} else {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, filename))
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		pw, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// apiEventually wraps testcluster.Eventually, failing the test on timeout.
func apiEventually(t testing.TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	if err := testcluster.Eventually(timeout, 50*time.Millisecond, fn); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
