//go:build linux

package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clhost "github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/testlab"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/topology"
)

// TestTopologies brings up 2-, 4- and 8-node topologies and checks that every
// data NIC reaches every other NIC of its rail with ping (both ways) and
// iperf3, that addresses and shaping are as planned, and (in upSandbox's
// cleanup) that Down leaves nothing.
func TestTopologies(t *testing.T) {
	for _, name := range []string{"2x1", "4x2", "8x1"} {
		t.Run(name, func(t *testing.T) {
			s := upSandbox(t, name, Options{})
			plan := s.Plan()
			id := s.ID()

			// Every object is where the doc says, named as the doc says.
			nsList := host(t, "ip", "netns", "list")
			for _, n := range plan.Nodes {
				if !strings.Contains(nsList, NetNSName(id, n.Name)) {
					t.Errorf("ip netns list lacks %s:\n%s", NetNSName(id, n.Name), nsList)
				}
			}
			if tables := host(t, "ip", "netns", "exec", FabricNetNSName(id), "nft", "list", "tables"); !strings.Contains(tables, "table bridge "+NFTable(id)) {
				t.Errorf("fabric has no nftables table %s:\n%s", NFTable(id), tables)
			}
			g, _ := cgroup.Open(s.Cgroup())
			if !g.Exists() {
				t.Errorf("cgroup %s missing", s.Cgroup())
			}

			// Addresses, state and shaping as planned.
			for _, n := range plan.Nodes {
				info, err := s.Node(n.Name)
				if err != nil {
					t.Fatal(err)
				}
				links := run(t, s, n.Name, "ip", "-o", "-4", "addr", "show")
				qdiscs := run(t, s, n.Name, "tc", "qdisc", "show")
				for _, c := range info.NICs {
					if !strings.Contains(links, c.Name+"    inet "+c.Addr.String()) {
						t.Errorf("%s: %s does not have %s:\n%s", n.Name, c.Name, c.Addr, links)
					}
					want := fmt.Sprintf("qdisc tbf c1: dev %s root", c.Name)
					if !strings.Contains(qdiscs, want) || !strings.Contains(qdiscs, "rate "+strings.TrimSuffix(c.Rate.String(), "it")) {
						t.Errorf("%s: no %q at %s:\n%s", n.Name, want, c.Rate, qdiscs)
					}
				}
				if hn := strings.TrimSpace(run(t, s, n.Name, "hostname")); hn != n.Name {
					t.Errorf("hostname on %s = %q", n.Name, hn)
				}
			}

			// Ping every ordered pair of data NICs on each rail.
			type nic struct{ node, addr string }
			rails := map[string][]nic{}
			for _, n := range plan.Nodes {
				for _, c := range n.DataNICs() {
					rails[c.Switch] = append(rails[c.Switch], nic{n.Name, c.Addr.Addr().String()})
				}
			}
			pairs := 0
			for rail, nics := range rails {
				for _, a := range nics {
					for _, b := range nics {
						if a == b {
							continue
						}
						if out, err := tryRun(s, a.node, "ping", "-c", "1", "-W", "2", b.addr); err != nil {
							t.Errorf("%s: ping %s -> %s (%s): %v\n%s", rail, a.node, b.node, b.addr, err, out)
						}
						pairs++
					}
				}
			}
			t.Logf("ping: %d ordered pairs ok", pairs)

			// iperf3 over every unordered pair: one server per data NIC.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, nics := range rails {
				for _, b := range nics {
					srv, err := s.Exec(ctx, b.node, "iperf3", "-s", "-B", b.addr)
					if err != nil {
						t.Fatal(err)
					}
					if err := srv.Start(); err != nil {
						t.Fatal(err)
					}
					defer func() { cancel(); _ = srv.Wait() }()
				}
			}
			for rail, nics := range rails {
				for i, a := range nics {
					for _, b := range nics[i+1:] {
						r, out, err := iperfClient(s, a.node, b.addr, "-n", "256K")
						if err != nil || r.End.SumSent.Bytes < 256<<10 || r.End.SumReceived.Bytes == 0 {
							t.Errorf("%s: iperf3 %s -> %s sent %d bytes, received %d (%v)\n%s", rail, a.node, b.node, r.End.SumSent.Bytes, r.End.SumReceived.Bytes, err, out)
						}
					}
				}
			}
		})
	}
}

type iperfResult struct {
	End struct {
		SumSent struct {
			Bytes int64 `json:"bytes"`
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes         int64   `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperfClient runs iperf3 -c addr -J on node, retrying while the server is
// still starting (iperf3 -J reports a refused connection in JSON, exit 0).
func iperfClient(s *Sandbox, node, addr string, args ...string) (iperfResult, string, error) {
	var r iperfResult
	var out string
	var err error
	for try := 0; try < 40; try++ {
		out, err = tryRun(s, node, append([]string{"iperf3", "-c", addr, "-J"}, args...)...)
		r = iperfResult{}
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil && err == nil {
			err = jerr
		}
		if err == nil && r.Error != "" {
			err = errors.New(r.Error)
		}
		if err == nil || !strings.Contains(out, "Connection refused") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r, out, err
}

// TestShapedRates drives shaped links with iperf3 (a RoCE rail, the management
// network and the intra-node fabric, loopback) and reads the rate off the sending
// NIC's byte counter, which counts what left its tbf. The counter counts a GSO
// packet once, with one set of headers for up to 64 KiB, while tbf charges every
// segment's headers and Ethernet header, so the counter reads about the TCP goodput:
// the rate times (MTU-52)/(MTU+14) on a veth (IP, TCP and timestamp headers;
// Ethernet header), (65536-52)/65536 on loopback. No try may exceed that by more than
// 5 % (shaping holds); the best of three must come within short of it (a loaded CI
// host can slow the sender): 5 % on the veths; 25 % on the 1 Gbit loopback, which
// iperf3 on two busy CPUs cannot always fill (874, 821 and 928 of 999 Mbit/s in a CI
// run beside the other lane) and which still catches a rate set in the wrong unit.
// iperf3's own receiver figure is no such bound: a receiver the CPU left behind
// drains its socket buffer faster than the wire (26.2 Mbit/s read on a 25 Mbit link
// in CI).
func TestShapedRates(t *testing.T) {
	s := upSandbox(t, "4x2", Options{})
	plan := s.Plan()
	n1, _ := plan.Node("node1")
	n2, _ := plan.Node("node2")
	rail, _ := n2.NIC("rdma0")
	mgmt, _ := n2.NIC("eth0")
	lo := topology.NICPlan{NIC: topology.NIC{Name: "lo", Rate: plan.Topo.IntraNode.Rate, MTU: 65536}}
	lo.Addr = n1.NICs[0].Addr // any local address goes over loopback
	for _, tt := range []struct {
		name       string
		from, to   string
		nic        topology.NICPlan
		hdr, frame int
		short      float64 // how far below the goodput the best try may stay
	}{
		{"rail rdma0 200Mbit", "node1", "node2", rail, rail.MTU - 52, rail.MTU + 14, 0.05},
		{"management eth0 25Mbit", "node1", "node2", mgmt, mgmt.MTU - 52, mgmt.MTU + 14, 0.05},
		{"intra-node loopback 1Gbit", "node1", "node1", lo, 65536 - 52, 65536, 0.25},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := float64(tt.nic.Rate) * float64(tt.hdr) / float64(tt.frame)
			best := 0.0
			for try := 1; try <= 3; try++ {
				got := wireRate(t, s, tt.from, tt.to, tt.nic.Name, tt.nic.Addr.Addr().String())
				dev := (got - want) / want
				t.Logf("try %d: %.1f Mbit/s sent, expected %.1f Mbit/s (%.1f Mbit/s shaped): %+.1f%%", try, got/1e6, want/1e6, float64(tt.nic.Rate)/1e6, 100*dev)
				if dev > 0.05 {
					t.Fatalf("%.1f Mbit/s sent exceeds the shaped rate's goodput %.1f Mbit/s by more than 5%%", got/1e6, want/1e6)
				}
				if best = max(best, got); dev >= -0.05 {
					return
				}
			}
			if best < (1-tt.short)*want {
				t.Errorf("the best of 3 tries, %.1f Mbit/s, is more than %.0f%% below %.1f Mbit/s", best/1e6, 100*tt.short, want/1e6)
			}
		})
	}
}

// wireRate runs a 4-second iperf3 test from node from to addr on node to and
// returns the bits per second that node from's nic sent meanwhile, read from its
// byte counter every 100 ms: from 1 s after the counter starts climbing (slow start)
// to 0.5 s before it stops.
func wireRate(t *testing.T, s *Sandbox, from, to, nic, addr string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := s.Exec(ctx, to, "iperf3", "-s", "-1", "-B", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = srv.Wait() }()
	info, err := s.Node(from)
	if err != nil {
		t.Fatal(err)
	}
	h, ns, err := openNetNS(info.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	defer h.Close()
	type sample struct {
		at    time.Time
		bytes uint64
	}
	var samples []sample
	done := make(chan error, 1)
	go func() {
		_, out, err := iperfClient(s, from, addr, "-t", "4")
		if err != nil {
			err = fmt.Errorf("iperf3: %w\n%s", err, out)
		}
		done <- err
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-tick.C:
			l, err := h.LinkByName(nic)
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, sample{time.Now(), l.Attrs().Statistics.TxBytes})
		}
	}
	first := slices.IndexFunc(samples, func(x sample) bool { return x.bytes > samples[0].bytes })
	last := len(samples) - 1
	for last > 0 && samples[last-1].bytes == samples[last].bytes {
		last--
	}
	if first < 0 {
		t.Fatalf("%s on %s sent nothing", nic, from)
	}
	i := slices.IndexFunc(samples, func(x sample) bool { return x.at.Sub(samples[first].at) >= time.Second })
	j := last
	for j > 0 && samples[last].at.Sub(samples[j].at) < 500*time.Millisecond {
		j--
	}
	if i < 0 || j-i < 10 {
		t.Fatalf("%s on %s: the counter climbed for too short a time to read a rate (samples %d to %d of %d)", nic, from, first, last, len(samples))
	}
	return float64(samples[j].bytes-samples[i].bytes) * 8 / samples[j].at.Sub(samples[i].at).Seconds()
}

// TestIsolation puts two sandboxes side by side: neither reaches the other
// nor the host.
func TestIsolation(t *testing.T) {
	a := upSandbox(t, "2x1", Options{})
	b := upSandbox(t, "2x1", Options{})
	if a.Plan().Slice == b.Plan().Slice {
		t.Fatalf("both sandboxes got slice %v", a.Plan().Slice)
	}
	if a.LearnerUID() == b.LearnerUID() {
		t.Fatalf("both sandboxes got learner uid %d", a.LearnerUID())
	}
	targets := hostIPv4s(t)
	for _, n := range b.Plan().Nodes {
		for _, c := range n.NICs {
			targets = append(targets, c.Addr.Addr().String())
		}
	}
	for _, addr := range targets {
		if out, err := tryRun(a, "node1", "ping", "-c", "1", "-W", "1", addr); err == nil {
			t.Errorf("sandbox %s node1 reached %s:\n%s", a.ID(), addr, out)
		}
	}
	// Same check from the other side, over TCP to the host's addresses.
	for _, addr := range hostIPv4s(t) {
		if out, err := tryRun(b, "node2", "iperf3", "-c", addr, "-n", "1K", "--connect-timeout", "500"); err == nil {
			t.Errorf("sandbox %s node2 reached the host at %s:\n%s", b.ID(), addr, out)
		}
	}
	// Nodes see only their own interfaces.
	links := run(t, a, "node1", "ip", "-o", "link")
	for _, hostLink := range hostLinkNames(t) {
		if hostLink != "lo" && strings.Contains(links, " "+hostLink+":") {
			t.Errorf("node1 sees host link %s:\n%s", hostLink, links)
		}
	}
}

// hostIPv4s lists the host's own IPv4 addresses (127.x excepted: every node
// has its own loopback).
func hostIPv4s(t *testing.T) []string {
	var out []string
	for _, f := range strings.Fields(host(t, "ip", "-4", "-o", "addr", "show")) {
		if ip, _, ok := strings.Cut(f, "/"); ok && strings.Count(ip, ".") == 3 && !strings.HasPrefix(ip, "127.") {
			out = append(out, ip)
		}
	}
	return out
}

func hostLinkNames(t *testing.T) []string {
	var out []string
	for _, line := range strings.Split(host(t, "ip", "-o", "link"), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			out = append(out, name)
		}
	}
	return out
}

// TestExec checks where Exec'd processes run and how bad calls fail.
func TestExec(t *testing.T) {
	needRoot(t)
	top, _ := topology.Builtin("2x1")
	s, err := New(top, Options{DataDir: t.TempDir(), ID: testlab.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(context.Background(), "node1", "true"); !errors.Is(err, labs.ErrNotUp) {
		t.Errorf("Exec before Up = %v, want ErrNotUp", err)
	}
	s = upSandbox(t, "2x1", Options{})
	if _, err := s.Exec(context.Background(), "node9", "true"); !errors.Is(err, labs.ErrUnknownNode) {
		t.Errorf("Exec on node9 = %v, want ErrUnknownNode", err)
	}
	if _, err := s.Exec(context.Background(), "node1"); err == nil {
		t.Error("Exec without argv succeeded")
	}
	out := run(t, s, "node2", "cat", "/proc/self/cgroup")
	if !strings.Contains(out, "/"+NodeCgroupPath(s.ID(), "node2")+"/"+clhost.ShellLeaf+"\n") {
		t.Errorf("process not in the node's shell cgroup:\n%s", out)
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	if strings.Contains(string(self), s.ID()) {
		t.Errorf("the test process joined the sandbox cgroup:\n%s", self)
	}
	selfNS, _ := os.Readlink("/proc/self/ns/net")
	nodeNS := strings.TrimSpace(run(t, s, "node2", "readlink", "/proc/self/ns/net"))
	if nodeNS == selfNS {
		t.Errorf("process runs in the host network namespace %s", selfNS)
	}
	env := run(t, s, "node2", "env")
	for _, want := range []string{"COMMLAB_NODE=node2", "COMMLAB_SANDBOX=" + s.ID(), "HOSTNAME=node2"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	// A command that fails reports its exit status.
	if _, err := tryRun(s, "node1", "false"); err == nil {
		t.Error("false succeeded")
	}
	// Context cancellation kills the process.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c, _ := s.Exec(ctx, "node1", "sleep", "30")
	t0 := time.Now()
	if err := c.Run(); err == nil || time.Since(t0) > 5*time.Second {
		t.Errorf("sleep 30 under a 200ms context: %v after %v", err, time.Since(t0))
	}
}

// TestLifecycle covers Down twice, Up twice, Open from the state file, TTL
// expiry and context cancellation.
func TestLifecycle(t *testing.T) {
	needRoot(t)
	data := t.TempDir()
	top, _ := topology.Builtin("2x1")

	s := upSandbox(t, "2x1", Options{DataDir: data})
	if err := s.Up(context.Background()); err == nil {
		t.Error("second Up succeeded")
	}
	st, err := ReadState(data, s.ID())
	if err != nil || st.Owner.PID != os.Getpid() || st.Topology.Name != "2x1" {
		t.Fatalf("ReadState = %+v, %v", st, err)
	}
	o, err := Open(data, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(run(t, o, "node1", "hostname")); got != "node1" {
		t.Errorf("Exec through Open: hostname %q", got)
	}
	if err := o.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(s.ID(), data); len(left) > 0 {
		t.Errorf("Down through Open left:\n%s", strings.Join(left, "\n"))
	}
	if err := o.Down(context.Background()); err != nil {
		t.Errorf("second Down: %v", err)
	}
	if _, err := Open(data, s.ID()); !errors.Is(err, ErrNoSandbox) {
		t.Errorf("Open after Down = %v, want ErrNoSandbox", err)
	}

	// TTL.
	ttl, err := New(top, Options{DataDir: data, ID: testlab.NewID(), TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := ttl.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ttl.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("sandbox outlived its TTL")
	}
	if left := leftovers(ttl.ID(), data); len(left) > 0 {
		t.Errorf("TTL teardown left:\n%s", strings.Join(left, "\n"))
	}

	// Context.
	ctx, cancel := context.WithCancel(context.Background())
	c, err := New(top, Options{DataDir: data, ID: testlab.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("sandbox outlived its context")
	}
	if left := leftovers(c.ID(), data); len(left) > 0 {
		t.Errorf("context teardown left:\n%s", strings.Join(left, "\n"))
	}

	// A context that ends during Up rolls back.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	r, _ := New(top, Options{DataDir: data, ID: testlab.NewID()})
	if err := r.Up(ctx2); !errors.Is(err, context.Canceled) {
		t.Errorf("Up with a cancelled context = %v", err)
	}
	if left := leftovers(r.ID(), data); len(left) > 0 {
		t.Errorf("cancelled Up left:\n%s", strings.Join(left, "\n"))
	}
}

// TestBadInput: invalid topologies, shell metacharacters and a rate of 0 are
// refused with clear errors, and nothing is created.
func TestBadInput(t *testing.T) {
	needRoot(t)
	data := t.TempDir()
	cases := []struct {
		name string
		make func() (*topology.Topology, Options, error)
		want string
	}{
		{"invalid yaml topology", func() (*topology.Topology, Options, error) {
			top, err := topology.Parse("bad.yaml", []byte("name: x\nswitches: [{name: s, rate: 1Mbit}]\nnodes: [{name: a}]\n"))
			return top, Options{}, err
		}, `bad.yaml:3:`},
		{"node name with shell metacharacters", func() (*topology.Topology, Options, error) {
			top, _ := topology.Builtin("2x1")
			top.Nodes[0].Name = "n1;reboot"
			return top, Options{}, nil
		}, `node name "n1;reboot"`},
		{"rate of 0", func() (*topology.Topology, Options, error) {
			top, _ := topology.Builtin("2x1")
			top.Nodes[1].NICs[1].Rate = 0
			return top, Options{}, nil
		}, "must be greater than 0"},
		{"sandbox id with metacharacters", func() (*topology.Topology, Options, error) {
			top, _ := topology.Builtin("2x1")
			return top, Options{ID: "a$(id)"}, nil
		}, `sandbox id "a$(id)"`},
		{"no data dir", func() (*topology.Topology, Options, error) {
			top, _ := topology.Builtin("2x1")
			return top, Options{DataDir: "-"}, nil
		}, "DataDir is required"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			top, opts, err := tt.make()
			if opts.ID == "" {
				opts.ID = testlab.NewID()
			}
			defer func() {
				if left := leftovers(opts.ID, data); len(left) > 0 {
					t.Errorf("bad input left:\n%s", strings.Join(left, "\n"))
				}
			}()
			if err == nil {
				if opts.DataDir == "" {
					opts.DataDir = data
				} else if opts.DataDir == "-" {
					opts.DataDir = ""
				}
				var s *Sandbox
				if s, err = New(top, opts); err == nil {
					err = s.Up(context.Background())
					defer s.Down(context.Background())
					t.Errorf("New accepted it (Up: %v)", err)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if ents, _ := os.ReadDir(filepath.Join(data, stateSubdir)); len(ents) > 0 {
		t.Errorf("bad input left state files: %v", ents)
	}
	if _, err := Open(data, "nosuch"); !errors.Is(err, ErrNoSandbox) {
		t.Errorf("Open(nosuch) = %v, want ErrNoSandbox", err)
	}
	if _, err := Open(data, "../etc"); err == nil {
		t.Error("Open(../etc) succeeded")
	}
}

// TestPrioritize: a graded run's priority raises the sandbox's CPU weight and gives
// back the one it was built with; the weights within (the workload's leaf) stay.
func TestPrioritize(t *testing.T) {
	needRoot(t)
	file, scale := "cpu.weight", func(w uint64) string { return fmt.Sprint(w) }
	if !cgroup.Unified() {
		file, scale = "cpu.shares", func(w uint64) string { return fmt.Sprint(cgroup.V1Shares(w)) }
	}
	for _, built := range []uint64{0, 50} {
		t.Run(fmt.Sprint("built with weight ", built), func(t *testing.T) {
			s := upSandbox(t, "2x1", Options{Limits: cgroup.Limits{CPUWeight: built}})
			read := func(rel string) string {
				t.Helper()
				g, err := cgroup.Open(rel)
				if err != nil {
					t.Fatal(err)
				}
				v, err := g.Read(file)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			want := scale(cgroup.DefaultCPUWeight) // 0 builds it at the kernel's default
			if built > 0 {
				want = scale(built)
			}
			if got := read(s.Cgroup()); got != want {
				t.Fatalf("%s before: %s, want %s", file, got, want)
			}
			leaf := s.Cgroup() + "/node1/workload"
			restore, err := s.Prioritize()
			if err != nil {
				t.Fatal(err)
			}
			if got := read(s.Cgroup()); got != scale(PrioritizedCPUWeight) {
				t.Errorf("%s while prioritized: %s, want %s", file, got, scale(PrioritizedCPUWeight))
			}
			if got := read(leaf); got != scale(WorkloadCPUWeight) {
				t.Errorf("the workload leaf's %s while prioritized: %s, want %s", file, got, scale(WorkloadCPUWeight))
			}
			if err := restore(); err != nil {
				t.Fatal(err)
			}
			if got := read(s.Cgroup()); got != want {
				t.Errorf("%s after: %s, want %s", file, got, want)
			}
			// A graded run that outlives its lab puts back nothing, and leaves nothing.
			restore, err = s.Prioritize()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Down(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := restore(); err != nil {
				t.Errorf("restore after Down: %v", err)
			}
			if left := leftovers(s.ID(), s.opts.DataDir); len(left) > 0 {
				t.Errorf("restore after Down left:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}
