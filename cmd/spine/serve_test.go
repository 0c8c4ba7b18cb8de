package main

import (
	"strings"
	"testing"
	"time"
)

func TestServeTimerSlackSetting(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	for _, tc := range []struct {
		env, flag string
		want      time.Duration
		bad       bool
	}{
		{want: 5 * time.Millisecond},
		{env: "0", want: 0},
		{env: "2ms", want: 2 * time.Millisecond},
		{env: "2ms", flag: "750us", want: 750 * time.Microsecond},
		{env: "soon", bad: true},
		{env: "-1ms", bad: true},
		{env: "5s", bad: true},
		{env: "5", bad: true},
	} {
		t.Setenv("SPINE_TIMER_SLACK", tc.env)
		args := []string{"--node-id", "n1"}
		if tc.flag != "" {
			args = append(args, "--timer-slack", tc.flag)
		}
		c, err := parseServe(args)
		switch {
		case tc.bad && err == nil:
			t.Errorf("SPINE_TIMER_SLACK=%q accepted as %v", tc.env, c.TimerSlack)
		case tc.bad && !strings.Contains(err.Error(), "SPINE_TIMER_SLACK"):
			t.Errorf("SPINE_TIMER_SLACK=%q: error %q does not name the setting", tc.env, err)
		case !tc.bad && err != nil:
			t.Errorf("SPINE_TIMER_SLACK=%q --timer-slack=%q: %v", tc.env, tc.flag, err)
		case !tc.bad && c.TimerSlack != tc.want:
			t.Errorf("SPINE_TIMER_SLACK=%q --timer-slack=%q: %v, want %v", tc.env, tc.flag, c.TimerSlack, tc.want)
		}
	}
}

func TestServeLeaseRenewFractionSetting(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	for _, tc := range []struct {
		env, flag string
		want      float64
		bad       bool
	}{
		{want: 0.1},
		{env: "0", want: 0},
		{env: "0.25", want: 0.25},
		{env: "0.25", flag: "0.5", want: 0.5},
		{env: "0.6", bad: true},
		{env: "-0.1", bad: true},
		{env: "NaN", bad: true},
		{env: "10%", bad: true},
	} {
		t.Setenv("SPINE_LEASE_RENEW_FRACTION", tc.env)
		args := []string{"--node-id", "n1"}
		if tc.flag != "" {
			args = append(args, "--lease-renew-fraction", tc.flag)
		}
		c, err := parseServe(args)
		switch {
		case tc.bad && err == nil:
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q accepted as %v", tc.env, c.LeaseRenewFraction)
		case tc.bad && !strings.Contains(err.Error(), "SPINE_LEASE_RENEW_FRACTION"):
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q: error %q does not name the setting", tc.env, err)
		case !tc.bad && err != nil:
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q --lease-renew-fraction=%q: %v", tc.env, tc.flag, err)
		case !tc.bad && c.LeaseRenewFraction != tc.want:
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q --lease-renew-fraction=%q: %v, want %v", tc.env, tc.flag, c.LeaseRenewFraction, tc.want)
		}
	}
}
