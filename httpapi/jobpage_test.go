package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/spine-queue/spine/queue"
)

// A page of jobs is streamed a job at a time (writeJobPage); its bytes are
// still exactly the encoding of the whole page, for a page spanning many
// chunks, one under a chunk, the last page and an empty one.
func TestJobPageIsStreamedAsTheWholePageEncodes(t *testing.T) {
	e := newEnv(t)
	pad := strings.Repeat("x", 700)
	for i := 0; i < 120; i++ {
		id := e.create(map[string]interface{}{"payload": map[string]interface{}{"n": i, "pad": pad, "html": "<&>"}})["id"].(string)
		if i%3 == 0 {
			c := e.claim(id, leftTok)
			body := `{"leaseToken":"` + c["leaseToken"].(string) + `","result":{"ok":` + strconv.Itoa(i) + `}}`
			if r := e.do("POST", "/jobs/"+id+"/complete", leftTok, body); r.Code != http.StatusOK {
				t.Fatalf("complete: %d %s", r.Code, r.Body)
			}
		}
	}
	for _, q := range []string{"limit=1000", "limit=7", "limit=100&cursor=3", "status=done&limit=1000", "status=failed"} {
		r := e.do("GET", "/jobs?"+q, headTok, nil)
		if r.Code != http.StatusOK || r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("?%s: %d %v %s", q, r.Code, r.Header, r.Body)
		}
		req, _ := http.NewRequest("GET", "/jobs?"+q, nil)
		f, err := listFilter(req)
		if err != nil {
			t.Fatal(err)
		}
		jobs, next, err := e.srv.queue.List(queue.RoleCaller(RoleHead), f)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(viewList(jobs, next)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Body, want.Bytes()) {
			t.Errorf("?%s: the streamed page (%d bytes) differs from the page's encoding (%d bytes)", q, len(r.Body), want.Len())
		}
		if q == "limit=1000" && (len(r.Body) < 3*pageChunk || len(jobs) != 120) {
			t.Errorf("?%s: %d jobs in %d bytes: the page spans too few chunks to test streaming", q, len(jobs), len(r.Body))
		}
	}
}
