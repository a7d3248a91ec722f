package chapters

import "testing"

// TestAllSeeds: the seeds a run plays, from COMMLAB_E2E_SEEDS.
func TestAllSeeds(t *testing.T) {
	tests := []struct {
		v       string
		all, ok bool
	}{
		{"", false, true},
		{"first", false, true},
		{"all", true, true},
		{"2", false, false},
		{"ALL", false, false},
	}
	for _, tt := range tests {
		all, err := allSeeds(tt.v)
		if all != tt.all || (err == nil) != tt.ok {
			t.Errorf("allSeeds(%q) = %v, %v; want %v, ok %v", tt.v, all, err, tt.all, tt.ok)
		}
	}
}

// TestHostUse: labs that measure the learner's fix, and those played Alone, are
// kept from each other; the others share the host.
func TestHostUse(t *testing.T) {
	tests := []struct {
		id   string
		opts []Option
		want use
	}{
		{"ch02-byte-budget", nil, shares},
		{"ch02-byte-budget", []Option{Alone}, alone},
		{"ch08-rail-throttled", nil, measures},
		{"ch26-alert-rules", nil, shares}, // alerting rules: tested on recorded series
		{"ch12-nic-flap-timeout", nil, shares},
	}
	for _, tt := range tests {
		if got := hostUse(t, tt.id, tt.opts); got != tt.want {
			t.Errorf("hostUse(%s, %v) = %v, want %v", tt.id, tt.opts, got, tt.want)
		}
	}
}
