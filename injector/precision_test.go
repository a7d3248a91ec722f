//go:build linux

package injector

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rateRun applies nic-rate at rate on n1's rdma0 and measures it with iperf3
// (n1 to n2): the goodput iperf3 reports, and the rate at which tbf sent bytes
// on the wire (tc -s counters, Ethernet frames) over the same run.
func rateRun(t testing.TB, l *testLab, in *Injector, rate string, secs int) (asked, goodput, wire float64) {
	t.Helper()
	ctx := ctxT(t)
	f := mustParse(t, in, "nic-rate", map[string]string{"nic": "rdma0", "rate": rate})
	e, err := in.Apply(ctx, l.target("n1"), f, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Revert(ctx, e.ID)
	sent := func() float64 {
		out := l.Run(t, "n1", "tc", "-s", "qdisc", "show", "dev", "rdma0")
		_, after, _ := strings.Cut(out, "Sent ")
		n, _ := strconv.ParseFloat(strings.Fields(after)[0], 64)
		return n
	}
	b0 := sent()
	rep := l.iperf3(t, "n2", "n1", "-t", strconv.Itoa(secs), "-O", "1")
	// The qdisc counted every frame of the run, including the omitted first second.
	wire = (sent() - b0) * 8 / float64(secs+1) / 1e6
	goodput = jnum(t, rep, "end", "sum_received", "bits_per_second") / 1e6
	return float64(f.(*NICRate).Rate) / 1e6, goodput, wire
}

// TestNICRatePrecision: iperf3 measures the asked rate within ±5 %. The data
// rail has the jumbo MTU of a RoCE fabric (9000), so TCP/IP headers cost under
// 1 %; at MTU 1500 they alone cost 4.4 % (see the benchmark's table, which also
// covers 1000 Mbit/s). CI runs other packages' tests beside this one on two CPUs,
// where iperf3 cannot always keep up even with 100 Mbit/s (a CI run measured
// 90.6, the wire 92.9): the shaper must never let more through, on any run, and
// the best of up to three runs must come within 5 % below (a busy CPU can slow
// the sender, not make the shaper hold it back).
func TestNICRatePrecision(t *testing.T) {
	l := newLab(t, 9000, "n1", "n2")
	in := newInjector(t)
	for _, rate := range []string{"10mbit", "100mbit"} {
		best := 0.0
		for run := 1; run <= 3 && best < 0.95; run++ {
			asked, got, wire := rateRun(t, l, in, rate, 5)
			t.Logf("nic-rate %s, run %d: iperf3 %.1f Mbit/s (%+.1f%%), wire %.1f Mbit/s", rate, run, got, 100*(got/asked-1), wire)
			if got/asked > 1.05 {
				t.Errorf("nic-rate %s: iperf3 measured %.1f Mbit/s, more than 5%% over", rate, got)
			}
			best = max(best, got/asked)
		}
		if best < 0.95 {
			t.Errorf("nic-rate %s: the best of three iperf3 runs measured %.1f%% of the rate, more than 5%% under", rate, 100*best)
		}
	}
}

// binomialInterval is the 99.99 % interval of the share of n trials hitting
// with probability p (a 99 % interval would fail one CI run in fifty per case).
func binomialInterval(p float64, n int) (lo, hi float64) {
	h := 3.891 * math.Sqrt(p*(1-p)/float64(n))
	return p - h, p + h
}

// TestLossPrecision: over 20,000 datagrams the measured loss lies in the 99.99 %
// binomial interval of the asked fraction.
func TestLossPrecision(t *testing.T) {
	l := newLab(t, 1500, "n1", "n2")
	l.pinNeighbours(t)
	in := newInjector(t)
	for _, pct := range []string{"1%", "10%"} {
		sent, p, got, lo, hi := lossRun(t, l, in, pct, 20000)
		t.Logf("loss %s: %d sent, measured %.3f%% (99.99%% interval %.3f%%-%.3f%%)", pct, sent, 100*got, 100*lo, 100*hi)
		if got < lo || got > hi {
			t.Errorf("loss %s: measured %.3f%% over %d datagrams, outside the 99.99%% interval [%.3f%%, %.3f%%] of %.2f%%", pct, 100*got, sent, 100*lo, 100*hi, 100*p)
		}
	}
}

func lossRun(t testing.TB, l *testLab, in *Injector, pct string, n int) (sent int, p, got, lo, hi float64) {
	t.Helper()
	ctx := ctxT(t)
	f := mustParse(t, in, "loss", map[string]string{"nic": "rdma0", "percent": pct, "direction": "in"})
	e, err := in.Apply(ctx, l.target("n1"), f, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Revert(ctx, e.ID)
	recv := l.udpCount(t, "n2", "n1", 7000, n)
	p = f.(*Loss).Percent.Fraction()
	lo, hi = binomialInterval(p, n)
	return n, p, 1 - float64(recv)/float64(n), lo, hi
}
