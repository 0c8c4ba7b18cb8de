package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// While a node of the cluster runs a version without the task steps and
// the feed, a step is refused (503) and the feed stays off: nothing is
// proposed that the older node would stop at. Once every node has them,
// the leader turns the feed on.
func TestTaskStepsAndFeedWaitForEveryNode(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{})["id"].(string)
	e.fc.setSupported(0)
	var types []fsm.CommandType
	e.fc.beforeApply = func(t fsm.CommandType) { types = append(types, t) }
	e.do("POST", "/v1/tasks/"+id+"/start", headTok, api.TaskStepRequest{}).apiErr(t, 503, api.CodeUpgradeInProgress)
	if on, err := e.srv.queue.StartFeed(context.Background()); on || err != nil || len(types) != 0 {
		t.Fatalf("feed turned on in a mixed cluster: %v %v, proposed %v", on, err, types)
	}
	e.fc.setSupported(fsm.LatestLevel)
	if on, err := e.srv.queue.StartFeed(context.Background()); !on || err != nil || !e.fc.fsm.Read().FeedOn() {
		t.Fatalf("feed not turned on: %v %v", on, err)
	}
}

// sseEvent is one event of a Server-Sent Events stream.
type sseEvent struct{ id, name, data string }

// readSSE reads events from GET url until n have arrived (or fails).
func readSSE(t *testing.T, url, token string, n int, hdr ...string) (http.Header, []sseEvent) {
	t.Helper()
	h, evs, err := fetchSSE(url, token, n, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return h, evs
}

func fetchSSE(url, token string, n int, hdr ...string) (http.Header, []sseEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		return nil, nil, fmt.Errorf("GET %s: %d %s", url, res.StatusCode, res.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(res.Body)
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	if len(out) < n {
		return nil, nil, fmt.Errorf("GET %s: %d of %d events (%v)", url, len(out), n, sc.Err())
	}
	return res.Header, out, nil
}

// GET /v1/events: the framing, where a stream starts, the filters, what a
// claw may see, bad input, and the gap when events were dropped.
func TestEventStream(t *testing.T) {
	e := newEnv(t)
	if on, err := e.srv.queue.StartFeed(context.Background()); !on || err != nil {
		t.Fatal(on, err)
	}
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	open := e.create(map[string]interface{}{"stream": "s"})["id"].(string)
	theirs := e.create(map[string]interface{}{"target": "right_claw"})["id"].(string)
	e.do("POST", "/jobs/"+open+"/claim", leftTok, nil)

	hdr, evs := readSSE(t, srv.URL+"/v1/events?after=0", headTok, 3)
	if hdr.Get(api.HeaderEventsAfter) != "0" {
		t.Fatalf("%s: %q", api.HeaderEventsAfter, hdr.Get(api.HeaderEventsAfter))
	}
	for i, want := range []struct{ id, job, typ string }{{"1", open, "created"}, {"2", theirs, "created"}, {"3", open, "claimed"}} {
		var ev api.Event
		if err := json.Unmarshal([]byte(evs[i].data), &ev); err != nil || evs[i].id != want.id || evs[i].name != "job" ||
			ev.ID != want.job || ev.Type != want.typ || fmt.Sprint(ev.Seq) != want.id {
			t.Fatalf("event %d: %+v %+v (%v), want %+v", i, evs[i], ev, err, want)
		}
	}
	var claimed api.Event
	_ = json.Unmarshal([]byte(evs[2].data), &claimed)
	if claimed.State != api.StateClaimed || claimed.Stream != "s" || claimed.From != "queued" || claimed.To != "running" {
		t.Fatalf("claimed event: %+v", claimed)
	}
	// A reconnect resumes after Last-Event-ID; a claw sees only the jobs
	// it may see; filters.
	if _, evs := readSSE(t, srv.URL+"/v1/events", headTok, 1, "Last-Event-ID", "2"); evs[0].id != "3" {
		t.Fatalf("resumed at %s", evs[0].id)
	}
	if _, evs := readSSE(t, srv.URL+"/v1/events?after=0", leftTok, 2); evs[0].id != "1" || evs[1].id != "3" {
		t.Fatalf("a claw saw %v", evs)
	}
	if _, evs := readSSE(t, srv.URL+"/v1/events?after=0&job="+theirs, headTok, 1); evs[0].id != "2" {
		t.Fatalf("job filter: %v", evs)
	}
	e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "g1", Address: "http://g1", Capacity: 1})
	if _, evs := readSSE(t, srv.URL+"/v1/events?after=0&kinds=gateway", headTok, 1); evs[0].name != "gateway" || evs[0].id != "4" {
		t.Fatalf("kinds filter: %v", evs)
	}
	// Without a cursor: only what happens from now.
	done := make(chan []sseEvent, 1)
	go func() {
		_, evs, err := fetchSSE(srv.URL+"/v1/events", headTok, 1)
		if err != nil {
			evs = []sseEvent{{data: err.Error()}}
		}
		done <- evs
	}()
	// The stream's start cannot be observed: create jobs until it reports
	// one. It must be one created after it opened, never an older event.
	var got []sseEvent
	for deadline := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(deadline); {
		e.create(map[string]interface{}{"stream": "later"})
		select {
		case got = <-done:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got == nil {
		t.Fatal("a stream from now saw nothing new")
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(got[0].data), &ev); err != nil || ev.Seq <= 4 || ev.Stream != "later" {
		t.Fatalf("from now: %+v (%v)", ev, err)
	}

	// Bad input.
	e.do("GET", "/v1/events?kinds=jobs", headTok, nil).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("GET", "/v1/events?after=-1", headTok, nil).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("GET", "/v1/events", headTok, nil, "Last-Event-ID", "x").apiErr(t, 400, api.CodeInvalidRequest)
	e.do("GET", "/v1/events", "", nil).apiErr(t, 401, api.CodeUnauthorized)
}

// A stream that starts before the oldest event held says what it missed
// with one gap event, then goes on from the oldest.
func TestEventStreamGap(t *testing.T) {
	if testing.Short() {
		t.Skip("feeds 65,800 events")
	}
	e := newEnv(t)
	if on, err := e.srv.queue.StartFeed(context.Background()); !on || err != nil {
		t.Fatal(on, err)
	}
	for i := range fsm.FeedRetention + 300 {
		cmd := fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{Now: 1, ID: fmt.Sprintf("j%d", i), Payload: []byte(`{}`), Actor: fsm.Actor{Role: "head"}})
		if _, _, err := e.fc.Apply(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	_, evs := readSSE(t, srv.URL+"/v1/events?after=10", headTok, 2)
	var gap api.EventGap
	if err := json.Unmarshal([]byte(evs[0].data), &gap); err != nil || evs[0].name != "gap" || evs[0].id != "256" ||
		gap.After != 10 || gap.Oldest != 257 || evs[1].id != "257" {
		t.Fatalf("gap: %+v then %+v", evs[0], evs[1])
	}
}

// A node that begins to shut down ends its event streams at once, so its
// drain is not held up and their clients resume elsewhere.
func TestEventStreamEndsOnShutdown(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	ended := make(chan error, 1)
	go func() {
		_, _, err := fetchSSE(srv.URL+"/v1/events?after=0", headTok, 1)
		ended <- err
	}()
	// The stream is open once the server sent its retry line; until the
	// shutdown it would wait (no event is fed: the feed is off).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	time.AfterFunc(100*time.Millisecond, func() { e.srv.Shutdown(ctx) })
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "0 of 1 events") {
			t.Fatalf("stream ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the stream outlived the shutdown")
	}
}
