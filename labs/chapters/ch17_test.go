package chapters

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// What a learner reads on a node to compute rates the way a Prometheus rate() does
// from two scrapes: the data NICs' byte counters (node_exporter's
// node_network_transmit_bytes_total) and the node cgroup's CPU periods (cAdvisor's
// container_cpu_cfs_periods_total and _throttled_periods_total).
const ch17NICs = "cat /sys/class/net/rdma0/statistics/tx_bytes /sys/class/net/rdma1/statistics/tx_bytes"

func ch17CFS() string { return "grep -E '^nr_(periods|throttled) ' " + cpuDir() + "cpu.stat" }

var (
	ch17Bytes = regexp.MustCompile(`^(\d+)\s+(\d+)\s*$`)
	ch17CFSre = regexp.MustCompile(`nr_periods (\d+)\s+nr_throttled (\d+)`)
)

// TestLabCh17MonitoringStraggler runs chapter 17's lab the way the chapter reads
// monitoring data: two scrapes of every node's counters, rates per node. The NICs'
// byte rates are alike on every node (a ring moves at its slowest rank's pace, so the
// network graphs do not point at it); the throttled share of CFS periods does.
func TestLabCh17MonitoringStraggler(t *testing.T) {
	// Seed 11: node3 at 0.1 cores, the mildest quota.
	PlaySeeds(t, "ch17-straggler-cpu", []uint64{11}, func(lr *Learner) Verdicts {
		node := lr.V("node")
		lr.T.Logf("variant: node=%s cpus=%s", node, lr.V("cpus"))

		const window = 15 * time.Second
		type scrape struct {
			c Ref        // the cgroup read
			v [4]float64 // tx bytes rdma0, rdma1, periods, throttled
		}
		read := func(n string) scrape {
			nics := lr.Run(n, ch17NICs)
			cfs := lr.Run(n, ch17CFS())
			b := ch17Bytes.FindStringSubmatch(lr.Out(nics))
			c := ch17CFSre.FindStringSubmatch(lr.Out(cfs))
			if b == nil || c == nil {
				lr.T.Fatalf("%s: unexpected counters:\n%s\n%s", n, lr.Out(nics), lr.Out(cfs))
			}
			s := scrape{c: cfs}
			for i, x := range []string{b[1], b[2], c[1], c[2]} {
				s.v[i], _ = strconv.ParseFloat(x, 64)
			}
			return s
		}
		// A window in which the job did not run (the chart's runs wait while another
		// lab's graded run holds the host) shows nothing: scrape again, as a learner
		// would look at the next minutes of the graphs.
		first := map[string]scrape{}
		for _, n := range FourNodes {
			first[n] = read(n)
		}
		var second scrape
		throttled := map[string]float64{}
		for try := 1; ; try++ {
			time.Sleep(window)
			ran := true
			next := map[string]scrape{}
			for _, n := range FourNodes {
				s := read(n)
				next[n] = s
				if n == node {
					second = s
				}
				f := first[n].v
				d := func(i int) float64 { return s.v[i] - f[i] }
				throttled[n] = 0
				if d(2) > 0 {
					throttled[n] = d(3) / d(2)
				}
				ran = ran && d(0)+d(1) > 1<<20 // the job moves 4 MiB a step; ARP and the like, bytes
				lr.T.Logf("%s: rdma0 %.1f Mbit/s, rdma1 %.1f Mbit/s, CFS periods %.0f, throttled %.0f (%.0f%%)",
					n, d(0)*8/window.Seconds()/1e6, d(1)*8/window.Seconds()/1e6, d(2), d(3), 100*throttled[n])
			}
			if ran || try == 4 {
				break
			}
			lr.T.Logf("window %d: the job sent next to nothing on some node; scraping the next window", try)
			first = next
		}
		for _, n := range FourNodes {
			// The rank also waits for its peers, so it does not hit its quota in every
			// period (a third of them at 0.1 cores in the runs seen).
			if n == node && !(throttled[n] > 0.05) {
				lr.T.Errorf("%s: %.0f%% of its CFS periods throttled, want over 5%%", n, 100*throttled[n])
			}
			if n != node && throttled[n] != 0 {
				lr.T.Errorf("%s (healthy): %.0f%% of its CFS periods throttled, want none", n, 100*throttled[n])
			}
		}
		healthy := Others(node, FourNodes...)[0]
		return Verdicts{
			Right:     Answer{"cpu-starvation", Loc{"node": node}},
			Counts:    []Ref{second.c},
			CountsNot: []Ref{first[healthy].c, lr.Run(node, ch17NICs)},
			WrongAt:   []Loc{{"node": healthy}},
		}
	})
}
