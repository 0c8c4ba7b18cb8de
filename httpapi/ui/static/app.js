// Spine's web UI: live pages. The main part of a page is fetched again
// (as a fragment) when the cluster's event feed reports a change, and on a
// timer where the page asks for one; when this node stops answering, a
// banner says so and the page keeps what it last showed.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var banner = document.getElementById("banner");

  // Filters submit on change.
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-autosubmit]")) e.target.form.submit();
  });

  // The enqueue form: a tool's template fills an untouched payload, the
  // script path goes into the payload's script_path.
  var tool = document.getElementById("tool"), payload = document.getElementById("payload");
  if (tool && payload) {
    var template = function () { return tool.selectedOptions[0].dataset.template || "{}"; };
    var timeout = document.getElementById("timeout");
    var last = null;
    var fill = function () {
      if (payload.value.trim() === "" || payload.value === last) payload.value = template();
      last = template();
      if (timeout) timeout.placeholder = "the tool's: " + tool.selectedOptions[0].dataset.timeout;
    };
    tool.addEventListener("change", fill);
    fill();
    var script = document.getElementById("script");
    if (script) script.addEventListener("change", function () {
      try {
        var p = JSON.parse(payload.value || "{}");
        p.script_path = script.value;
        payload.value = JSON.stringify(p, null, 2);
      } catch (e) { /* the user's own JSON: leave it */ }
    });
  }

  if (!main || !main.dataset.live) return;

  // Refreshes are throttled: events that come together make one refresh,
  // a refresh starts at most once a second (less often when the page is
  // slow to answer: a refresh takes at most a fifth of the time), and
  // none runs while the tab is hidden. One open tab on a busy cluster
  // then costs the node a page a second, not one after every event.
  var pending = null, inflight = false, again = false, dirty = false, abort = null;
  var lastStart = 0, lastTook = 0;
  // A form the user has started is never replaced under them.
  main.addEventListener("input", function () { dirty = true; });

  function down(isDown) { if (banner) banner.hidden = !isDown; }
  function hidden() { return document.visibilityState === "hidden"; }

  function refresh() {
    if (dirty || hidden()) return;
    if (inflight) { again = true; return; }
    inflight = true;
    lastStart = Date.now();
    abort = window.AbortController ? new AbortController() : null;
    fetch(location.href, { headers: { "X-Spine-Fragment": "1" }, credentials: "same-origin", cache: "no-store",
      signal: abort ? abort.signal : undefined })
      .then(function (r) {
        if (r.status === 401) { location.href = "/ui/login?next=" + encodeURIComponent(location.pathname + location.search); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null) return;
        down(false);
        // Never replace a field the user is in.
        var a = document.activeElement;
        if (dirty || (a && main.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName))) return;
        main.innerHTML = html;
      })
      .catch(function (e) { if (!e || e.name !== "AbortError") down(true); })
      .finally(function () {
        inflight = false;
        abort = null;
        lastTook = Date.now() - lastStart;
        if (again) { again = false; schedule(); }
      });
  }

  // schedule refreshes the page soon: 150 ms from now (so a burst of
  // events makes one refresh), and no sooner than the throttle allows.
  function schedule() {
    if (pending || hidden()) return;
    var gap = Math.max(1000, 5 * lastTook);
    var wait = Math.max(150, lastStart + gap - Date.now());
    pending = setTimeout(function () { pending = null; refresh(); }, wait);
  }

  // The event feed is one connection to this node, held open. A browser
  // gives a page 6 connections per host, shared by every tab, and keeps a
  // page the user left in its back/forward cache for a while with its
  // connections open: so a page holds its feed only while it is shown.
  // Leaving it (pagehide) or hiding its tab closes the feed, and any
  // refresh under way; coming back (pageshow from the cache, or the tab
  // shown again) opens it again, and its opening refreshes the page, so
  // what changed meanwhile shows at once.
  var feed = null;
  function openFeed() {
    if (feed || hidden() || !window.EventSource) return;
    var es = feed = new EventSource("/ui/events");
    es.onmessage = schedule;
    ["job", "gateway", "worker", "gap"].forEach(function (k) { es.addEventListener(k, schedule); });
    es.onopen = function () { down(false); schedule(); };
    es.onerror = function () { if (es.readyState !== EventSource.OPEN) schedule(); };
  }
  function closeFeed() {
    if (feed) { feed.close(); feed = null; }
    if (pending) { clearTimeout(pending); pending = null; }
    if (abort) abort.abort();
    again = false;
  }
  window.addEventListener("pagehide", closeFeed);
  window.addEventListener("pageshow", function (e) { if (e.persisted) openFeed(); });
  document.addEventListener("visibilitychange", function () {
    if (hidden()) closeFeed();
    else openFeed();
  });
  openFeed();
  var every = parseInt(main.dataset.refresh || "0", 10);
  if (every > 0) setInterval(schedule, every);
})();
