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

// TestParallel: only labs that measure nothing share the host; a lab that measures
// the learner's fix, or one played Alone, runs by itself.
func TestParallel(t *testing.T) {
	tests := []struct {
		id   string
		opts []Option
		want bool
	}{
		{"ch02-byte-budget", nil, true},
		{"ch02-byte-budget", []Option{Alone}, false},
		{"ch08-rail-throttled", nil, false}, // measures the fix
		{"ch12-nic-flap-timeout", nil, true},
	}
	for _, tt := range tests {
		if got := parallel(t, tt.id, tt.opts); got != tt.want {
			t.Errorf("parallel(%s, %v) = %v, want %v", tt.id, tt.opts, got, tt.want)
		}
	}
}
