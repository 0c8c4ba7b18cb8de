package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	heartbeat := func(base string, ref map[string]interface{}) (*wResp, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wCallTimeout)
		defer cancel()
		return wDo(ctx, base, left, "POST", "/internal/worker/heartbeat", ref)
	}
	ackOf := func(r *wResp) (wAck, error) {
		var a wAck
		if r.Status != http.StatusOK {
			return a, fmt.Errorf("heartbeat answered %s", r)
		}
		err := json.Unmarshal(r.Body, &a)
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
		r, err := heartbeat(fs[1].URL, wRef("w-short", b))
		if err != nil {
			return err
		}
		a, err := ackOf(r)
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

	// A fresh lease (300 s): the heartbeat through the other follower is
	// answered with the claim's expiry and writes nothing.
	stream := wName("hb")
	j := wCreate(t, fs[0].URL, stream, "a", nil)
	a := wMustClaim(t, fs[0].URL, left, "w-hb", []string{stream})
	claimed := apiGetJob(t, L.URL, apiHead, j.ID, "?consistent")
	r, err := heartbeat(fs[1].URL, wRef("w-hb", a))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := ackOf(r)
	if err != nil || hb.LeaseExpiresAt != claimed.LeaseExpiresAt {
		t.Fatalf("fresh heartbeat: %v %+v, want the claim's lease %s", err, hb, claimed.LeaseExpiresAt)
	}
	if g := apiGetJob(t, L.URL, apiHead, j.ID, "?consistent"); g.ModifyIndex != claimed.ModifyIndex {
		t.Fatalf("fresh heartbeat changed the job (modify index %d -> %d)", claimed.ModifyIndex, g.ModifyIndex)
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
		r, err := heartbeat(fs[0].URL, wRef("w-hb", a))
		if err != nil {
			return err
		}
		hb, err := ackOf(r)
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
