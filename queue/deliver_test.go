package queue

import (
	"strings"
	"testing"
	"time"
)

// A gateway checks a delivery's signature: the body, the secret and the
// time must all be the ones signed.
func TestDeliverySignature(t *testing.T) {
	body := []byte(`{"task_id":"t1"}`)
	now := time.Unix(1_764_412_800, 0)
	h := Sign("s3cret-s3cret-s3cret", now.Unix(), body)
	if !strings.HasPrefix(h, "t=1764412800,v1=") {
		t.Fatalf("header %q", h)
	}
	if err := VerifySignature("s3cret-s3cret-s3cret", h, body, now.Add(30*time.Second), time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"another body":   VerifySignature("s3cret-s3cret-s3cret", h, []byte(`{"task_id":"t2"}`), now, time.Minute),
		"another secret": VerifySignature("another-secret-value", h, body, now, time.Minute),
		"too old":        VerifySignature("s3cret-s3cret-s3cret", h, body, now.Add(2*time.Minute), time.Minute),
		"no signature":   VerifySignature("s3cret-s3cret-s3cret", "t=1764412800", body, now, time.Minute),
		"garbage":        VerifySignature("s3cret-s3cret-s3cret", "v1=abc,t=x", body, now, time.Minute),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A refusal's reason comes from its body's error, in whichever shape,
// else its status; it is bounded.
func TestRefusalReason(t *testing.T) {
	for _, c := range []struct {
		code int
		body string
		want string
	}{
		{422, `{"error":"not for me"}`, "422 not for me"},
		{409, `{"error":{"code":"busy","message":"at capacity"}}`, "409 at capacity"},
		{400, `{"message":"bad task"}`, "400 bad task"},
		{403, `plain words`, "403 plain words"},
		{404, ``, "404 Not Found"},
		{410, "\xff\xfe", "410 Gone"},
	} {
		if got := refusalReason(c.code, []byte(c.body)); got != c.want {
			t.Errorf("%d %q: %q, want %q", c.code, c.body, got, c.want)
		}
	}
	if got := refusalReason(400, []byte(strings.Repeat("x", 5000))); len(got) > maxRefusalBytes+4 {
		t.Errorf("an unbounded reason: %d bytes", len(got))
	}
}
