package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// A request frame on the mux is held to the header limit of an HTTP
// request: 431 in the API's terms, and the connection stays usable.
func TestMuxFrameHeaderLimit(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	c := muxDial(t, ts.URL, headTok)
	h := http.Header{"Authorization": {"Bearer " + headTok}}
	for i := range 100_000 {
		h["X-"+fmt.Sprint(i)] = []string{""}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.RoundTrip(ctx, wire.AppendRequest(nil, "POST", "/jobs", h, []byte(`{"payload":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	var eb api.ErrorBody
	if err := json.NewDecoder(res.Body).Decode(&eb); err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || eb.Error.Code != api.CodeHeadersTooLarge {
		t.Fatalf("100,000 headers in a frame: %d %+v %v", res.StatusCode, eb, err)
	}
	big := strings.Repeat("x", MaxHeaderBytes)
	muxDo(t, c, "GET", "/jobs", headTok, "", "X-Big", big).apiErr(t, http.StatusRequestHeaderFieldsTooLarge, api.CodeHeadersTooLarge)
	if l := e.do("GET", "/jobs", headTok, nil).json(t); len(l["jobs"].([]any)) != 0 {
		t.Fatalf("a refused frame made a job: %v", l)
	}
	if r := muxDo(t, c, "GET", "/jobs", headTok, ""); r.Code != http.StatusOK {
		t.Fatalf("the connection after the refusals: %d %s", r.Code, r.Body)
	}
}
