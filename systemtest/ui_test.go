package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/spine-queue/spine/api"
)

// browser starts headless Chromium for a test. CI installs it and sets
// SPINE_REQUIRE_BROWSER=1 (.ci/run); there, or under CI=true, a missing
// Chromium fails the test; elsewhere the test is skipped, saying what to
// install.
func browser(t testing.TB) (context.Context, func() context.Context) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("SPINE_REQUIRE_BROWSER") == "1" || os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH, and this run requires the browser tests (SPINE_REQUIRE_BROWSER=1 or CI=true)")
		}
		t.Skip("browser test skipped: install Debian's chromium (apt-get install -y chromium) to run it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	root, cancelRoot := chromedp.NewContext(actx)
	t.Cleanup(cancelRoot)
	if err := chromedp.Do(root); err != nil { // starts the browser (no deadline: it would stop it)
		t.Fatalf("start chromium: %v", err)
	}
	// Each tab (a fresh browser context: its own cookies) for a user.
	tab := func() context.Context {
		ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		if err := chromedp.Do(ctx); err != nil { // opens the tab, for the context's life
			t.Fatalf("open a tab: %v", err)
		}
		return ctx
	}
	return tab(), tab
}

// run runs browser actions with a deadline.
func run(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if _, err := runValue(ctx, chromedp.Steps(steps...)); err != nil {
		// Say where the browser is and what it shows.
		where, werr := runValue(ctx, chromedp.Evaluate[string](`location.href + " (" + document.readyState + ")\n" + document.body.innerText.slice(0, 300)`))
		shot(t, ctx, "failed")
		t.Fatalf("%s: %v\nthe page: %s %v", what, err, where, werr)
	}
}

func runValue[T any](ctx context.Context, a chromedp.Action[T]) (T, error) {
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(tctx, a)
}

// textOf reads the text of the first element sel matches ("" when none
// does), in one evaluation: a live refresh may replace the element at any
// moment, so no node is held between two calls.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	js := fmt.Sprintf(`(function(){ var e = document.querySelector(%q); return e ? e.textContent : ""; })()`, sel)
	s, err := runValue(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// shot saves a screenshot in $SPINE_UI_SCREENSHOTS, if set.
func shot(t testing.TB, ctx context.Context, name string) {
	dir := os.Getenv("SPINE_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	img, err := runValue(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	_ = os.WriteFile(filepath.Join(dir, name+".png"), img, 0o644)
}

// The web UI in a real browser on three processes: a wrong token is
// refused with a message; head logs in on a follower; the dashboard moves
// live when a job is created through another node; the leader is killed
// and the page, loaded from a follower, goes on (live counts, the new
// leader on the cluster page within seconds); a dead letter is redriven
// from the page (the follower forwards the form to the leader); a claw's
// cluster page has no dead letters.
func TestWebUIOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	tab, newTab := browser(t)
	base := fs[0].URL

	run(t, tab, "wrong token", chromedp.Navigate(base+"/ui/"), present("#token"),
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"), clickJS("#login"),
		present("#login-error"))
	run(t, tab, "head logs in", chromedp.SendKeys(chromedp.CSS("#token"), apiHead), clickJS("#login"),
		present("#count-queued"))
	shot(t, tab, "dashboard")

	// The count, or -1 while a live refresh replaces it under the read.
	count := func() int {
		n, err := strconv.Atoi(textOf(t, tab, "#count-queued"))
		if err != nil {
			return -1
		}
		return n
	}
	waitCount := func(want int, what string) {
		t.Helper()
		start := time.Now()
		apiEventually(t, 15*time.Second, what, func() error {
			if n := count(); n != want {
				return fmt.Errorf("the page shows %d queued, want %d", n, want)
			}
			return nil
		})
		t.Logf("%s: on screen %v after the write", what, time.Since(start).Round(10*time.Millisecond))
	}
	stream := wName("ui")
	before := -1
	apiEventually(t, 10*time.Second, "the queued count", func() error {
		if before = count(); before < 0 {
			return fmt.Errorf("no count on the page")
		}
		return nil
	})
	wCreate(t, fs[1].URL, stream, map[string]int{"n": 1}, nil)
	waitCount(before+1, "a job created through another node")
	shot(t, tab, "dashboard-live")

	// Head pauses the stream from the dashboard (the follower forwards the
	// form to the leader): its row says so and the API agrees; then resumes.
	srow := fmt.Sprintf(`tr[data-stream=%q]`, stream)
	run(t, tab, "pause the stream", clickJS(srow+" button.pause"), present(srow+" .st-paused"), present(srow+" button.resume"))
	shot(t, tab, "dashboard-paused")
	var si api.StreamInfo
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[1].URL+"/streams/"+stream+"?consistent", apiHead, nil), http.StatusOK), &si)
	if !si.Paused {
		t.Fatalf("the stream paused from the page reads %+v", si)
	}
	run(t, tab, "resume the stream", clickJS(srow+" button.resume"), present(srow+" button.pause"))
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[1].URL+"/streams/"+stream+"?consistent", apiHead, nil), http.StatusOK), &si)
	if si.Paused {
		t.Fatalf("the stream resumed from the page reads %+v", si)
	}

	// A stream's job defaults show on its row.
	apiWant(t, apiDo(t, "PUT", fs[1].URL+"/streams/"+stream+"/defaults", apiHead, map[string]any{"concurrencyKey": "ui-box", "concurrencyLimit": 4}), http.StatusOK)
	run(t, tab, "the stream's defaults on the dashboard", chromedp.Reload(), present(srow+" .defaults"))
	if txt := textOf(t, tab, srow+" .defaults"); txt != "key ui-box, at most 4 at once" {
		t.Fatalf("the defaults badge reads %q", txt)
	}
	shot(t, tab, "dashboard-defaults")

	// A job no live worker can take shows on its stream's row.
	gstream := wName("ui-gpu")
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs", apiHead, map[string]any{"stream": gstream, "payload": 1, "requires": []string{"gpu"}}), http.StatusCreated)
	grow := fmt.Sprintf(`tr[data-stream=%q]`, gstream)
	run(t, tab, "the unmatched job on the dashboard", present(grow+" .unmatched"))
	if txt := textOf(t, tab, grow+" .unmatched"); !strings.Contains(txt, "1 needs gpu") {
		t.Fatalf("the unmatched badge reads %q", txt)
	}
	shot(t, tab, "dashboard-unmatched")

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	wCreate(t, fs[1].URL, stream, map[string]int{"n": 2}, nil)
	waitCount(before+2, "a job created after the leader's death")
	run(t, tab, "cluster page", chromedp.Navigate(base+"/ui/cluster"), present("#leader"))
	apiEventually(t, 20*time.Second, "the new leader on the cluster page", func() error {
		if l := textOf(t, tab, "#leader"); l == leader.ID || l == "none" || l == "" {
			return fmt.Errorf("the page shows leader %q", l)
		}
		return nil
	})
	shot(t, tab, "cluster")
	run(t, tab, "dashboard", chromedp.Navigate(base+"/ui/"), present("#dash-leader"))
	apiEventually(t, 20*time.Second, "the new leader on the dashboard", func() error {
		if l := textOf(t, tab, "#dash-leader"); l == leader.ID || l == "none" || l == "" {
			return fmt.Errorf("the dashboard shows leader %q", l)
		}
		return nil
	})

	// A dead letter, redriven from the page.
	id := wCreate(t, fs[1].URL, wName("uidead"), map[string]int{"n": 3}, map[string]interface{}{"maxAttempts": 1}).ID
	apiWant(t, devqRetry(t, "POST", fs[1].URL+"/jobs/"+id+"/claim", apiLeft, nil), 200)
	apiWant(t, devqRetry(t, "POST", fs[1].URL+"/jobs/"+id+"/fail", apiLeft,
		map[string]interface{}{"error": map[string]string{"message": "broken"}, "requeue": false}), 200)
	row := `#dead tr[data-id="` + id + `"] button.redrive`
	run(t, tab, "redrive", chromedp.Navigate(base+"/ui/cluster"), present(row),
		clickJS(row),
		// Gone from the dead letters once the page the form leads to (or
		// its live refresh) has the redrive.
		absent(row))
	apiEventually(t, 10*time.Second, "the redriven job queued", func() error {
		if j := wGetJob(t, fs[1].URL, id); j.Status != "queued" {
			return fmt.Errorf("it is %s", j.Status)
		}
		return nil
	})

	// The task page, and a claw's view of the cluster.
	run(t, tab, "task page", chromedp.Navigate(base+"/ui/tasks/"+id), present("#history"))
	// The page reads its node's state, which may be a moment behind the
	// leader's; it catches up live.
	apiEventually(t, 10*time.Second, "the task page shows the redrive", func() error {
		if s := textOf(t, tab, "#task-status"); s != "queued" {
			return fmt.Errorf("it shows %q", s)
		}
		return nil
	})
	shot(t, tab, "task")
	claw := newTab()
	run(t, claw, "claw logs in", chromedp.Navigate(fs[1].URL+"/ui/cluster"), present("#token"),
		chromedp.SendKeys(chromedp.CSS("#token"), apiLeft), clickJS("#login"),
		present("#nodes"))
	dead, err := runValue(claw, chromedp.Evaluate[int](`document.querySelectorAll("#dead").length`))
	if err != nil || dead != 0 {
		t.Fatal("a claw sees the dead letters")
	}
	// Nor can it redrive by crafting the form's request (with its own
	// session's CSRF token): the server refuses.
	crafted, err := runValue(claw, chromedp.Evaluate[float64](fmt.Sprintf(`fetch("/ui/tasks/%s/redrive", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "csrf=" + encodeURIComponent(document.querySelector("input[name=csrf]").value), redirect: "manual"}).then(r => r.status)`, id),
		chromedp.EvalAwaitPromise))
	if err != nil || crafted != 403 {
		t.Fatalf("a claw's crafted redrive: %v %v", crafted, err)
	}

	// The page's node without a leader (the other survivor killed), then
	// down itself: each is said on the page.
	run(t, tab, "dashboard", chromedp.Navigate(base+"/ui/"), present("#count-queued"))
	if err := c.Kill(fs[1]); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the no-leader banner", func() error {
		if textOf(t, tab, "#noleader") == "" {
			return fmt.Errorf("no banner yet")
		}
		return nil
	})
	shot(t, tab, "noleader")
	if err := c.Kill(fs[0]); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the node-down banner", func() error {
		if attrOf(t, tab, "#banner", "hidden") != "" || textOf(t, tab, "#banner") == "" {
			return fmt.Errorf("the banner is hidden")
		}
		hidden, _ := runValue(tab, chromedp.Evaluate[bool](`document.getElementById("banner").hidden`))
		if hidden {
			return fmt.Errorf("the banner is hidden")
		}
		return nil
	})
	shot(t, tab, "nodedown")
}

// The developer queue's pages in a real browser on three processes:
// head creates a session and a stream with instructions through the
// forms of a follower, enqueues with the enqueue form (the tool's payload
// template, the script path from the index, a timeout override) and lands
// on the new task's page, which shows the summary and stdout live once a
// claw completes it through the API; a silent task is marked stale
// (yellow) then auto-failed (red) in the list and requeued from it; the
// stream is ended.
func TestWebUIDeveloperQueue(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"REAPER_INTERVAL_MS": "100", "SPINE_LEASE_GRACE_MS": "0"})
	_, fs := apiRoles(t, c)
	base := fs[0].URL
	t.Logf("pages from follower %s", base)
	reg := api.Registry{Tools: []api.Tool{{Name: "run-bash", Description: "Execute a bash script", TaskClass: "MEDIUM_SCRIPT"}},
		Scripts: []api.Script{{Path: "scripts/migrate.sh", Name: "migrate", Description: "run the migrations"}}}
	apiWant(t, devqRetry(t, "PUT", base+"/api/registry", apiHead, reg), 200)
	tab, _ := browser(t)
	run(t, tab, "head logs in", chromedp.Navigate(base+"/ui/sessions"), present("#token"),
		chromedp.SendKeys(chromedp.CSS("#token"), apiHead), clickJS("#login"),
		present("#new-session"))
	run(t, tab, "new session", chromedp.SendKeys(chromedp.CSS(`#new-session input[name="name"]`), "web-s"),
		clickJS("#new-session button"), present(`#sessions tr[data-name="web-s"]`))
	run(t, tab, "new stream", chromedp.Navigate(base+"/ui/streams"), present("#new-stream"),
		chromedp.SendKeys(chromedp.CSS(`#new-stream input[name="name"]`), "web-st"),
		chromedp.SendKeys(chromedp.CSS(`#new-stream textarea`), "Run the migrations; done when they pass"),
		clickJS("#new-stream button"), present(`#streams tr[data-name="web-st"]`))

	run(t, tab, "enqueue form", chromedp.Navigate(base+"/ui/enqueue"), present("#payload"))
	if p := textValue(t, tab, "#payload"); !strings.Contains(p, `"script_path"`) {
		t.Fatalf("the payload is not the tool's template: %q", p)
	}
	run(t, tab, "script path", chromedp.SendKeys(chromedp.CSS("#script"), "scripts/migrate.sh\t"))
	if p := textValue(t, tab, "#payload"); !strings.Contains(p, `"scripts/migrate.sh"`) {
		t.Fatalf("the script path is not in the payload: %q", p)
	}
	shot(t, tab, "enqueue")
	run(t, tab, "enqueue", chromedp.SendKeys(chromedp.CSS("#timeout"), "2"), clickJS("#submit"),
		present("#task-id"))
	id := textOf(t, tab, "#task-id")
	if !strings.HasPrefix(id, "tsk_") {
		t.Fatalf("the enqueued task's page shows id %q", id)
	}

	if tool := textOf(t, tab, ".facts"); !strings.Contains(tool, "run-bash (timeout 2 s)") {
		t.Fatalf("the task page: %q", tool)
	}
	// A claw claims and completes it through the API; the page shows the
	// summary and the stdout live.
	var claimed api.Task
	apiDecode(t, apiWant(t, devqRetry(t, "POST", fs[1].URL+"/api/claim", apiLeft, api.TaskClaimRequest{Stream: "web-st"}), 200), &claimed)
	if claimed.ID != id {
		t.Fatalf("claimed %s, want %s", claimed.ID, id)
	}
	apiWant(t, devqRetry(t, "POST", fs[1].URL+"/api/tasks/"+id+"/complete", apiLeft, map[string]interface{}{
		"lease_token": claimed.LeaseToken, "attempt_id": claimed.AttemptID,
		"result": map[string]string{"summary": "migrations applied"}, "stdout": "applied 3 migrations"}), 200)
	run(t, tab, "the summary live", present("#summary"))
	if s, out := textOf(t, tab, "#summary"), textOf(t, tab, "pre.out"); s != "migrations applied" || out != "applied 3 migrations" {
		t.Fatalf("the task page shows summary %q, stdout %q", s, out)
	}
	shot(t, tab, "task-done")

	// Another, claimed and left silent: stale past its 2 s timeout (yellow),
	// auto-failed at twice it (red); head requeues it from the list.
	var silent api.Task
	apiDecode(t, apiWant(t, devqRetry(t, "POST", base+"/api/tasks", apiHead, map[string]interface{}{"stream": "web-st", "tool_name": "run-bash",
		"payload": map[string]string{"script_path": "scripts/migrate.sh"}, "timeout": 2}), 201), &silent)
	apiWant(t, devqRetry(t, "POST", fs[1].URL+"/api/claim", apiLeft, api.TaskClaimRequest{Stream: "web-st"}), 200)
	row := `#tasks tr[data-id="` + silent.ID + `"]`
	for _, mark := range []string{"stale", "autofailed"} {
		apiEventually(t, 15*time.Second, "the task marked "+mark, func() error {
			run(t, tab, "task list", chromedp.Navigate(base+"/ui/tasks?stream=web-st"), present(row))
			if cls := attrOf(t, tab, row, "class"); cls != mark {
				return fmt.Errorf("its row is %q", cls)
			}
			return nil
		})
		shot(t, tab, "tasks-"+mark)
	}
	run(t, tab, "requeue", clickJS(row+" button"), present("#task-id"))
	if again := textOf(t, tab, "#task-id"); again == silent.ID || !strings.HasPrefix(again, "tsk_") {
		t.Fatalf("requeued as %q", again)
	}
	run(t, tab, "end the stream", chromedp.Navigate(base+"/ui/streams"),
		clickJS(`#streams tr[data-name="web-st"] button.end`),
		present(`#streams tr[data-name="web-st"] .st-ended`))
	// At a phone's width the task list still shows its rows.
	run(t, tab, "phone width", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/tasks"), present(row))
	shot(t, tab, "phone-tasks")
}

// textValue reads a form field's value.
func textValue(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := runValue(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).value`, sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return v
}

// attrOf reads an attribute of the first element sel matches.
func attrOf(t *testing.T, ctx context.Context, sel, attr string) string {
	t.Helper()
	v, err := runValue(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(function(){ var e = document.querySelector(%q); return e ? (e.getAttribute(%q) || "") : ""; })()`, sel, attr)))
	if err != nil {
		t.Fatalf("read %s of %s: %v", attr, sel, err)
	}
	return v
}

// present waits for an element sel matches, by evaluating the selector in
// the page: elements a live refresh put there are found too (the DevTools
// DOM the chromedp queries use does not always see them).
func present(sel string) chromedp.Action[chromedp.Void] {
	return pollJS(sel+" present", fmt.Sprintf(`!!document.querySelector(%q)`, sel))
}

// absent waits until no element matches sel.
func absent(sel string) chromedp.Action[chromedp.Void] {
	return pollJS(sel+" gone", fmt.Sprintf(`!document.querySelector(%q)`, sel))
}

// clickJS clicks the element sel matches, as present finds it.
func clickJS(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(present(sel), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(document.querySelector(%q).click(), true)`, sel))(ctx, t)
		return err
	}))
}

// pollJS waits until the expression is true in the page.
func pollJS(what, expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for {
			// Each look has its own deadline: one made while the page
			// changes under it may never be answered.
			ectx, cancel := context.WithTimeout(ctx, time.Second)
			ok, err := chromedp.Evaluate[bool](expr)(ectx, t)
			cancel()
			if err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// Clicking through the UI never stalls the browser: with the task list
// open in one tab, a user clicks through 16 pages at half a second each in
// a second tab of the same browser (so the same 6 connections per host).
// Every page loads within seconds, and both tabs still update live from
// the event feed. A page the browser keeps in its back/forward cache must
// not keep its feed open: one that did held a connection for about a
// minute, and the page after the 5th or so waited for one. A page is kept
// there if it is left before its first refresh has come back, which at
// this pace takes a node some way off: the second tab sees the node with
// 200 ms of latency, as across an ocean.
func TestWebUIClickThroughWithSecondTab(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	_, fs := apiRoles(t, c)
	base := fs[0].URL
	list, _ := browser(t)
	run(t, list, "head logs in", chromedp.Navigate(base+"/ui/tasks"), present("#token"),
		chromedp.SendKeys(chromedp.CSS("#token"), apiHead), clickJS("#login"), present("main#main[data-live] h1"))
	// The second tab, in the first one's browser context: its cookie, and
	// its connections.
	pages, cancel := chromedp.NewContext(list)
	t.Cleanup(cancel)
	if err := chromedp.Do(pages); err != nil { // opens the tab, for the context's life
		t.Fatalf("open the second tab: %v", err)
	}
	if _, err := chromedp.Call(pages, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Latency: 200, DownloadThroughput: -1, UploadThroughput: -1}}}); err != nil {
		t.Fatalf("emulate latency: %v", err)
	}
	run(t, pages, "the second tab", chromedp.Navigate(base+"/ui/"), present("#count-queued"))

	// The 16th click lands on the task list, which has no refresh timer:
	// what it shows after, only the feed brought.
	nav := []string{"/ui/sessions", "/ui/streams", "/ui/enqueue", "/ui/tasks", "/ui/cluster", "/ui/"}
	clickTo := func(n int, path string) time.Duration {
		start := time.Now()
		// A click on the header's link, as a user makes it: a navigation
		// that may leave the page to the back/forward cache.
		run(t, pages, fmt.Sprintf("click %d (%s)", n, path), clickJS(fmt.Sprintf(`header nav a[href=%q]`, path)))
		loaded(t, pages, fmt.Sprintf("page %d (%s)", n, path), path, 10*time.Second)
		return time.Since(start)
	}
	var slowest time.Duration
	for i := 0; i < 16; i++ {
		took := clickTo(i+1, nav[i%len(nav)])
		slowest = max(slowest, took)
		if rest := 500*time.Millisecond - took; rest > 0 {
			time.Sleep(rest) // the user's pace, not a wait for anything
		}
	}
	t.Logf("16 pages clicked through, the slowest loaded in %v", slowest.Round(time.Millisecond))

	// Live, in both tabs: a job created through another node shows in both
	// task lists.
	liveInBoth := func(what string) {
		t.Helper()
		id := wCreate(t, fs[1].URL, wName("click"), map[string]int{"n": 1}, nil).ID
		row := `#tasks tr[data-id="` + id + `"]`
		run(t, list, what+": the new job in the first tab", present(row))
		run(t, pages, what+": the new job in the second tab", present(row))
	}
	liveInBoth("after the click-through")
	shot(t, pages, "clickthrough-live")

	// The task list left at once and gone back to: from the back/forward
	// cache if the browser kept it (its feed opened again on pageshow), or
	// loaded anew; live either way.
	clickTo(17, "/ui/sessions")
	clickTo(18, "/ui/tasks")
	run(t, pages, "mark the page", chromedp.Evaluate[chromedp.Void](`window.spineTestMark = 1`))
	clickTo(19, "/ui/")
	run(t, pages, "back", chromedp.Evaluate[chromedp.Void](`history.back()`))
	loaded(t, pages, "back to the task list", "/ui/tasks", 10*time.Second)
	how, err := runValue(pages, chromedp.Evaluate[string](`window.spineTestMark ? "from the back/forward cache" : "loaded anew"`))
	t.Logf("back on the task list: %s %v", how, err)
	liveInBoth("back")
}

// loaded waits, up to within, until the tab shows path, loaded, as a live
// page.
func loaded(t *testing.T, ctx context.Context, what, path string, within time.Duration) {
	t.Helper()
	lctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := chromedp.Run(lctx, pollJS(path+" loaded", fmt.Sprintf(
		`location.pathname === %q && document.readyState === "complete" && !!document.querySelector("main#main[data-live]")`, path)))
	if err != nil {
		t.Fatalf("%s did not load within %v: %v", what, within, err)
	}
}
