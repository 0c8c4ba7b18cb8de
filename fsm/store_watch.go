package fsm

import (
	"context"
	"sync"
)

// Queue-lane watches: how long-polling claimants are woken when a job enters
// a lane they watch.

// laneKey names one queue lane: a stream and a target ("" for untargeted
// jobs).
type laneKey struct{ stream, target string }

// anyTarget, as a woken lane's target, wakes every lane of the stream (a
// resumed stream's jobs, whatever their targets, are claimable again). No
// real target is this string: targets are role names and worker ids.
const anyTarget = "\x00any"

// waiters wakes long-polling claimants when a job enters a queue lane they
// watch, or when a restore replaces the state.
type waiters struct {
	mu    sync.Mutex
	lanes map[laneKey]map[*Watch]struct{}
}

// Watch fires when a job may have entered one of the queue lanes it was
// registered for. Wait on it once, then drop it.
type Watch struct {
	w     *waiters
	ch    chan struct{}
	keys  []laneKey
	fired bool // guarded by w.mu
}

// firedWatch is a watch that has fired and watches no lane: what a look
// that found a job answers, so waiting on it returns at once. Its own
// waiters holds nothing; stopping it changes nothing.
var firedWatch = func() *Watch {
	wt := &Watch{w: &waiters{}, ch: make(chan struct{}), fired: true}
	close(wt.ch)
	return wt
}()

func (ws *waiters) watch(streams, targets []string) *Watch {
	wt := &Watch{w: ws, ch: make(chan struct{}), keys: make([]laneKey, 0, len(streams)*(1+len(targets)))}
	for _, s := range streams {
		wt.keys = append(wt.keys, laneKey{s, ""})
		for _, tg := range targets {
			if tg != "" {
				wt.keys = append(wt.keys, laneKey{s, tg})
			}
		}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.lanes == nil {
		ws.lanes = make(map[laneKey]map[*Watch]struct{})
	}
	for _, k := range wt.keys {
		set := ws.lanes[k]
		if set == nil {
			set = make(map[*Watch]struct{})
			ws.lanes[k] = set
		}
		set[wt] = struct{}{}
	}
	return wt
}

// fire wakes every watch of the given lanes (all lanes when all is set).
func (ws *waiters) fire(keys []laneKey, all bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.lanes) == 0 {
		return
	}
	wake := func(set map[*Watch]struct{}) {
		for wt := range set {
			if !wt.fired {
				wt.fired = true
				close(wt.ch)
			}
		}
	}
	if all {
		for k, set := range ws.lanes {
			wake(set)
			delete(ws.lanes, k)
		}
		return
	}
	for _, k := range keys {
		if k.target == anyTarget {
			for lk, set := range ws.lanes {
				if lk.stream == k.stream {
					wake(set)
					delete(ws.lanes, lk)
				}
			}
			continue
		}
		if set, ok := ws.lanes[k]; ok {
			wake(set)
			delete(ws.lanes, k)
		}
	}
}

// release unregisters wt and marks it fired, so waiting on it returns at
// once.
func (ws *waiters) release(wt *Watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.unregister(wt)
	if !wt.fired {
		wt.fired = true
		close(wt.ch)
	}
}

// stop unregisters wt from the lanes it still watches.
func (ws *waiters) stop(wt *Watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.unregister(wt)
}

// unregister removes wt from its lanes; the caller holds ws.mu.
func (ws *waiters) unregister(wt *Watch) {
	for _, k := range wt.keys {
		if set, ok := ws.lanes[k]; ok {
			delete(set, wt)
			if len(set) == 0 {
				delete(ws.lanes, k)
			}
		}
	}
}

// WatchCtx blocks until the watch fires (nil) or ctx ends (its error), and
// unregisters the watch.
func (wt *Watch) WatchCtx(ctx context.Context) error {
	defer wt.w.stop(wt)
	select {
	case <-wt.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
