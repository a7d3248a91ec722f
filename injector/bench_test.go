//go:build linux

package injector

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInjectorBench prints the injector's benchmark tables (scripts/bench-injector.sh
// runs it): apply and revert latency per kind, nic-rate precision, loss precision.
// It only runs with COMMLAB_INJECTOR_BENCH=1; COMMLAB_BENCH_ITER sets the
// iterations per kind (default 100).
func TestInjectorBench(t *testing.T) {
	if os.Getenv("COMMLAB_INJECTOR_BENCH") != "1" {
		t.Skip("set COMMLAB_INJECTOR_BENCH=1 (scripts/bench-injector.sh)")
	}
	iter := 100
	if v, err := strconv.Atoi(os.Getenv("COMMLAB_BENCH_ITER")); err == nil && v > 0 {
		iter = v
	}
	f := Probe(ctxT(t))
	fmt.Printf("\nkernel features: tbf=%v htb=%v netem=%v ifb=%v mirred=%v nftables=%v cgroup=%s\n",
		f.TBF, f.HTB, f.Netem, f.IFB, f.Mirred, f.Nftables, f.Cgroup)
	only := os.Getenv("COMMLAB_BENCH_ONLY") // latency, rate, loss, delay or crash
	if only == "" || only == "latency" {
		benchLatency(t, iter)
	}
	if only == "" || only == "rate" {
		benchRate(t)
	}
	if only == "" || only == "loss" {
		benchLoss(t)
	}
	if only == "" || only == "delay" {
		benchDelay(t)
	}
	if only == "" || only == "crash" {
		loops := 300
		if v, err := strconv.Atoi(os.Getenv("COMMLAB_CRASH_LOOPS")); err == nil && v > 0 {
			loops = v
		}
		t0 := time.Now()
		inflight, byKind := crashLoops(t, loops)
		fmt.Printf("\n### Crash safety (kill -9 at a random moment of apply/revert, then sweep)\n\n")
		fmt.Println("| loops | killed with a fault journaled | objects left after sweep | journal after sweep | time |")
		fmt.Println("|---:|---:|---:|---|---:|")
		fmt.Printf("| %d | %d (%s) | 0 | empty | %s |\n", loops, inflight, paramText(kindCounts(byKind)), time.Since(t0).Round(time.Second))
	}
}

func benchLatency(t *testing.T, iter int) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	ctx := ctxT(t)
	kinds := []struct {
		kind   string
		params map[string]string
		iter   int
	}{
		{"nic-rate", map[string]string{"nic": "rdma0", "rate": "100mbit"}, iter},
		{"nic-rate", map[string]string{"nic": "rdma0", "rate": "100mbit", "direction": "in"}, iter},
		{"loss", map[string]string{"nic": "rdma0", "percent": "1%"}, iter},
		{"loss", map[string]string{"nic": "rdma0", "percent": "1%", "direction": "both"}, iter},
		{"roce-drop", map[string]string{"nic": "rdma0"}, iter},
		{"port-block", map[string]string{"ports": "29500"}, iter},
		{"nic-down", map[string]string{"nic": "rdma0"}, iter},
		{"mtu-mismatch", map[string]string{"nic": "rdma0", "mtu": "1400"}, iter},
		{"wrong-route", map[string]string{"to": "198.18.1.0/24", "nic": "eth0"}, iter},
		{"env-force", map[string]string{"vars": "NCCL_P2P_DISABLE=1"}, iter},
		{"cpu-squeeze", map[string]string{"cpus": "0.5"}, iter},
		{"mem-pressure", map[string]string{"limit": "512MiB"}, iter},
		{"shm-small", map[string]string{"size": "1MiB"}, max(iter/4, 5)},
		{"nic-flap", map[string]string{"nic": "rdma0", "period": "10s"}, max(iter/4, 5)},
		{"congestion", map[string]string{"nic": "rdma0", "senders": "n2", "rate": "10mbit"}, max(iter/10, 5)},
	}
	fmt.Printf("\n### Apply and revert latency (ms), %s\n\n", "journal fsync included")
	fmt.Println("| kind | params | n | apply p50 | apply p99 | revert p50 | revert p99 |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	for _, k := range kinds {
		f := mustParse(t, in, k.kind, k.params)
		var ap, rv []time.Duration
		for range k.iter {
			t0 := time.Now()
			e, err := in.Apply(ctx, l.target("n1"), f, time.Minute)
			if err != nil {
				t.Fatalf("%s: %v", k.kind, err)
			}
			t1 := time.Now()
			if err := in.Revert(ctx, e.ID); err != nil {
				t.Fatalf("%s: %v", k.kind, err)
			}
			ap, rv = append(ap, t1.Sub(t0)), append(rv, time.Since(t1))
		}
		fmt.Printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f |\n", k.kind, paramText(k.params), k.iter,
			ms(pct(ap, 50)), ms(pct(ap, 99)), ms(pct(rv, 50)), ms(pct(rv, 99)))
	}
}

func benchRate(t *testing.T) {
	fmt.Printf("\n### nic-rate precision (iperf3 TCP, n1 to n2, 5 s after 1 s omitted)\n\n")
	fmt.Println("| MTU | asked Mbit/s | iperf3 goodput | error | tbf wire rate | error |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	for _, mtu := range []int{9000, 1500} {
		l := newLab(t, mtu, "n1", "n2")
		in := newInjector(t)
		for _, rate := range []string{"10mbit", "100mbit", "1000mbit"} {
			asked, got, wire := rateRun(t, l, in, rate, 5)
			fmt.Printf("| %d | %.0f | %.1f | %+.1f%% | %.1f | %+.1f%% |\n", mtu, asked, got, 100*(got/asked-1), wire, 100*(wire/asked-1))
		}
	}
}

func benchLoss(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	fmt.Printf("\n### loss precision (UDP datagrams n2 to n1, loss on n1's rdma0 inbound)\n\n")
	fmt.Println("| asked | datagrams | measured | 99.99 % binomial interval | inside |")
	fmt.Println("|---:|---:|---:|---|---|")
	for _, c := range []struct {
		pct string
		n   int
	}{{"0.1%", 100000}, {"1%", 50000}, {"10%", 20000}} {
		sent, _, got, lo, hi := lossRun(t, l, in, c.pct, c.n)
		fmt.Printf("| %s | %d | %.3f%% | %.3f%% – %.3f%% | %v |\n", c.pct, sent, 100*got, 100*max(lo, 0), 100*hi, got >= lo && got <= hi)
	}
}

// benchDelay: asked vs added delay (ping RTT n1 to n2, delay on n1's rdma0,
// rounds with and without it alternating) and the throughput the mechanism costs
// (iperf3 n1 to n2 with the smallest delay, 10us, against none).
func benchDelay(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	in := newInjector(t)
	mech := Mechanism("delay", Probe(ctxT(t)))
	fmt.Printf("\n### delay precision (%s; ping -i 0.01 n1 to n2, 4 alternating rounds of 50 with and without)\n\n", mech)
	fmt.Println("| asked | RTT p50 without | RTT p50 with | added p50 | error (p50) | added p99 | added avg | error (avg) |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, d := range []float64{1, 2, 5} {
		base, faulty := addedDelay(t, l, in, map[string]string{"nic": "rdma0", "delay": fmt.Sprintf("%gms", d)}, 4, nil)
		added := mean(faulty) - mean(base)
		p50 := quantile(faulty, .5) - quantile(base, .5)
		fmt.Printf("| %g ms | %.3f ms | %.3f ms | %.3f ms | %+.1f%% | %.3f ms | %.3f ms | %+.1f%% |\n", d, quantile(base, .5), quantile(faulty, .5),
			p50, 100*(p50/d-1), quantile(faulty, .99)-quantile(base, .99), added, 100*(added/d-1))
	}
	fmt.Printf("\n### delay's throughput cost (iperf3 TCP n1 to n2, 5 s after 1 s omitted, MTU 1500, delay 10us)\n\n")
	fmt.Println("| without | with | ratio |")
	fmt.Println("|---:|---:|---:|")
	gbps := func() float64 {
		rep := l.iperf3(t, "n2", "n1", "-t", "5", "-O", "1")
		return jnum(t, rep, "end", "sum_received", "bits_per_second") / 1e9
	}
	without := gbps()
	e, err := in.Apply(ctxT(t), l.target("n1"), mustParse(t, in, "delay", map[string]string{"nic": "rdma0", "delay": "10us"}), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	with := gbps()
	if err := in.Revert(ctxT(t), e.ID); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("| %.2f Gbit/s | %.2f Gbit/s | %.2f |\n", without, with, with/without)
}

func kindCounts(m map[string]int) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = strconv.Itoa(v)
	}
	return out
}

func paramText(p map[string]string) string {
	var out []string
	for k, v := range p {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
