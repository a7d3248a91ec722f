//go:build linux

// Command labs-bench measures the netns lab backend: Up+Down time of 2-, 4-
// and 8-node sandboxes (p50/p99 over repeated runs) and how many 4-node
// sandboxes one host holds at once, with the memory each costs. It prints a
// table; scripts/bench-labs.sh runs it for `make bench`. Needs root.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/topology"
)

func main() {
	runs := flag.Int("runs", 20, "Up+Down runs per topology")
	maxHeld := flag.Int("max", 100, "stop holding sandboxes at this many")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "labs-bench: needs root (network namespaces, tc, cgroups)")
		os.Exit(2)
	}
	data, err := os.MkdirTemp("", "labs-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(data)
	ctx := context.Background()
	var ids []string
	newID := func() string {
		id := "b" + netns.NewID()[1:]
		ids = append(ids, id)
		return id
	}
	// Whatever happens, leave nothing of ours behind.
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if _, err := netns.SweepWith(cctx, data, netns.SweepOptions{Match: func(id string) bool { return slices.Contains(ids, id) }}); err != nil {
			fmt.Fprintln(os.Stderr, "labs-bench: cleanup:", err)
		}
	}()

	fmt.Printf("labs benchmark: netns backend, %d CPUs, kernel %s\n\n", runtime.NumCPU(), kernel())
	fmt.Printf("%-9s %5s %5s | %-23s | %-21s | %s\n", "TOPOLOGY", "NODES", "LINKS", "UP+DOWN p50 / p99", "UP p50 / p99", "DOWN p50 / p99")
	var fourNodeP50 time.Duration
	for _, name := range []string{"2x1", "4x2", "8x1"} {
		top, err := topology.Builtin(name)
		if err != nil {
			fail(err)
		}
		var up, down, total []time.Duration
		for i := 0; i < *runs; i++ {
			s, err := netns.New(top, netns.Options{DataDir: data, ID: newID()})
			if err != nil {
				fail(err)
			}
			t0 := time.Now()
			if err := s.Up(ctx); err != nil {
				fail(fmt.Errorf("%s run %d: %w", name, i, err))
			}
			t1 := time.Now()
			if err := s.Down(ctx); err != nil {
				fail(fmt.Errorf("%s run %d: %w", name, i, err))
			}
			t2 := time.Now()
			up, down, total = append(up, t1.Sub(t0)), append(down, t2.Sub(t1)), append(total, t2.Sub(t0))
		}
		links := 0
		for _, n := range top.Nodes {
			links += len(n.NICs)
		}
		fmt.Printf("%-9s %5d %5d | %9s / %-11s | %8s / %-10s | %8s / %s\n", name, len(top.Nodes), links,
			ms(pct(total, 50)), ms(pct(total, 99)), ms(pct(up, 50)), ms(pct(up, 99)), ms(pct(down, 50)), ms(pct(down, 99)))
		if len(top.Nodes) == 4 {
			fourNodeP50 = pct(total, 50)
		}
	}

	// Hold 4-node sandboxes until the first failure or the cap.
	top, _ := topology.Builtin("4x2")
	settle()
	before := memAvailable()
	var held []*netns.Sandbox
	var firstErr error
	var lastUp time.Duration
	for len(held) < *maxHeld {
		s, err := netns.New(top, netns.Options{DataDir: data, ID: newID()})
		if err != nil {
			firstErr = err
			break
		}
		t0 := time.Now()
		if err := s.Up(ctx); err != nil {
			firstErr = err
			break
		}
		lastUp = time.Since(t0)
		held = append(held, s)
	}
	after := memAvailable()
	perSandbox := float64(before-after) / float64(max(1, len(held)))
	t0 := time.Now()
	for _, s := range held {
		if err := s.Down(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "labs-bench: down:", err)
		}
	}
	downAll := time.Since(t0)

	fmt.Printf("\n%-34s %d (cap %d)\n", "4-node sandboxes held at once:", len(held), *maxHeld)
	if firstErr != nil {
		fmt.Printf("%-34s %v\n", "first failure:", firstErr)
	} else {
		fmt.Printf("%-34s none\n", "first failure:")
	}
	fmt.Printf("%-34s %.1f MiB (MemAvailable drop / sandboxes; kernel memory, no processes)\n", "memory per 4-node sandbox:", perSandbox/(1<<20))
	fmt.Printf("%-34s %s\n", "Up of the last one held:", ms(lastUp))
	fmt.Printf("%-34s %s\n", "Down of all held:", ms(downAll))

	fmt.Println()
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Printf("target 4-node Up+Down < 500ms (p50 %s): %s\n", ms(fourNodeP50), verdict(fourNodeP50 < 500*time.Millisecond))
	fmt.Printf("target 100 concurrent 4-node sandboxes (%d): %s\n", len(held), verdict(len(held) >= 100))
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100 // nearest-rank
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

// memAvailable reads MemAvailable in bytes.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// settle gives the kernel time to free namespaces from the timing runs
// (their teardown is asynchronous) so the memory figure is not skewed.
func settle() {
	prev := memAvailable()
	for i := 0; i < 20; i++ {
		time.Sleep(250 * time.Millisecond)
		cur := memAvailable()
		if cur-prev < 1<<20 {
			return
		}
		prev = cur
	}
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "labs-bench:", err)
	os.Exit(1)
}
