package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/snapfile"
)

type bufSink struct{ bytes.Buffer }

func (*bufSink) ID() string    { return "test" }
func (*bufSink) Cancel() error { return nil }
func (*bufSink) Close() error  { return nil }

// testArchive is a backup file of a state holding n queued jobs.
func testArchive(t *testing.T, n int) []byte {
	t.Helper()
	f, err := fsm.New(fsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{
			Now: int64(i), ID: "job-" + string(rune('a'+i)), Payload: []byte(`{}`), Actor: fsm.Actor{Role: fsm.HeadRole}})})
	}
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	meta := snapfile.Meta{Index: uint64(n), Term: 2, Size: int64(sink.Len()), RaftVersion: 1,
		TakenAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), NodeID: "n1"}
	if err := snapfile.Write(&out, meta, &sink); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// A save checks the archive's checksums (not its state, unless asked to)
// before FILE exists; an archive that does not check leaves no FILE.
func TestSnapshotSaveChecksTheArchive(t *testing.T) {
	good := testArchive(t, 3)
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x20
	serve := map[string][]byte{"good": good, "bad": bad, "cut": good[:len(good)-700]}
	var which string
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/snapshot": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-tar")
			w.Write(serve[which])
		},
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head-tok"}
	dir := t.TempDir()
	leftovers := func() []string {
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}

	which = "good"
	file := filepath.Join(dir, "backup.snap")
	code, out, errOut := cliRun(t, env, "", "snapshot", "save", file)
	if code != 0 {
		t.Fatalf("save: exit %d: %s%s", code, out, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, ok := rep["contents"]; ok || rep["snapshot"].(map[string]any)["index"] != float64(3) {
		t.Fatalf("save reported %s", out)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("FILE holds %d bytes (%v), the archive %d", len(b), err, len(good))
	}
	if names := leftovers(); len(names) != 1 {
		t.Fatalf("the directory holds %v", names)
	}

	code, out, errOut = cliRun(t, env, "", "snapshot", "save", file+".2", "--inspect", "-o", "table")
	if code != 0 || !regexp.MustCompile(`JOBS queued\s+3\n`).MatchString(out) {
		t.Fatalf("save --inspect: exit %d: %s%s", code, out, errOut)
	}
	code, out, _ = cliRun(t, env, "", "snapshot", "save", file+".3", "-o", "table")
	if code != 0 || strings.Contains(out, "JOBS") || !regexp.MustCompile(`CHECKED\s+checksums`).MatchString(out) {
		t.Fatalf("save -o table: exit %d: %s", code, out)
	}

	for _, w := range []string{"bad", "cut"} {
		which = w
		before := leftovers()
		code, out, errOut := cliRun(t, env, "", "snapshot", "save", filepath.Join(dir, w+".snap"))
		if code == 0 || !strings.Contains(out+errOut, "does not check") {
			t.Fatalf("save of a %s archive: exit %d: %s%s", w, code, out, errOut)
		}
		if after := leftovers(); len(after) != len(before) {
			t.Fatalf("save of a %s archive left %v (before: %v)", w, after, before)
		}
	}
}
