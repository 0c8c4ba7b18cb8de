package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/spine-queue/spine/fsm"
)

// BenchmarkUITaskList renders a page of the web UI's task list with
// 100,000 jobs in the state: the first page, a page deep in the list
// (cursor), and a state filter. A page costs the same wherever it is.
func BenchmarkUITaskList(b *testing.B) {
	t := &testing.T{} // the test env's helpers take a *testing.T; nothing here fails it
	e := newEnv(t)
	head := fsm.Actor{Role: fsm.HeadRole}
	for i := range 100_000 {
		cmd := fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{Now: 1, ID: fmt.Sprintf("j%06d", i), Stream: []string{"a", "b"}[i%2],
			Payload: []byte(`{"n":1}`), Actor: head})
		if _, _, err := e.fc.Apply(context.Background(), cmd); err != nil {
			b.Fatal(err)
		}
	}
	ck := uiLogin(t, e, headTok)
	for _, q := range []string{"", "?after=80000", "?state=queued&stream=b&after=50000"} {
		b.Run("page"+q, func(b *testing.B) {
			for range b.N {
				if r := e.page("GET", "/ui/tasks"+q, ck, ""); r.Code != http.StatusOK {
					b.Fatalf("%d", r.Code)
				}
			}
		})
	}
}
