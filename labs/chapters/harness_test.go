package chapters

import (
	"slices"
	"sync"
	"testing"
	"time"
)

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

// TestGateAloneAfterOthers: labs played alone wait for every other lab, playing or
// waiting, and then play one after another; a lab that asks while one plays alone
// waits for it.
func TestGateAloneAfterOthers(t *testing.T) {
	var g gate
	var mu sync.Mutex
	var order []string
	log := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var wg sync.WaitGroup
	play := func(name string, u use, d time.Duration) {
		defer wg.Done()
		leave := g.enter(u)
		log(name + "+")
		time.Sleep(d)
		log(name + "-")
		leave()
	}
	leaveA := g.enter(shares) // a lab plays
	wg.Add(3)
	go play("alone1", alone, 10*time.Millisecond)
	go play("alone2", alone, 10*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	go play("other", measures, 30*time.Millisecond) // asks after the alone labs, plays before them
	for waiting := true; waiting; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		waiting = g.waiting[measures] < 1 && g.playing[measures] < 1
		g.mu.Unlock()
	}
	leaveA()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 6 || order[0] != "other+" || order[1] != "other-" {
		t.Fatalf("order %v: the other lab must play before the labs played alone", order)
	}
	for i := 2; i < 6; i += 2 {
		if order[i][:5] != "alone" || order[i+1] != order[i][:len(order[i])-1]+"-" {
			t.Fatalf("order %v: labs played alone must not overlap", order)
		}
	}
	if !slices.Contains(order, "alone1+") || !slices.Contains(order, "alone2+") {
		t.Fatalf("order %v: both labs played alone must play", order)
	}
}

// TestLoadsHost: commands that only read run without a chart's turn; anything else,
// or a line that cannot be read, takes one.
func TestLoadsHost(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"grep -e '#wrong' -A3 -e 'Out of bounds' train.log", false},
		{"env | grep NCCL", false},
		{"tc qdisc replace dev rdma1 root tbf rate 10mbit burst 32kb latency 50ms && tc qdisc show dev rdma1", false},
		{"timeout 35 ip monitor link", false},
		{"ping -c 300 -i 0.01 -s 1400 -p a5 198.18.0.2", false},
		{"ping -f -c 1000 198.18.0.2", true},
		{"iperf3 -c 198.18.0.2 -t 5", true},
		{"env NCCL_ALGO=Ring commlab bench all_reduce", true},
		{"grep x train.log | python3 -c 'print(1)'", true},
		{"timeout 3 bash -c 'echo > /dev/tcp/198.18.8.2/29500'; echo rc=$?", true},
		{"grep -E 'a|iperf3' log", true}, // split inside quotes: read as loading
		{"commlab bench rank", true},
	}
	for _, tt := range tests {
		if got := loadsHost(tt.line); got != tt.want {
			t.Errorf("loadsHost(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

// TestGateMeasuringFirst: a slot that comes free goes to a lab that measures the fix
// before one that measures nothing, up to MeasuringSideBySide of them; the labs that
// measure nothing have every slot the measuring labs cannot take.
func TestGateMeasuringFirst(t *testing.T) {
	tests := []struct {
		name             string
		playing, waiting [alone + 1]int
		want             [alone + 1]bool // may a lab of each use start
	}{
		{"empty host", [3]int{}, [3]int{}, [3]bool{true, true, true}},
		{"full", [3]int{shares: 2, measures: 1}, [3]int{}, [3]bool{false, false, false}},
		{"a slot, a measuring lab waits", [3]int{shares: 2}, [3]int{measures: 1}, [3]bool{shares: false, measures: true}},
		{"two slots, a measuring lab waits", [3]int{shares: 1}, [3]int{measures: 1}, [3]bool{shares: true, measures: true}},
		{"measuring labs at their cap", [3]int{measures: 2}, [3]int{measures: 3}, [3]bool{shares: true, measures: false}},
		{"one more measuring lab may play", [3]int{shares: 1, measures: 1}, [3]int{measures: 3}, [3]bool{shares: false, measures: true}},
		{"a lab plays alone", [3]int{alone: 1}, [3]int{}, [3]bool{false, false, false}},
		{"alone waits for the waiting", [3]int{}, [3]int{shares: 1}, [3]bool{shares: true, measures: true, alone: false}},
	}
	if SideBySide != 3 || MeasuringSideBySide != 2 {
		t.Fatalf("the table is written for 3 labs side by side, 2 of them measuring (now %d, %d)", SideBySide, MeasuringSideBySide)
	}
	for _, tt := range tests {
		g := gate{playing: tt.playing, waiting: tt.waiting}
		for u := shares; u <= alone; u++ {
			if got := g.may(u); got != tt.want[u] {
				t.Errorf("%s: may(%v) = %v, want %v", tt.name, u, got, tt.want[u])
			}
		}
	}
}
