package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/queue"
)

// A job keeps at most queue.MaxComments comments: the next is 409
// comment_limit and adds nothing.
func TestCommentLimit(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]any{})["id"].(string)
	for i := range queue.MaxComments {
		if r := e.do("POST", "/jobs/"+id+"/comment", leftTok, map[string]string{"text": fmt.Sprint("note ", i)}); r.Code != http.StatusOK {
			t.Fatalf("comment %d: %d %s", i, r.Code, r.Body)
		}
	}
	er := e.do("POST", "/jobs/"+id+"/comment", rightTok, map[string]string{"text": "one more"}).apiErr(t, http.StatusConflict, api.CodeCommentLimit)
	if msg := er["message"].(string); !strings.Contains(msg, "100 comments, the most a job keeps") {
		t.Errorf("message: %s", msg)
	}
	if n := len(e.job(id).Extra().Comments); n != queue.MaxComments {
		t.Fatalf("%d comments after the refusal", n)
	}
}
