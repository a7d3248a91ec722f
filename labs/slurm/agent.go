package slurm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/topology"
)

// DataRoot holds each job's agent state on a node (the injector journal), one
// directory per job; it is under /run, so a reboot clears it with the faults.
const DataRoot = "/run/commlab-slurm"

// JobDataDir is the data directory of job's agents and of its epilog sweep.
func JobDataDir(job string) string { return filepath.Join(DataRoot, "job-"+job) }

// SandboxID is the sandbox id of job's nodes in the injector's journal. Their
// namespaces are cls-<job>-<node> (host.SlurmNetNSName), out of a local sweep's
// reach.
func SandboxID(job string) string { return host.SlurmSandboxID(job) }

// NodeTarget is where the injector applies a fault on node of job. The node's
// etc directory (env-force's profile.d) is in the job's data directory, which
// the epilog removes.
func NodeTarget(job, node string) injector.Target {
	return injector.Target{Sandbox: SandboxID(job), Node: node, NetNS: host.SlurmNetNSName(job, node),
		EtcDir: filepath.Join(JobDataDir(job), "nodes", node, "etc")}
}

// RemoveJobNetNS deletes every namespace of job on this node (cls-<job>-*) and
// returns their names.
func RemoveJobNetNS(ctx context.Context, job string) ([]string, error) {
	ents, err := os.ReadDir(host.NetNSDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), host.SlurmNetNSName(job, "")) {
			continue
		}
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", e.Name()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", e.Name(), err, bytes.TrimSpace(out)))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// Agent is `commlab agent`: the node side of a lab, inside a Slurm job step.
type Agent struct {
	URL, Token, Lab string
	Node            string // the scenario's node name
	Job             string // SLURM_JOB_ID
	Index           int    // this node's place in the lab (SLURM_NODEID)
	Topology        string // the scenario's topology; empty: one NIC, eth0
	AddrIndex       int    // the lab's address slice (EnvAddrIndex)
	// LabNICs are the site's lab NICs (EnvLabNICs): the node's NICs are
	// macvlan children of them; none: veths that lead nowhere.
	LabNICs []string
	// TLS is how a wss:// server is trusted (EnvCA or EnvPin; nil: the
	// system's roots); CA is EnvCA's file, for errors.
	TLS      *tls.Config
	CA       string
	Injector *injector.Injector
	Log      *slog.Logger
	// Retry is the pause between reconnection attempts (default 1 s).
	Retry time.Duration

	mu    sync.Mutex
	procs map[*proc]bool // the streams' processes, killed when the agent ends
}

// AgentFromEnv reads the agent's lab from the job step's environment.
func AgentFromEnv(getenv func(string) string) (*Agent, error) {
	a := &Agent{URL: getenv(EnvURL), Token: getenv(EnvToken), Lab: getenv(EnvLab), Job: getenv("SLURM_JOB_ID"), Topology: getenv(EnvTopology),
		CA: getenv(EnvCA)}
	var miss []string
	for _, k := range []string{EnvURL, EnvToken, EnvLab, EnvNodes, "SLURM_JOB_ID", "SLURM_NODEID"} {
		if getenv(k) == "" {
			miss = append(miss, k)
		}
	}
	if len(miss) > 0 {
		return nil, fmt.Errorf("commlab agent runs inside a lab's Slurm job; missing environment %s", strings.Join(miss, ", "))
	}
	idx, err := strconv.Atoi(getenv("SLURM_NODEID"))
	nodes := strings.Split(getenv(EnvNodes), ",")
	if err != nil || idx < 0 || idx >= len(nodes) {
		return nil, fmt.Errorf("SLURM_NODEID %q: want 0 to %d (%s=%s)", getenv("SLURM_NODEID"), len(nodes)-1, EnvNodes, getenv(EnvNodes))
	}
	a.Index, a.Node = idx, nodes[idx]
	if err := host.ValidNode(a.Node); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvNodes, err)
	}
	if _, err := strconv.ParseUint(a.Job, 10, 32); err != nil {
		return nil, fmt.Errorf("SLURM_JOB_ID %q: want a number", a.Job)
	}
	if a.TLS, err = agentTLS(a.CA, getenv(EnvPin)); err != nil {
		return nil, err
	}
	if v := getenv(EnvAddrIndex); v != "" {
		if a.AddrIndex, err = strconv.Atoi(v); err != nil || a.AddrIndex < 0 || a.AddrIndex >= topology.MaxSandboxes {
			return nil, fmt.Errorf("%s %q: want 0 to %d", EnvAddrIndex, v, topology.MaxSandboxes-1)
		}
	}
	for _, nic := range strings.FieldsFunc(getenv(EnvLabNICs), func(r rune) bool { return r == ',' }) {
		if injector.ValidNIC(nic) != nil {
			return nil, fmt.Errorf("%s: %q is not an interface name", EnvLabNICs, nic)
		}
		a.LabNICs = append(a.LabNICs, nic)
	}
	return a, nil
}

func (a *Agent) sandbox() string         { return SandboxID(a.Job) }
func (a *Agent) netns() string           { return host.SlurmNetNSName(a.Job, a.Node) }
func (a *Agent) target() injector.Target { return NodeTarget(a.Job, a.Node) }

// Run builds the node's sandbox, serves the server until ctx ends (the job step
// is signalled), reconnecting after every drop, and then reverts this node's
// faults and removes its sandbox. A server it does not trust ends it at once.
func (a *Agent) Run(ctx context.Context) error {
	if a.Retry <= 0 {
		a.Retry = time.Second
	}
	if err := a.up(ctx); err != nil {
		a.down()
		return err
	}
	defer a.down()
	for {
		err := a.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrUntrusted) {
			return err // the job ends, and the lab waiting for it fails
		}
		a.Log.Warn("agent: connection to the server lost; reconnecting", "err", err, "in", a.Retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.Retry):
		}
	}
}

// nodeNIC is one of the node's NICs as the topology plans it, and the lab NIC
// whose macvlan child it is ("": a veth that leads nowhere).
type nodeNIC struct {
	topology.NICPlan
	Parent string
}

// nics are the node's NICs in the lab's address slice; switch k of the
// topology rides on lab NIC k mod len(LabNICs).
func (a *Agent) nics() ([]nodeNIC, error) {
	parent := func(k int) string {
		if len(a.LabNICs) == 0 {
			return ""
		}
		return a.LabNICs[k%len(a.LabNICs)]
	}
	if a.Topology == "" {
		slice, err := topology.SliceFor(a.AddrIndex)
		if err != nil {
			return nil, err
		}
		addr := slice.Addr()
		for range a.Index + 1 {
			addr = addr.Next()
		}
		return []nodeNIC{{NICPlan: topology.NICPlan{NIC: topology.NIC{Name: "eth0", MTU: 1500}, Addr: netip.PrefixFrom(addr, topology.SubnetBits)},
			Parent: parent(0)}}, nil
	}
	t, err := topology.Load(a.Topology)
	if err != nil {
		return nil, err
	}
	plan, err := t.Plan(a.AddrIndex)
	if err != nil {
		return nil, err
	}
	np, ok := plan.Node(a.Node)
	if !ok {
		return nil, fmt.Errorf("topology %s has no node %s", a.Topology, a.Node)
	}
	var out []nodeNIC
	for _, n := range np.NICs {
		k := slices.IndexFunc(plan.Nets, func(s topology.SwitchPlan) bool { return s.Name == n.Switch })
		out = append(out, nodeNIC{NICPlan: n, Parent: parent(k)})
	}
	return out, nil
}

// checkLabNICs refuses lab NICs this node cannot lend as they are (the agent
// never configures them): absent, down, loopback, an MTU below the
// topology's, or a host address inside the lab's slice.
func (a *Agent) checkLabNICs(nics []nodeNIC) error {
	slice, err := topology.SliceFor(a.AddrIndex)
	if err != nil {
		return err
	}
	for _, n := range nics {
		if !slices.Contains(a.LabNICs, n.Parent) {
			return fmt.Errorf("NIC %s is not one of the site's lab NICs (cluster.lab_nics: %s)", n.Parent, strings.Join(a.LabNICs, ", "))
		}
		p, err := net.InterfaceByName(n.Parent)
		switch {
		case err != nil:
			return fmt.Errorf("lab NIC %s (cluster.lab_nics) is not on Slurm node %s: %v", n.Parent, slurmNode(), err)
		case p.Flags&net.FlagLoopback != 0:
			return fmt.Errorf("lab NIC %s on Slurm node %s is a loopback device", n.Parent, slurmNode())
		case p.Flags&net.FlagUp == 0:
			return fmt.Errorf("lab NIC %s on Slurm node %s is down: the site brings it up (commlab never configures it)", n.Parent, slurmNode())
		case p.MTU < cmp.Or(n.MTU, 1500):
			return fmt.Errorf("lab NIC %s on Slurm node %s has MTU %d, below %s's %d in the topology", n.Parent, slurmNode(), p.MTU, n.Name, cmp.Or(n.MTU, 1500))
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	for _, ad := range addrs {
		if ipn, ok := ad.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && slice.Contains(ip.Unmap()) {
				return fmt.Errorf("the lab's addresses %s overlap the host's %s on Slurm node %s", slice, ip.Unmap(), slurmNode())
			}
		}
	}
	return nil
}

// slurmNode is the Slurm node the agent runs on.
func slurmNode() string {
	if h := os.Getenv("SLURMD_NODENAME"); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}

// up makes the node's sandbox: a network namespace owned by a user namespace
// of its own (createNodeNS) with loopback and the node's NICs, each shaped at
// its rate by a tbf c1: as the local backend's are. With lab NICs, each is a
// macvlan child (bridge mode) of one, created in the namespace, so the lab's
// nodes on other Slurm nodes are reachable over the site's fabric; two of
// them share one L2 network, so each answers ARP for its own address only.
// Without, each is one end of a veth pair whose other end (peer<i>) stays
// inside.
func (a *Agent) up(ctx context.Context) error {
	nics, err := a.nics()
	if err != nil {
		return fmt.Errorf("the node's NICs: %w", err)
	}
	if len(a.LabNICs) > 0 {
		if err := a.checkLabNICs(nics); err != nil {
			return fmt.Errorf("build the node's sandbox: %w", err)
		}
	}
	// The node's profile.d, shown to its commands (inNode), empty until a fault writes there.
	if err := os.MkdirAll(labs.ProfileD(a.target().NodeEtc())[0], 0o755); err != nil {
		return fmt.Errorf("build the node's sandbox: %w", err)
	}
	ns := a.netns()
	if err := createNodeNS(ns); err != nil {
		return fmt.Errorf("build the node's sandbox: %w", err)
	}
	steps := [][]string{{"ip", "-n", ns, "link", "set", "lo", "up"}}
	if len(a.LabNICs) > 0 {
		steps = append(steps, []string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w",
			"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"})
	}
	for i, n := range nics {
		mtu := strconv.Itoa(cmp.Or(n.MTU, 1500))
		if n.Parent != "" {
			steps = append(steps, []string{"ip", "link", "add", "link", n.Parent, "name", n.Name, "netns", ns, "mtu", mtu, "type", "macvlan", "mode", "bridge"})
		} else {
			peer := fmt.Sprintf("peer%d", i)
			steps = append(steps,
				[]string{"ip", "-n", ns, "link", "add", n.Name, "mtu", mtu, "type", "veth", "peer", "name", peer, "mtu", mtu},
				[]string{"ip", "-n", ns, "link", "set", peer, "up"})
		}
		steps = append(steps,
			[]string{"ip", "-n", ns, "addr", "add", n.Addr.String(), "dev", n.Name},
			[]string{"ip", "-n", ns, "link", "set", n.Name, "up"})
		if n.Rate > 0 {
			burst, limit := n.Rate.TBF(cmp.Or(n.MTU, 1500) + 14)
			steps = append(steps, []string{"tc", "-n", ns, "qdisc", "replace", "dev", n.Name, "root",
				"handle", fmt.Sprintf("%x:", host.BaseQdiscMajor), "tbf", "rate", fmt.Sprintf("%dbit", uint64(n.Rate)),
				"burst", strconv.FormatUint(burst, 10), "limit", strconv.FormatUint(limit, 10)})
		}
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("build the node's sandbox: %s: %v: %s", strings.Join(s, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// down kills the learner's processes, reverts this node's faults and removes
// its namespace.
func (a *Agent) down() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.mu.Lock()
	for p := range a.procs {
		_ = killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
	}
	a.mu.Unlock()
	if a.Injector != nil {
		if list, err := a.Injector.List(); err == nil {
			for _, e := range list {
				if e.Target.Sandbox == a.sandbox() && e.Target.Node == a.Node {
					if err := a.Injector.Revert(ctx, e.ID); err != nil {
						a.Log.Error("agent: revert", "fault", e.ID, "err", err)
					}
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(host.NetNSDir, a.netns())); err == nil {
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", a.netns()).CombinedOutput(); err != nil {
			a.Log.Error("agent: remove namespace", "netns", a.netns(), "err", err, "out", string(out))
		}
	}
	_ = os.RemoveAll(a.home())
}

// dial opens the lab's connection to the server, or with stream set, that
// stream's.
func (a *Agent) dial(ctx context.Context, stream string) (*websocket.Conn, error) {
	u, err := url.Parse(a.URL)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", EnvURL, a.URL, err)
	}
	q := u.Query()
	q.Set("lab", a.Lab)
	if stream != "" {
		q.Set("stream", stream)
	}
	u.RawQuery = q.Encode()
	hdr := http.Header{tokenHeader: {"Bearer " + a.Token}}
	d := *websocket.DefaultDialer
	d.TLSClientConfig = a.TLS
	ws, resp, err := d.DialContext(ctx, u.String(), hdr)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %s)", a.URL, err, resp.Status)
		}
		return nil, fmt.Errorf("dial %s: %w", a.URL, a.dialError(err))
	}
	ws.SetReadLimit(maxFrame)
	return ws, nil
}

// serve holds one connection until it drops or ctx ends.
func (a *Agent) serve(ctx context.Context) error {
	ws, err := a.dial(ctx, "")
	if err != nil {
		return err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	if err := ws.WriteJSON(Frame{Op: opHello, Node: a.Node, Sandbox: a.sandbox(), Host: slurmNode()}); err != nil {
		return err
	}
	a.Log.Info("agent: connected", "url", a.URL, "node", a.Node)
	for {
		var req Frame
		if err := ws.ReadJSON(&req); err != nil {
			return err
		}
		// Requests are answered one at a time, in order: a fault's apply is
		// finished before the command that looks for it runs.
		rep := a.handle(ctx, req)
		rep.ID, rep.Op = req.ID, opReply
		if err := ws.WriteJSON(rep); err != nil {
			return err
		}
	}
}

func (a *Agent) handle(ctx context.Context, req Frame) Frame {
	fail := func(err error) Frame { return Frame{Err: err.Error()} }
	switch req.Op {
	case opExec:
		if len(req.Argv) == 0 {
			return fail(errors.New("exec: empty command"))
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := a.inNode(cctx, req.Argv...)
		var out capped
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		rep := Frame{Output: out.String()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			rep.Exit = ee.ExitCode()
		case err != nil:
			return fail(err)
		}
		return rep
	case opApply:
		f, err := a.Injector.Registry().Parse(req.Kind, req.Params)
		if err != nil {
			return fail(err)
		}
		e, err := a.Injector.Apply(ctx, a.target(), f, req.TTL)
		if err != nil {
			return fail(err)
		}
		return Frame{Fault: e.ID, Output: strings.Join(e.Command, "\n")}
	case opShell, opRank:
		pid, err := a.startStream(ctx, req)
		if err != nil {
			return fail(err)
		}
		return Frame{Pid: pid}
	case opRevert:
		if err := a.owns(req.Fault); err != nil {
			return fail(err)
		}
		if err := a.Injector.Revert(ctx, req.Fault); err != nil {
			return fail(err)
		}
		return Frame{}
	}
	return fail(fmt.Errorf("unknown request %q", req.Op))
}

// owns refuses to revert a fault of another lab or node sharing the journal.
func (a *Agent) owns(id string) error {
	list, err := a.Injector.List()
	if err != nil {
		return err
	}
	for _, e := range list {
		if e.ID == id {
			if e.Target.Sandbox != a.sandbox() || e.Target.Node != a.Node {
				return fmt.Errorf("fault %s is not on this node's sandbox", id)
			}
			return nil
		}
	}
	return fmt.Errorf("no live fault %s", id)
}

// enterNode runs in the node's mount namespace (ip netns exec makes one, its
// mounts private): it shows directory $0 at $1, read-only, and execs the
// command.
const enterNode = `mount --bind -o ro -- "$0" "$1" && shift && exec "$@"`

// inNode is argv in the node's sandbox, as root: its network namespace, and
// the node's profile scripts at /etc/profile.d, as the local backend's shells
// see them (labs.ProfileD). Each step execs the next: argv's parent is the
// agent.
func (a *Agent) inNode(ctx context.Context, argv ...string) *exec.Cmd {
	bind := labs.ProfileD(a.target().NodeEtc())
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", a.netns(), "sh", "-c", enterNode, bind[0], bind[1]}, argv...)...)
}

// capped keeps the first maxOutput bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
