//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/internal/testlab"
)

// testLab is two lab nodes n1 and n2 with one data rail: a veth named rdma0
// on both sides (198.18.1.10 and .11).
type testLab struct{ *testlab.Lab }

func newTestLab(t *testing.T) testLab {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces")
	testenv.RequireTools(t, "ip", "tc", "nft")
	return testLab{testlab.New(t, testlab.Spec{Nodes: []string{"n1", "n2"}, NICs: []testlab.NIC{{Name: "rdma0", Net: 1}}})}
}

// shape limits rdma0's egress on both nodes to rate (tc syntax, e.g. 400mbit).
func (l testLab) shape(t *testing.T, rate string) {
	for _, n := range l.Nodes {
		l.Run(t, n, "tc", "qdisc", "replace", "dev", "rdma0", "root", "tbf", "rate", rate, "burst", "256kb", "limit", "4mb")
	}
}

// dropRoce drops pct % of UDP 4791 packets arriving on both nodes, as the
// injector's roce-drop does.
func (l testLab) dropRoce(t *testing.T, pct int) {
	for _, n := range l.Nodes {
		l.Try(n, "nft", "delete", "table", "inet", "cltb")
		if pct == 0 {
			continue
		}
		l.Run(t, n, "nft", "add", "table", "inet", "cltb")
		l.Run(t, n, "nft", "add", "chain", "inet", "cltb", "in", "{ type filter hook input priority 0 ; }")
		rule := []string{"nft", "add", "rule", "inet", "cltb", "in", "udp", "dport", "4791"}
		if pct < 100 {
			rule = append(rule, "numgen", "random", "mod", "100", "<", strconv.Itoa(pct))
		}
		l.Run(t, n, append(rule, "drop")...)
	}
}

// iperf3 measures n1 -> n2 over rdma0 for a short run, in bits per second.
func (l testLab) iperf3(t *testing.T) float64 {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	server := l.Addr("n2", "rdma0")
	srv := exec.Command("ip", "netns", "exec", l.NetNS("n2"), "iperf3", "-s", "-1", "-B", server)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var out []byte
	var err error
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		out, err = exec.Command("ip", "netns", "exec", l.NetNS("n1"), "iperf3", "-c", server, "-t", "2", "-J").Output()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3 JSON: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond
}

// bench runs the benchmark in the lab's nodes through the netns starter.
func (l testLab) bench(t *testing.T, o Options, env ...string) (string, string, error) {
	t.Helper()
	var so, se syncBuf
	lc := &Launcher{Starter: NetnsStarter{Sandbox: l.ID}, Exe: os.Args[0], Stdout: &so, Stderr: &se, Grace: 5 * time.Second,
		Env: append([]string{"NCCL_SOCKET_IFNAME=rdma0", "COMMLAB_BENCH_TIMEOUT=30"}, env...)}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	err := lc.Run(ctx, o)
	return so.String(), se.String(), err
}

var timeRE = regexp.MustCompile(`(?m)^\s+(\d+)\s+\d+\s+float\s+\w+\s+-?\d+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)`)

// busbw computes the all_reduce busbw (GB/s) of the last row from its size and
// mean time (the printed busbw has only two decimals).
func busbw(t *testing.T, out string, nranks int) float64 {
	t.Helper()
	m := timeRE.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		t.Fatalf("no table row in:\n%s", out)
	}
	last := m[len(m)-1]
	size, _ := strconv.ParseFloat(last[1], 64)
	a, _ := strconv.ParseFloat(last[2], 64)
	b, _ := strconv.ParseFloat(last[3], 64)
	return size / ((a + b) / 2 * 1e3) * AllReduce.BusBwFactor(nranks)
}

func netnsOpts(size int64, iters int, hosts string) Options {
	o := DefaultOptions()
	o.Coll, o.MinBytes, o.MaxBytes, o.Iters, o.Warmup, o.Check = AllReduce, size, size, iters, 1, 0
	o.Hosts, _ = ParseHosts(hosts)
	return o
}

func TestNetnsShapedLinkBusBw(t *testing.T) {
	l := newTestLab(t)
	const rateBits = 400e6
	l.shape(t, "400mbit")
	ip := l.iperf3(t)
	for _, tc := range []struct {
		name string
		env  []string
		low  float64 // lowest accepted busbw / iperf3
	}{
		{"socket", []string{"NCCL_IB_DISABLE=1"}, 0.9},
		// The RoCE emulation's congestion window keeps the shaper's queue short
		// enough that ACKs behind the reverse direction's data do not starve it:
		// 0.85-0.97 of iperf3 on a quiet machine, 0.73 and 0.64 (best of three)
		// seen in full runs on two busy cores. The bar guards against a collapse,
		// not the 0.9 target, which make bench measures side by side.
		{"roce-emulation", nil, 0.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// nccl-tests' model: ring all_reduce busbw equals the bottleneck link's
			// rate; the rate a transport can reach on it is what iperf3 measures.
			link, goodput := rateBits/8/1e9, ip/8/1e9
			// A busy machine only lowers busbw: a run below the bar is repeated.
			got := testenv.Throughput(3, tc.low*goodput, func() float64 {
				out, errOut, err := l.bench(t, netnsOpts(32<<20, 3, "n1:1,n2:1"), tc.env...)
				if err != nil {
					t.Fatalf("bench: %v\n%s\n%s", err, errOut, out)
				}
				return busbw(t, out, 2)
			})
			t.Logf("busbw %.4f GB/s; link %.4f GB/s (%.0f%%); iperf3 %.4f GB/s (busbw/iperf3 %.2f)", got, link, 100*got/link, goodput, got/goodput)
			if got < tc.low*goodput || got > 1.1*goodput {
				t.Errorf("busbw %.4f GB/s is outside [%.1f, 1.1] × the link's measured rate %.4f GB/s", got, tc.low, goodput)
			}
		})
	}
}

func TestNetnsRoceDrop(t *testing.T) {
	l := newTestLab(t)
	l.shape(t, "1gbit")
	o := netnsOpts(8<<20, 4, "n1:1,n2:1")
	// A short ack timeout (4.096 µs × 2^12 ≈ 17 ms) keeps the failing case quick.
	env := []string{"NCCL_IB_TIMEOUT=12", "NCCL_DEBUG=WARN"}
	// Nothing is dropped in the clean run, so a long ack timeout (4.096 µs × 2^16 ≈
	// 268 ms) costs nothing and keeps a busy machine's scheduling delays from
	// looking like lost acks.
	clean, errOut, err := l.bench(t, o, "NCCL_IB_TIMEOUT=16", "NCCL_DEBUG=WARN")
	if err != nil {
		t.Fatalf("clean run: %v\n%s", err, errOut)
	}
	l.dropRoce(t, 2)
	// The lossy run recovers by timeouts the emulation's goroutines must meet: on a
	// busy CI machine 8 × 17 ms without an ack can pass with no real loss, so
	// this run waits 8 × 67 ms (NCCL_IB_TIMEOUT=14) before giving up.
	lossy, errOut, err := l.bench(t, o, "NCCL_IB_TIMEOUT=14", "NCCL_DEBUG=WARN")
	if err != nil {
		t.Fatalf("2%% loss run: %v\n%s", err, errOut)
	}
	c, s := busbw(t, clean, 2), busbw(t, lossy, 2)
	t.Logf("busbw clean %.4f GB/s, 2%% UDP 4791 loss %.4f GB/s", c, s)
	if s > 0.8*c {
		t.Errorf("2%% RoCE loss should slow the run measurably: %.4f vs %.4f GB/s", s, c)
	}
	l.dropRoce(t, 100)
	out, errOut, err := l.bench(t, o, env...)
	if err == nil {
		t.Fatalf("100%% UDP 4791 loss: the run succeeded:\n%s", out)
	}
	all := out + errOut
	// NCCL 2.28.9's WARN (transport/net_ib.cc:2543).
	if !regexp.MustCompile(`\[0\] transport/net_ib\.cc:2543 NCCL WARN NET/IB: Got completion from peer 198\.18\.1\.\d+<\d+> with status=IBV_WC_RETRY_EXC_ERR\(12\) opcode=IBV_WC_SEND\(0\) reqSize=\d+ vendor_err=129 req_type=Send localGid ::ffff:198\.18\.1\.\d+ remoteGids::ffff:198\.18\.1\.\d+ hca rdma0`).MatchString(all) {
		t.Errorf("no error-12 completion WARN in the output:\n%s", all)
	}
	// With NCCL_IB_DISABLE the same drop no longer matters: traffic moves to sockets.
	if _, errOut, err := l.bench(t, o, append(env, "NCCL_IB_DISABLE=1")...); err != nil {
		t.Errorf("sockets under a UDP 4791 drop: %v\n%s", err, errOut)
	}
}
