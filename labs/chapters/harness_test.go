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
	play := func(name string, alone bool, d time.Duration) {
		defer wg.Done()
		leave := g.enter(alone)
		log(name + "+")
		time.Sleep(d)
		log(name + "-")
		leave()
	}
	leaveA := g.enter(false) // a lab plays
	wg.Add(3)
	go play("alone1", true, 10*time.Millisecond)
	go play("alone2", true, 10*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	go play("other", false, 30*time.Millisecond) // asks after the alone labs, plays before them
	for waiting := true; waiting; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		waiting = g.others < 2
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
