package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// A heartbeat that comes while the lease is still fresh (under a tenth of
// it used, SPINE_LEASE_RENEW_FRACTION's default) is answered from the
// committed lease on the leader, with no log entry; one that is due is
// written and extends the lease. The lease a coalesced heartbeat reports
// is the committed one: it survives SIGKILL of the leader, and the job is
// still completed exactly once.
func TestHeartbeatCoalescingAcrossFailover(t *testing.T) {
	c := startCluster(t, 3, nil)
	L, fs := apiRoles(t, c)
	left := testcluster.LeftToken
	heartbeat := func(base string, ref map[string]interface{}, seen ...uint64) (*wResp, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wCallTimeout)
		defer cancel()
		var hdr []string
		if len(seen) > 0 {
			hdr = []string{"X-Spine-Min-Index", strconv.FormatUint(seen[0], 10)}
		}
		return wDo(ctx, base, left, "POST", "/internal/worker/heartbeat", ref, hdr...)
	}
	// ack is a heartbeat that must be answered ok: its answer.
	ack := func(base string, ref map[string]interface{}, seen ...uint64) (wAck, error) {
		var a wAck
		r, err := heartbeat(base, ref, seen...)
		if err != nil {
			return a, err
		}
		if r.Status != http.StatusOK {
			return a, fmt.Errorf("heartbeat answered %s", r)
		}
		err = json.Unmarshal(r.Body, &a)
		if err == nil && !a.OK {
			err = fmt.Errorf("heartbeat answered %s", r)
		}
		return a, err
	}

	// A lease due for renewal: a 2 s lease is due 200 ms after the claim.
	short := wName("hb-short")
	jb := wCreate(t, fs[0].URL, short, "b", map[string]interface{}{"leaseSeconds": 2})
	b := wMustClaim(t, fs[0].URL, left, "w-short", []string{short})
	bClaimed := apiGetJob(t, L.URL, apiHead, jb.ID, "?consistent")
	var extended wAck
	apiEventually(t, 10*time.Second, "a heartbeat due for renewal to extend the lease", func() error {
		a, err := ack(fs[1].URL, wRef("w-short", b))
		if err != nil {
			return err
		}
		if a.LeaseExpiresAt == bClaimed.LeaseExpiresAt {
			return fmt.Errorf("lease still ends at the claim's %s", a.LeaseExpiresAt)
		}
		extended = a
		return nil
	})
	was, _ := time.Parse(time.RFC3339Nano, bClaimed.LeaseExpiresAt)
	now, err := time.Parse(time.RFC3339Nano, extended.LeaseExpiresAt)
	if err != nil || !now.After(was) {
		t.Fatalf("written heartbeat moved the lease from %s to %s", bClaimed.LeaseExpiresAt, extended.LeaseExpiresAt)
	}
	if g := apiGetJob(t, fs[1].URL, apiHead, jb.ID, "?consistent"); g.LeaseExpiresAt != extended.LeaseExpiresAt {
		t.Fatalf("job's lease %s, heartbeat said %s", g.LeaseExpiresAt, extended.LeaseExpiresAt)
	}
	if n := wCountEvents(wEvents(t, L.URL, jb.ID), "heartbeat"); n != 1 {
		t.Fatalf("%d heartbeat events, want the 1 that was written", n)
	}
	wAckOf(t, wComplete(t, fs[0].URL, left, "w-short", b, "ok"), http.StatusOK)

	// A fresh lease (300 s): a heartbeat through the other follower is
	// answered with the claim's expiry and writes nothing. Given the index
	// of the claim (X-Spine-Min-Index), that follower answers it itself,
	// from its own state; without one it forwards it to the leader. (A
	// follower learns that the claim is committed from the leader's next
	// append: the create of another job here, the next write of any claw
	// in a busy cluster. Before that it forwards.)
	stream := wName("hb")
	j := wCreate(t, fs[0].URL, stream, "a", nil)
	a := wMustClaim(t, fs[0].URL, left, "w-hb", []string{stream})
	claimed := apiGetJob(t, L.URL, apiHead, j.ID, "?consistent")
	wCreate(t, fs[0].URL, wName("hb-next"), "n", nil)
	apiEventually(t, 10*time.Second, fs[1].ID+" to know the claim is committed", func() error {
		h, err := c.Health(fs[1])
		if err != nil {
			return err
		}
		if h.AppliedIndex < claimed.ModifyIndex {
			return fmt.Errorf("%s applied %d, the claim is %d", fs[1].ID, h.AppliedIndex, claimed.ModifyIndex)
		}
		return nil
	})
	for _, seen := range [][]uint64{{claimed.ModifyIndex}, nil} {
		h0, err := c.Health(fs[1])
		if err != nil {
			t.Fatal(err)
		}
		hb, err := ack(fs[1].URL, wRef("w-hb", a), seen...)
		if err != nil || hb.LeaseExpiresAt != claimed.LeaseExpiresAt {
			t.Fatalf("fresh heartbeat (seen %v): %v %+v, want the claim's lease %s", seen, err, hb, claimed.LeaseExpiresAt)
		}
		h1, err := c.Health(fs[1])
		if err != nil {
			t.Fatal(err)
		}
		if want := h0.LocalHeartbeats + uint64(len(seen)); h1.LocalHeartbeats != want {
			t.Fatalf("seen %v: %s answered %d heartbeats itself, want %d", seen, fs[1].ID, h1.LocalHeartbeats, want)
		}
	}
	if g := apiGetJob(t, L.URL, apiHead, j.ID, "?consistent"); g.ModifyIndex != claimed.ModifyIndex {
		t.Fatalf("fresh heartbeat changed the job (modify index %d -> %d)", claimed.ModifyIndex, g.ModifyIndex)
	}

	// A lease the head takes back. A claw that knows (it sends the index of
	// the release) is refused at once through every node; one that does not
	// may be told its lease holds for up to the leader lease, after which
	// every node refuses it too (a refusal is always the leader's).
	rs := wName("hb-release")
	jr := wCreate(t, fs[0].URL, rs, "r", nil)
	ar := wMustClaim(t, fs[1].URL, left, "w-r", []string{rs})
	arClaimed := apiGetJob(t, L.URL, apiHead, jr.ID, "?consistent")
	rel := apiPost(t, fs[0].URL, "/jobs/"+jr.ID+"/release", apiHead, nil, 200)
	relIndex, err := strconv.ParseUint(rel.Header.Get("X-Spine-Index"), 10, 64)
	if err != nil {
		t.Fatalf("release answer has no index: %v", rel.Header)
	}
	wCreate(t, fs[0].URL, wName("hb-next"), "n", nil)
	for _, n := range append([]*testcluster.Node{L}, fs...) {
		if r, err := heartbeat(n.URL, wRef("w-r", ar), relIndex); err != nil || r.Status != http.StatusConflict {
			t.Fatalf("heartbeat through %s after the release, given its index: %v %v, want 409", n.ID, r, err)
		}
		apiEventually(t, 5*time.Second, "a heartbeat through "+n.ID+" to report the released lease", func() error {
			r, err := heartbeat(n.URL, wRef("w-r", ar), arClaimed.ModifyIndex)
			if err != nil {
				return err
			}
			if r.Status != http.StatusConflict {
				return fmt.Errorf("heartbeat on a released lease answered %s", r)
			}
			return nil
		})
	}

	// SIGKILL the leader. The survivors elect another, and the lease the
	// coalesced heartbeat reported is the one they hold.
	if err := c.Kill(L); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 20*time.Second, "a heartbeat through a survivor after the failover", func() error {
		hb, err := ack(fs[0].URL, wRef("w-hb", a))
		if err != nil {
			return err
		}
		if hb.LeaseExpiresAt != claimed.LeaseExpiresAt {
			t.Fatalf("after failover the lease ends at %s, the coalesced heartbeat said %s", hb.LeaseExpiresAt, claimed.LeaseExpiresAt)
		}
		return nil
	})
	if ack := wAckOf(t, wComplete(t, fs[1].URL, left, "w-hb", a, "done"), http.StatusOK); !ack.OK || !ack.Ack {
		t.Fatalf("complete after failover: %+v", ack)
	}
	evs := wEvents(t, fs[0].URL, j.ID)
	if n, done := wCountEvents(evs, "heartbeat"), wCountEvents(evs, "completed"); n != 0 || done != 1 {
		t.Fatalf("events after failover: %d heartbeat (want 0), %d completed (want 1)", n, done)
	}
}
