//go:build linux

package injector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/internal/testlab"
	"github.com/commlab/commlab/labs/cgroup"
)

// This file shapes internal/testlab's scratch labs like labs/netns: node
// namespaces cl-<sandbox>-<node> with eth0 (management, 198.18.0.0/24, 100
// Mbit/s) and rdma0 (data rail, 198.18.1.0/24, 10 Gbit/s), both wired to
// bridges in a fabric namespace cl-<sandbox>-fab, and a workload cgroup
// commlab/<sandbox>/<node>.

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

func needRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces, tc, nftables, cgroups")
}

type testLab struct {
	*testlab.Lab
	etc string // parent of each node's etc dir
	mtu int
}

func (l *testLab) target(node string) Target {
	return Target{Sandbox: l.ID, Node: node, Cgroup: "commlab/" + l.ID + "/" + node,
		EtcDir: filepath.Join(l.etc, node, "etc")}
}

// baseRates are the NICs' rates, shaped (like labs/netns) by a base tbf c1: on
// both ends of each veth.
var baseRates = map[string]Rate{"eth0": 100e6, "rdma0": 10e9}

func baseTbf(nic testlab.NIC, idx int) netlink.Qdisc {
	q := newTbf(idx, netlink.HANDLE_ROOT, baseRates[nic.Name], nic.MTU)
	q.Handle = host.BaseQdiscHandle
	return q
}

// newLab builds a sandbox with the given nodes; rdma0 gets the given MTU. Each
// node's namespace is owned by a user namespace of its own, as labs/netns makes
// them: the kernel refuses some things there even to host root (nftables
// payload writes), and every kind must work anyway.
func newLab(t testing.TB, mtu int, nodes ...string) *testLab {
	t.Helper()
	needRoot(t)
	l := &testLab{etc: t.TempDir(), mtu: mtu, Lab: testlab.New(t, testlab.Spec{
		Nodes: nodes, Fabric: true, Shape: baseTbf, Confined: true,
		NICs: []testlab.NIC{{Name: "eth0", Net: 0, MTU: 1500}, {Name: "rdma0", Net: 1, MTU: mtu}},
	})}
	// Runs before testlab's own cleanup, which checks that nothing is left.
	t.Cleanup(func() { l.destroy(t) })
	for _, n := range nodes {
		l.makeCgroup(t, n)
	}
	return l
}

var reLinkEther = regexp.MustCompile(`link/ether ([0-9a-f:]{17})`)

// pinNeighbours gives every node a permanent neighbour entry for each other node's
// NICs, for tests that count lost packets: a loss fault drops ARP too, and a lost
// first request left a burst of datagrams or pings queued behind a 1 s retry (a
// 1% loss run once lost all 20000 datagrams, a 20% ping run 41.5%). Not for tests
// that need ARP (a NIC without carrier answers EHOSTUNREACH only through it).
func (l *testLab) pinNeighbours(t testing.TB) {
	t.Helper()
	for _, nic := range []string{"eth0", "rdma0"} {
		for _, a := range l.Nodes {
			m := reLinkEther.FindStringSubmatch(l.Run(t, a, "ip", "-o", "link", "show", "dev", nic))
			if m == nil {
				t.Fatalf("%s %s: no Ethernet address", a, nic)
			}
			for _, b := range l.Nodes {
				if b != a {
					l.Run(t, b, "ip", "neigh", "replace", l.Addr(a, nic), "lladdr", m[1], "nud", "permanent", "dev", nic)
				}
			}
		}
	}
}

var cgControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}

func (l *testLab) makeCgroup(t testing.TB, node string) {
	if cgMode() == "v2" {
		if err := os.MkdirAll(filepath.Join(cgroup.MountRoot, "commlab", l.ID, node), 0o755); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, c := range cgControllers {
		parent := filepath.Join(cgroup.MountRoot, c)
		for _, seg := range []string{"commlab", l.ID, node} {
			dir := filepath.Join(parent, seg)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				t.Fatalf("cgroup %s: %v", dir, err)
			}
			if c == "cpuset" { // a v1 cpuset takes no task until it has cpus and mems
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if b, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(b)) == "" {
						v, _ := os.ReadFile(filepath.Join(parent, f))
						os.WriteFile(filepath.Join(dir, f), v, 0)
					}
				}
			}
			parent = dir
		}
	}
}

func (l *testLab) destroy(t testing.TB) {
	// Kill what still runs in the nodes' cgroups, then remove them bottom-up.
	var dirs []string
	for _, n := range l.Nodes {
		dirs = append(dirs, l.cgroupDirs(n)...)
	}
	for _, dir := range dirs {
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscallKill(pid)
				}
			}
		}
	}
	rmdir := func(d string) {
		for range 100 {
			if err := os.Remove(d); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("cgroup %s left behind", d)
	}
	for _, d := range dirs {
		rmdir(d)
	}
	for _, d := range dirs {
		rmdir(filepath.Dir(d))                   // commlab/<sandbox>
		os.Remove(filepath.Dir(filepath.Dir(d))) // commlab/ itself, when nobody else uses it
	}
	for _, n := range l.Nodes {
		os.Remove(filepath.Join(mntnsDir, l.NetNS(n)))
	}
	os.RemoveAll(filepath.Join(runDir, "nodes", l.ID))
}

func (l *testLab) cgroupDirs(node string) []string {
	if cgMode() == "v2" {
		return []string{filepath.Join(cgroup.MountRoot, "commlab", l.ID, node)}
	}
	var out []string
	for _, c := range cgControllers {
		out = append(out, filepath.Join(cgroup.MountRoot, c, "commlab", l.ID, node))
	}
	return out
}

// iperf3 runs an iperf3 test from client node to server node's address on nic
// rdma0 and returns iperf3's JSON report.
func (l *testLab) iperf3(t testing.TB, server, client string, args ...string) map[string]any {
	t.Helper()
	return l.iperf3Port(t, server, client, strconv.Itoa(5600+int(randByte())), args...)
}

// iperf3Port is iperf3 on a given port.
func (l *testLab) iperf3Port(t testing.TB, server, client, port string, args ...string) map[string]any {
	t.Helper()
	out, err := l.iperf3Try(t, server, client, port, args...)
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	return rep
}

// iperf3Try runs iperf3 and returns its JSON output and error.
func (l *testLab) iperf3Try(t testing.TB, server, client, port string, args ...string) (string, error) {
	t.Helper()
	srv := exec.Command("ip", "netns", "exec", l.NetNS(server), "iperf3", "-s", "-1", "-p", port, "-B", l.Addr(server, "rdma0"))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	if err := waitListen(context.Background(), Proc{PID: srv.Process.Pid, Start: procStart(srv.Process.Pid)}, mustAtoi(port), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := l.Try(client, append([]string{"iperf3", "-J", "-c", l.Addr(server, "rdma0"), "-p", port}, args...)...)
	var rep struct{ Error string }
	if err == nil && json.Unmarshal([]byte(out), &rep) == nil && rep.Error != "" {
		err = fmt.Errorf("iperf3: %s", rep.Error)
	}
	return out, err
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randByte() byte { b := randHex(1); n, _ := strconv.ParseUint(b, 16, 8); return byte(n) }

// jnum digs a number out of iperf3's JSON by path.
func jnum(t testing.TB, v any, path ...string) float64 {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("iperf3 JSON: no object on the way to %s (path %v)", p, path)
		}
		v = m[p]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("iperf3 JSON: %v is not a number at %v", v, path)
	}
	return f
}

// newInjector opens an injector on a fresh data dir with every builtin kind.
func newInjector(t testing.TB) *Injector {
	t.Helper()
	reg, err := NewRegistry(Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Open(Options{DataDir: t.TempDir(), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := in.Sweep(context.Background()); err != nil {
			t.Errorf("final sweep: %v", err)
		}
	})
	return in
}

// mustParse builds a fault from text parameters.
func mustParse(t testing.TB, in *Injector, kind string, params map[string]string) Fault {
	t.Helper()
	f, err := in.Registry().Parse(kind, params)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func syscallKill(pid int) { _ = unix.Kill(pid, unix.SIGKILL) }

// snapshot is everything of node a fault could change, as a learner's tools
// print it; a revert must bring it back exactly.
func (l *testLab) snapshot(t testing.TB, node string) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{
		{"ip", "-o", "link", "show"},
		{"tc", "qdisc", "show"},
		{"nft", "list", "ruleset"},
		{"ip", "-4", "route", "show", "table", "all"},
	} {
		out := l.Run(t, node, argv...)
		// ip names each peer's namespace by scanning /run/netns; one created or
		// deleted meanwhile (a probe's, another test's) makes it print this.
		out = strings.ReplaceAll(out, "Error: Peer netns reference is invalid.\n", "")
		if argv[1] == "-o" { // drop the carrier bits that settle asynchronously after a link comes up
			out = strings.NewReplacer(",LOWER_UP", "", "NO-CARRIER,", "", "state UP", "state X", "state LOWERLAYERDOWN", "state X", "state DOWN", "state X").Replace(out)
		}
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(argv, " "), out)
	}
	tg := l.target(node)
	for _, f := range []struct{ ctrl, file string }{{"cpu", "cpu.cfs_quota_us"}, {"cpu", "cpu.max"}, {"cpuset", "cpuset.cpus"}, {"memory", "memory.limit_in_bytes"}, {"memory", "memory.max"}} {
		if v, err := os.ReadFile(filepath.Join(cgroupPath(f.ctrl, tg.Cgroup), f.file)); err == nil {
			fmt.Fprintf(&b, "%s=%s", f.file, v)
		}
	}
	filepath.Walk(filepath.Join(l.etc, node), func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "file %s\n", p)
		}
		return nil
	})
	if _, ok := ShmNamespace(tg); ok {
		b.WriteString("mount namespace present\n")
	}
	return b.String()
}

// taggedWith lists the processes tagged with any of the fault ids (other
// programs on the host, e.g. other packages' tests, may run faults of their own).
func taggedWith(ids map[string]bool) []Proc {
	var out []Proc
	for id := range ids {
		out = append(out, tagged(id)...)
	}
	return out
}

// assertSame fails, showing both, when the node differs from its baseline.
func assertSame(t testing.TB, what, want, got string) {
	t.Helper()
	if want != got {
		t.Fatalf("%s: node differs from its baseline.\n--- baseline:\n%s\n--- now:\n%s", what, want, got)
	}
}

func bindMount(src, dst string) error { return unix.Mount(src, dst, "", unix.MS_BIND, "") }

// txPackets reads the TX packet counters of node's NICs (as ip -s link shows them).
func (l *testLab) txPackets(t testing.TB, node string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, nic := range []string{"eth0", "rdma0"} {
		s := l.Run(t, node, "cat", "/sys/class/net/"+nic+"/statistics/tx_packets")
		out[nic] = mustAtoi(strings.TrimSpace(s))
	}
	return out
}

// inNS runs fn on a thread that has entered node's namespace; sockets fn opens
// stay in that namespace. The thread is discarded if it cannot return.
func (l *testLab) inNS(node string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(filepath.Join(netnsDir, l.NetNS(node)))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- err
			return // stay locked: the runtime drops this thread
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// udpCount sends n datagrams of 200 bytes from node from to node to's rdma0
// address on port, paced, and returns how many arrived: those read plus those
// the receiving socket's full buffer dropped (a loaded machine can stall the
// reader; that is not the path losing them).
func (l *testLab) udpCount(t testing.TB, from, to string, port, n int) int {
	t.Helper()
	before := l.udpRcvbufErrors(t, to)
	read := l.udpRead(t, from, to, port, n)
	overflow := l.udpRcvbufErrors(t, to) - before
	if overflow > 0 {
		t.Logf("udpCount %s->%s: %d of %d datagrams dropped by the full socket buffer", from, to, overflow, n)
	}
	return read + overflow
}

// udpRcvbufErrors reads Udp RcvbufErrors from node's /proc/net/snmp.
func (l *testLab) udpRcvbufErrors(t testing.TB, node string) int {
	t.Helper()
	var head []string
	for _, line := range strings.Split(l.Run(t, node, "cat", "/proc/net/snmp"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, name := range head {
			if name == "RcvbufErrors" && i < len(f) {
				v, err := strconv.Atoi(f[i])
				if err != nil {
					t.Fatalf("%s: /proc/net/snmp RcvbufErrors %q", node, f[i])
				}
				return v
			}
		}
	}
	t.Fatalf("%s: /proc/net/snmp has no Udp RcvbufErrors", node)
	return 0
}

func (l *testLab) udpRead(t testing.TB, from, to string, port, n int) int {
	t.Helper()
	var rx *net.UDPConn
	if err := l.inNS(to, func() (err error) {
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(l.Addr(to, "rdma0")), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	rx.SetReadBuffer(8 << 20)
	var tx *net.UDPConn
	if err := l.inNS(from, func() (err error) {
		tx, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(l.Addr(to, "rdma0")), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	// The reader stops 300 ms after the last datagram was sent, not after any
	// 300 ms pause: a loaded machine can stall the sender that long.
	var sent atomic.Bool
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		c := 0
		for {
			rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := rx.Read(buf)
			if err == nil {
				c++
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && !sent.Load() {
				continue
			}
			got <- c
			return
		}
	}()
	msg := make([]byte, 200)
	for i := range n {
		if _, err := tx.Write(msg); err != nil {
			t.Fatalf("send datagram %d: %v", i, err)
		}
		if i%50 == 49 {
			time.Sleep(200 * time.Microsecond) // about 100k datagrams/s at most
		}
	}
	sent.Store(true)
	return <-got
}
