package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"

	"github.com/hashicorp/raft"
)

// rateHarness is a harness at LevelPolicies.
func rateHarness(t *testing.T) *harness {
	h := newHarness(t)
	if r := h.apply(CmdLevel, &LevelCommand{Now: h.now, Level: LatestLevel}); r.Err != nil {
		t.Fatal(r.Err)
	}
	return h
}

func rateOf2(key string, limit int, period int64, burst int) *RateLimit {
	return &RateLimit{Key: key, Limit: limit, PeriodNanos: period, Burst: burst}
}

// claimsNow claims until nothing is left to claim at h.now, and returns
// the jobs taken.
func (h *harness) claimsNow(streams []string) []*Job {
	h.t.Helper()
	if streams == nil {
		streams = []string{DefaultStream}
	}
	var out []*Job
	for {
		r := h.claimNext(streams, left)
		if r.Err != nil {
			h.t.Fatalf("claim: %v", r.Err)
		}
		if !r.Claimed {
			return out
		}
		out = append(out, r.Job)
	}
}

// A bucket of 2 per 10s with a burst of 3: three claims at once, then one
// each 5s, and after a long pause no more than the burst again. A claim of
// a job by id is refused while the bucket is empty.
func TestRateBucketRefillAndBurst(t *testing.T) {
	h := rateHarness(t)
	rate := rateOf2("api", 2, 10e9, 3)
	var jobs []*Job
	for range 12 {
		jobs = append(jobs, h.create(CreateCommand{Rate: rate}))
	}
	want := func(n int, when string) {
		t.Helper()
		if got := h.claimsNow(nil); len(got) != n {
			t.Fatalf("%s: %d claimed, want %d", when, len(got), n)
		}
	}
	want(3, "at once (the burst)")
	if r := h.claim(jobs[11].ID, left); !errors.Is(r.Err, ErrNotYetClaimable) {
		t.Fatalf("claim by id of an empty bucket's job: %v", r.Err)
	}
	b, _ := h.f.Read().RateBucketOf("api")
	if !b.Blocked || b.Tokens(h.now) != 0 || h.f.Read().NextRateDue() != h.now+5e9 {
		t.Fatalf("bucket after the burst: %+v, next due %d (now %d)", b, h.f.Read().NextRateDue(), h.now)
	}
	if w := h.f.Read().RateWaiting(HeadRole, func(string) bool { return true }); w[DefaultStream] != 9 {
		t.Fatalf("waiting on the rate: %v", w)
	}
	// Tokens counts what the bucket allows, as the claims find it.
	for _, c := range []struct {
		at   int64
		want int
	}{{0, 0}, {5e9 - 1, 0}, {5e9, 1}, {7.5e9, 1}, {10e9, 2}, {15e9, 3}, {3600e9, 3}} {
		if got := b.Tokens(h.now + c.at); got != c.want {
			t.Errorf("tokens %v after the burst: %d, want %d", c.at, got, c.want)
		}
	}
	h.now += 5e9 - 1
	want(0, "just before a token")
	h.now++
	want(1, "a token later")
	h.now += 5e9
	want(1, "another")
	h.now += 3600e9
	want(3, "after an hour: the burst, no more")
	if r := h.claim(jobs[11].ID, left); !errors.Is(r.Err, ErrNotYetClaimable) {
		t.Fatalf("claim by id past the burst: %v", r.Err)
	}
	h.now += 5e9
	if r := h.claim(jobs[11].ID, left); r.Err != nil || !r.Claimed {
		t.Fatalf("claim by id with a token: %+v", r)
	}
	checkIndexes(t, h.f)
}

// Jobs of a key out of tokens wait without holding back the jobs behind
// them: a lower priority, another key, no key.
func TestRateLimitedKeyDoesNotBlockOthers(t *testing.T) {
	h := rateHarness(t)
	slow := rateOf2("slow", 1, 3600e9, 1)
	for range 5 {
		h.create(CreateCommand{Rate: slow, Priority: 50})
	}
	other := h.create(CreateCommand{Rate: rateOf2("other", 100, 1e9, 0), Priority: 10})
	plain := h.create(CreateCommand{})
	got := h.claimsNow(nil)
	if len(got) != 3 || got[0].Extra().Rate.Key != "slow" || got[1].ID != other.ID || got[2].ID != plain.ID {
		t.Fatalf("claimed %v", ids(got))
	}
	if w := h.f.Read().RateWaiting(HeadRole, func(string) bool { return true }); w[DefaultStream] != 4 {
		t.Fatalf("waiting on the rate: %v", w)
	}
	checkIndexes(t, h.f)
}

// A rate and a concurrency limit on the same jobs: a claim needs both;
// within the key the higher priority goes first.
func TestRateComposesWithConcurrencyAndPriority(t *testing.T) {
	h := rateHarness(t)
	rate := rateOf2("r", 2, 10e9, 2)
	low := h.create(CreateCommand{Rate: rate, ConcurrencyKey: "c", ConcurrencyLimit: 1})
	high := h.create(CreateCommand{Rate: rate, ConcurrencyKey: "c", ConcurrencyLimit: 1, Priority: 20})
	third := h.create(CreateCommand{Rate: rate, ConcurrencyKey: "c", ConcurrencyLimit: 1})
	got := h.claimsNow(nil)
	if len(got) != 1 || got[0].ID != high.ID {
		t.Fatalf("first claims %v, want only %s (concurrency 1, highest priority)", ids(got), high.ID)
	}
	complete := func(j *Job) {
		t.Helper()
		if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token},
			Actor: left, Result: []byte(`{}`)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	complete(got[0])
	got = h.claimsNow(nil)
	if len(got) != 1 || got[0].ID != low.ID {
		t.Fatalf("after the first completes: %v, want %s", ids(got), low.ID)
	}
	complete(got[0])
	// The concurrency key has room; the rate (burst 2) has none.
	if got = h.claimsNow(nil); len(got) != 0 {
		t.Fatalf("claimed %v past the rate", ids(got))
	}
	checkIndexes(t, h.f)
	h.now += 5e9
	if got = h.claimsNow(nil); len(got) != 1 || got[0].ID != third.ID {
		t.Fatalf("a token later: %v", ids(got))
	}
	checkIndexes(t, h.f)
}

// An empty bucket survives a snapshot: the restored state refuses the
// claim until the token comes, and the promote entry at that time opens
// the bucket (the leader's cue to wake waiting claims).
func TestRateSnapshotRoundTrip(t *testing.T) {
	h := rateHarness(t)
	rate := rateOf2("k", 1, 60e9, 1)
	h.create(CreateCommand{Rate: rate})
	h.create(CreateCommand{Rate: rate, Stream: "b"})
	h.create(CreateCommand{Rate: rate, ConcurrencyKey: "c", ConcurrencyLimit: 3})
	if got := h.claimsNow([]string{DefaultStream, "b"}); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	raw := writeSnapshot(t, h.f)
	f2, _ := New(Config{DefaultMaxAttempts: 5})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if stateHash(t, h.f) != stateHash(t, f2) {
		t.Fatal("restored state differs")
	}
	checkIndexes(t, f2)
	if again := writeSnapshot(t, f2); !bytes.Equal(raw, again) {
		t.Fatal("the restored state writes another snapshot")
	}
	b, ok := f2.Read().RateBucketOf("k")
	if !ok || !b.Blocked || b.RateLimit != *rate {
		t.Fatalf("restored bucket %+v %v", b, ok)
	}
	h.f = f2
	if got := h.claimsNow([]string{DefaultStream, "b"}); len(got) != 0 {
		t.Fatalf("claimed %v from the restored empty bucket", ids(got))
	}
	h.now += 60e9
	if at := f2.Read().NextRateDue(); at != h.now {
		t.Fatalf("next due %d, want %d", at, h.now)
	}
	if r := h.apply(CmdPromote, &PromoteCommand{Now: h.now, Max: 10}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if b, _ := f2.Read().RateBucketOf("k"); b.Blocked {
		t.Fatal("the promote entry did not open the bucket")
	}
	checkIndexes(t, f2)
	if got := h.claimsNow([]string{DefaultStream, "b"}); len(got) != 1 {
		t.Fatalf("a token later: %v", ids(got))
	}
}

// A stream's default rate goes to the jobs created without one; the
// latest create naming a key sets its rate; bad rates are refused; below
// LevelPolicies a rate is not applied.
func TestRateDefaultsAndDefinition(t *testing.T) {
	h := rateHarness(t)
	if r := h.apply(CmdStreamDefaults, &StreamDefaultsCommand{Now: h.now, Stream: "s", Actor: head, Rate: rateOf2("s-rate", 5, 1e9, 0)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	j := h.create(CreateCommand{Stream: "s"})
	if r := j.Extra().Rate; r == nil || r.Key != "s-rate" || r.Limit != 5 {
		t.Fatalf("job's rate %+v", r)
	}
	own := h.create(CreateCommand{Stream: "s", Rate: rateOf2("mine", 1, 1e9, 0)})
	if own.Extra().Rate.Key != "mine" {
		t.Fatalf("own rate %+v", own.Extra().Rate)
	}
	h.create(CreateCommand{Rate: rateOf2("s-rate", 9, 2e9, 4)})
	if b, _ := h.f.Read().RateBucketOf("s-rate"); b.Limit != 9 || b.PeriodNanos != 2e9 || b.Burst != 4 {
		t.Fatalf("the latest create's rate did not win: %+v", b)
	}
	for _, bad := range []*RateLimit{rateOf2("", 1, 1e9, 0), rateOf2("x", 0, 1e9, 0), rateOf2("x", 1, 0, 0),
		rateOf2("x", 1, MaxRatePeriod+1, 0), rateOf2("x", 1, 1e9, -1)} {
		r := h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: h.nextID("bad"), Payload: []byte(`1`), Actor: head, Rate: bad})
		if !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("rate %+v: %v", bad, r.Err)
		}
		if r := h.apply(CmdStreamDefaults, &StreamDefaultsCommand{Now: h.now, Stream: "s", Actor: head, Rate: bad}); !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("default rate %+v: %v", bad, r.Err)
		}
	}
	old := newHarness(t)
	if j := old.create(CreateCommand{Rate: rateOf2("x", 1, 1e9, 0)}); j.Extra().Rate != nil {
		t.Fatal("a rate applied below LevelPolicies")
	}
	// A bucket no job uses is dropped once full.
	h2 := rateHarness(t)
	j2 := h2.create(CreateCommand{Rate: rateOf2("gone", 1, 10e9, 0)})
	c := h2.claimNext([]string{DefaultStream}, left)
	h2.apply(CmdComplete, &CompleteCommand{Now: h2.now, Ref: LeaseRef{JobID: j2.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}, Actor: left, Result: []byte(`{}`)})
	h2.now += 10e9
	h2.apply(CmdPromote, &PromoteCommand{Now: h2.now, Max: 1})
	if _, ok := h2.f.Read().RateBucketOf("gone"); ok || h2.f.Read().NextRateDue() != 0 {
		t.Fatal("an unused full bucket was kept")
	}
	checkIndexes(t, h2.f)
}

// However claims, creates, completes and fails interleave, the claims of
// a key, by the times the entries stamped on them, never exceed the rate:
// any run of n claims from t1 to t2 has n <= burst + (t2-t1)*limit/period.
func TestRateConformanceRandom(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		h := rateHarness(t)
		rates := []*RateLimit{rateOf2("a", 1+rng.IntN(4), int64(1+rng.IntN(5))*1e9, rng.IntN(4)), rateOf2("b", 3, 1e9, 1)}
		var running []*Job
		for range 600 {
			h.now += int64(rng.IntN(400e6))
			switch rng.IntN(4) {
			case 0:
				c := CreateCommand{Rate: rates[rng.IntN(2)], Priority: rng.IntN(3)}
				if rng.IntN(2) == 0 {
					c.ConcurrencyKey, c.ConcurrencyLimit = "c", 2
				}
				h.create(c)
			case 1, 2:
				if r := h.claimNext([]string{DefaultStream}, left); r.Claimed {
					running = append(running, r.Job)
				}
			default:
				if len(running) > 0 {
					i := rng.IntN(len(running))
					j := running[i]
					running = append(running[:i], running[i+1:]...)
					h.apply(CmdFail, &FailCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}, Actor: left, Error: JobError{Message: "x"}, Requeue: true})
				}
			}
		}
		checkIndexes(t, h.f)
		for _, r := range rates {
			var at []int64
			for _, j := range h.f.Read().allJobs() {
				if j.Extra().Rate != nil && j.Extra().Rate.Key == r.Key {
					for _, a := range j.AttemptLog() {
						at = append(at, a.StartedAt)
					}
				}
			}
			sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
			if err := conforms(at, r); err != nil {
				t.Fatalf("seed %d key %s %+v: %v", seed, r.Key, r, err)
			}
			if len(at) < 3 {
				t.Fatalf("seed %d key %s: only %d claims", seed, r.Key, len(at))
			}
		}
	}
}

// conforms checks sorted claim times against a rate.
func conforms(at []int64, r *RateLimit) error {
	for i := range at {
		for j := i; j < len(at); j++ {
			n := j - i + 1
			allowed := int64(r.burst()) + (at[j]-at[i])*int64(r.Limit)/r.PeriodNanos
			if int64(n) > allowed {
				return fmt.Errorf("%d claims from %d to %d, the rate allows %d", n, at[i], at[j], allowed)
			}
		}
	}
	return nil
}

func (r *Reader) allJobs() []*Job {
	var out []*Job
	r.point(func(t *tables) {
		t.byID.Ascend(func(it idItem) bool { out = append(out, it.j); return true })
	})
	return out
}

// BenchmarkClaimNextRated is the claim path with rate limits in use, next
// to the same claims without (rates=none): claims of plain jobs while
// 10,000 rate-limited keys are out of tokens (rates=blocked), and claims
// that each take a token of one of 10,000 keys, closing it, while the
// claims' clock opens the keys closed a second earlier (rates=turning).
func BenchmarkClaimNextRated(b *testing.B) {
	const keys = 10_000
	for _, mode := range []string{"none", "blocked", "turning"} {
		b.Run("rates="+mode, func(b *testing.B) {
			f, _ := New(Config{})
			var idx uint64
			batch := make([]*raft.Log, 0, 512)
			add := func(t CommandType, c any) {
				idx++
				batch = append(batch, &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(t, c)})
				if len(batch) == cap(batch) {
					f.ApplyBatch(batch)
					batch = batch[:0]
				}
			}
			add(CmdLevel, &LevelCommand{Now: 1, Level: LatestLevel})
			now := int64(1e9)
			claim := func(i int) *ClaimCommand {
				return &ClaimCommand{Now: now, Streams: []string{DefaultStream}, Targets: []string{"left_claw"}, Actor: left,
					AttemptID: fmt.Sprintf("a%d", i), LeaseToken: fmt.Sprintf("t%d", i), LeaseNanos: lease}
			}
			plain := 10_000 + b.N
			switch mode {
			case "blocked":
				// Each key: one job claimed (its one token an hour), one waiting.
				for k := range keys {
					r := rateOf2(fmt.Sprintf("key-%d", k), 1, 3600e9, 1)
					for range 2 {
						add(CmdCreate, &CreateCommand{Now: now, ID: fmt.Sprintf("k%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head, Rate: r})
					}
					add(CmdClaim, claim(-k-1))
				}
			case "turning":
				// A token a second per key, the claims 100µs apart: each claim
				// closes one key, and a key opens again 10,000 claims later.
				per := b.N/keys + 2
				for range per {
					for k := range keys {
						add(CmdCreate, &CreateCommand{Now: now, ID: fmt.Sprintf("k%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head,
							Rate: rateOf2(fmt.Sprintf("key-%d", k), 1, 1e9, 1)})
					}
				}
				plain = 0
			}
			for range plain {
				add(CmdCreate, &CreateCommand{Now: now, ID: fmt.Sprintf("q%08d", idx), Stream: DefaultStream, Payload: payload256, Actor: head})
			}
			if len(batch) > 0 {
				f.ApplyBatch(batch)
			}
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				idx++
				now += 100e3
				logs[i] = &raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, claim(i))}
			}
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < len(logs); i += 64 {
				for _, r := range f.ApplyBatch(logs[i:min(i+64, len(logs))]) {
					if !r.(*Result).Claimed {
						b.Fatal("nothing claimed")
					}
				}
				f.Read()
			}
		})
	}
}

// randomLog (the property tests' log) meets rate buckets that are closed,
// reopened and dropped, so replay, snapshots and the hash cover them.
func TestRandomLogCoversRates(t *testing.T) {
	f, _ := New(Config{})
	var blocked, opened, buckets int
	wasBlocked := map[string]bool{}
	for i, d := range randomLog(1, 3000) {
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: d})
		for _, b := range f.Read().RateBuckets() {
			buckets++
			if b.Blocked && !wasBlocked[b.Key] {
				blocked++
			}
			if !b.Blocked && wasBlocked[b.Key] {
				opened++
			}
			wasBlocked[b.Key] = b.Blocked
		}
	}
	if blocked < 5 || opened < 5 || buckets == 0 {
		t.Fatalf("randomLog closed %d buckets and opened %d (%d bucket views)", blocked, opened, buckets)
	}
	t.Logf("closed %d, opened %d", blocked, opened)
}
