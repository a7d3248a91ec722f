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

// TestParallel: every lab shares the host with others except one played Alone.
func TestParallel(t *testing.T) {
	tests := []struct {
		opts []Option
		want bool
	}{
		{nil, true},
		{[]Option{Alone}, false},
	}
	for _, tt := range tests {
		if got := parallel(tt.opts); got != tt.want {
			t.Errorf("parallel(%v) = %v, want %v", tt.opts, got, tt.want)
		}
	}
}
