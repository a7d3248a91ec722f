//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/topology"
)

// Sandbox is one lab cluster built from network namespaces: a namespace per
// node (cl-<id>-<node>) whose NICs are veth pairs into a fabric namespace
// (cl-<id>-fab) holding one Linux bridge per switch, shaped with tbf on both
// ends, plus a cgroup, an nftables table and a learner home. Labs see it
// through labs/backend, as a session.Env.
//
// The sandbox lives until Down, until the context given to Up ends, or until
// its TTL passes, whichever comes first; if the process dies first, Sweep
// removes it.
type Sandbox struct {
	topo *topology.Topology
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	st    *State // set once Up has recorded it
	plan  *topology.Plan
	state string // "", "up", "down"
	done  chan struct{}
	// renewed carries a new expiry to watch.
	renewed chan time.Time
}

// New prepares a sandbox for topo; nothing is created before Up.
func New(topo *topology.Topology, opts Options) (*Sandbox, error) {
	if err := topo.Validate(); err != nil {
		return nil, err
	}
	if opts.DataDir == "" {
		return nil, errors.New("netns: Options.DataDir is required (state files live there)")
	}
	if opts.ID == "" {
		opts.ID = NewID()
	}
	if err := ValidID(opts.ID); err != nil {
		return nil, err
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Limits.Pids <= 0 {
		opts.Limits.Pids = DefaultPids
	}
	if opts.Limits.Memory <= 0 {
		opts.Limits.Memory = DefaultMemory
	}
	if opts.Limits.CPUs <= 0 {
		opts.Limits.CPUs = max(1, 0.75*float64(runtime.NumCPU()))
	}
	if opts.LearnerUIDBase == 0 {
		opts.LearnerUIDBase = DefaultLearnerUIDBase
	}
	if opts.HomeSize <= 0 {
		opts.HomeSize = DefaultHomeSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	opts.DataDir = abs
	return &Sandbox{topo: topo, opts: opts, log: opts.Logger.With("sandbox", opts.ID), done: make(chan struct{}),
		renewed: make(chan time.Time, 1)}, nil
}

// Open attaches to an existing sandbox from its state file, e.g. to open a
// shell or tear it down from another process. The returned Sandbox does not
// own the sandbox's lifetime: its Up fails, its Down removes it.
func Open(dataDir, id string) (*Sandbox, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := ReadState(abs, id)
	if err != nil {
		return nil, err
	}
	if st.Topology == nil {
		return nil, fmt.Errorf("sandbox %s: state has no topology", id)
	}
	plan, err := st.Topology.Plan(st.Index)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	s := &Sandbox{
		topo: st.Topology,
		opts: Options{DataDir: abs, ID: id, Limits: st.Limits, HomeSize: st.HomeSize, Logger: slog.Default()},
		st:   st, plan: plan, state: "up", done: make(chan struct{}),
	}
	s.log = s.opts.Logger.With("sandbox", id)
	if _, err := os.Stat(NetNSPath(id, fabricNode)); err != nil {
		return nil, fmt.Errorf("sandbox %s: recorded but not built (%v): run commlab sweep", id, err)
	}
	return s, nil
}

// ID is the sandbox id.
func (s *Sandbox) ID() string { return s.opts.ID }

// Topology is the sandbox's topology.
func (s *Sandbox) Topology() *topology.Topology { return s.topo }

// State returns a copy of the sandbox's recorded state, or nil before Up.
func (s *Sandbox) State() *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return nil
	}
	st := *s.st
	return &st
}

// Plan is the sandbox's address plan (nil before Up).
func (s *Sandbox) Plan() *topology.Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plan
}

// Done is closed once the sandbox has been torn down by this process (Down,
// context end or TTL).
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// NodeInfo is what other packages need to act on a node: where its network
// namespace is, its NICs with addresses, and the cgroup of its processes.
type NodeInfo struct {
	Name string `json:"name"`
	// NetNS is the namespace name (ip -n NAME); NetNSPath its file.
	NetNS     string `json:"netns"`
	NetNSPath string `json:"netns_path"`
	// Cgroup is the node's cgroup relative to each hierarchy root
	// (commlab/<id>/<node>); CgroupDirs are its directories.
	Cgroup     string   `json:"cgroup"`
	CgroupDirs []string `json:"cgroup_dirs"`
	// NICs are the node's interfaces (names as seen inside the node) with
	// their addresses, switches, rates and MTUs.
	NICs []topology.NICPlan `json:"nics"`
}

// DataAddrs lists the addresses of the node's data NICs, rail order.
func (n NodeInfo) DataAddrs() []string {
	var out []string
	for _, c := range n.NICs {
		if c.Role == topology.Data {
			out = append(out, c.Addr.Addr().String())
		}
	}
	return out
}

// Node describes one node of the sandbox (after Up).
func (s *Sandbox) Node(name string) (NodeInfo, error) {
	s.mu.Lock()
	plan := s.plan
	s.mu.Unlock()
	if plan == nil {
		return NodeInfo{}, fmt.Errorf("sandbox %s: %w", s.ID(), labs.ErrNotUp)
	}
	np, ok := plan.Node(name)
	if !ok {
		return NodeInfo{}, fmt.Errorf("sandbox %s: %w %q (have %v)", s.ID(), labs.ErrUnknownNode, name, s.topo.NodeNames())
	}
	info := NodeInfo{
		Name: name, NetNS: NetNSName(s.ID(), name), NetNSPath: NetNSPath(s.ID(), name),
		Cgroup: NodeCgroupPath(s.ID(), name), NICs: np.NICs,
	}
	if g, err := cgroup.Open(info.Cgroup); err == nil {
		info.CgroupDirs = g.Dirs()
	}
	return info, nil
}

// Nodes describes every node, in topology order (after Up).
func (s *Sandbox) Nodes() ([]NodeInfo, error) {
	var out []NodeInfo
	for _, n := range s.topo.Nodes {
		info, err := s.Node(n.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// FabricNetNS is the namespace holding the sandbox's bridges (one per switch,
// named br-<switch>; node n's NIC X plugs in as p<n>-X) and its nftables
// table (bridge family, named NFTable(id)).
func (s *Sandbox) FabricNetNS() string { return FabricNetNSName(s.ID()) }

// Cgroup is the sandbox's cgroup (limits apply here; nodes are children).
func (s *Sandbox) Cgroup() string { return CgroupPath(s.ID()) }

// PrioritizedCPUWeight is the CPU weight of a sandbox while Prioritize holds it:
// when it contends with other sandboxes (at the default weight, 100) for the CPU,
// its processes get 100 parts in 101. A run of another lab's workload beside it
// then cost a graded run of ch17's workload 16 %, not 35 % (docs/load.md).
const PrioritizedCPUWeight = 10000

// Prioritize raises the sandbox's CPU weight to PrioritizedCPUWeight until restore
// is called, which puts back the weight it was built with. A lab's graded run holds
// it, so that what another lab runs meanwhile (its chart, a learner's iperf3) takes
// the CPU only where this one leaves it. Within the sandbox nothing changes: its
// faults (cpu-squeeze's quota) and the weights of its shells and workload still hold.
func (s *Sandbox) Prioritize() (restore func() error, err error) {
	g, err := cgroup.Open(s.Cgroup())
	if err != nil {
		return nil, err
	}
	if err := g.SetCPUWeight(PrioritizedCPUWeight); err != nil {
		return nil, err
	}
	built := uint64(cgroup.DefaultCPUWeight)
	if st := s.State(); st != nil && st.Limits.CPUWeight > 0 {
		built = st.Limits.CPUWeight
	}
	return func() error {
		if err := g.SetCPUWeight(built); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err // a sandbox torn down meanwhile has no weight to put back
		}
		return nil
	}, nil
}

// LearnerUID is the uid (and gid) learner shells of this sandbox run as.
func (s *Sandbox) LearnerUID() uint32 {
	if st := s.State(); st != nil {
		return st.LearnerUID
	}
	return 0
}

// Up builds the sandbox. Its state is recorded (fsynced) before anything is
// created, so a crash at any point leaves something Sweep can remove. If Up
// fails, everything it created is removed before it returns.
//
// ctx bounds the build and also the sandbox's life, like exec.CommandContext:
// when ctx ends the sandbox is torn down. Pass a context that lives as long as
// the lab session (not an HTTP request's).
func (s *Sandbox) Up(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != "" {
		return fmt.Errorf("sandbox %s: Up called twice", s.ID())
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the netns backend needs root (namespaces, tc, cgroups)", labs.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	id := s.ID()
	if _, err := os.Lstat(NetNSPath(id, fabricNode)); err == nil {
		return fmt.Errorf("sandbox %s exists already", id)
	}
	if _, err := os.Lstat(statePath(s.opts.DataDir, id)); err == nil {
		return fmt.Errorf("sandbox %s exists already (state file %s)", id, statePath(s.opts.DataDir, id))
	}
	var owner Owner
	if !s.opts.Detached {
		if owner, err = self(); err != nil {
			return fmt.Errorf("identify owner process: %w", err)
		}
	}
	now := time.Now().UTC()
	st := &State{
		ID: id, Topology: s.topo, Created: now, Expires: now.Add(s.opts.TTL), Owner: owner,
		Limits: s.opts.Limits, HomeSize: s.opts.HomeSize, DataDir: s.opts.DataDir,
	}
	// 1. Reserve the slot (index) host-wide; 2. record the state. Both
	// fsynced before any namespace, link or cgroup exists.
	st.Index, err = takeSlot(lease{ID: id, Owner: owner, Expires: st.Expires, State: statePath(st.DataDir, id)})
	if err != nil {
		return err
	}
	st.LearnerUID = s.opts.LearnerUIDBase + uint32(st.Index)
	plan, err := s.topo.Plan(st.Index)
	if err != nil {
		releaseSlot(st.Index, id)
		return err
	}
	if err := writeState(st); err != nil {
		releaseSlot(st.Index, id)
		return err
	}
	s.st, s.plan = st, plan
	defer func() {
		if err != nil {
			// Roll back with a fresh deadline: ctx may be what failed.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := destroy(rctx, s.log, id, st); derr != nil {
				s.log.Error("roll back failed Up; run commlab sweep", "err", derr)
			}
			s.st, s.plan = nil, nil
			s.state = "down"
			close(s.done)
		}
	}()
	if err := build(ctx, s.log, st, plan); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	s.state = "up"
	go s.watch(ctx, st.Expires)
	return nil
}

// watch tears the sandbox down when ctx ends or the TTL passes.
func (s *Sandbox) watch(ctx context.Context, expires time.Time) {
	t := time.NewTimer(time.Until(expires))
	defer t.Stop()
	why := ""
	for why == "" {
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			why = "context ended"
		case <-t.C:
			why = "TTL expired"
		case exp := <-s.renewed:
			t.Reset(time.Until(exp))
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.log.Info("tearing down sandbox", "why", why)
	if err := s.Down(dctx); err != nil {
		s.log.Error("tear down sandbox", "why", why, "err", err)
	}
}

// Renew moves the sandbox's expiry to now+ttl (a lab given more time). The state
// file and the slot lease, which sweeps of every process read, say so before the
// sandbox's own timer moves; on error the old expiry holds for the timer, and a
// sweep honours the later one only while this process lives.
func (s *Sandbox) Renew(ttl time.Duration) (time.Time, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return time.Time{}, fmt.Errorf("sandbox %s: renew for %v: want more than 0 and at most %v", s.ID(), ttl, MaxTTL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != "up" {
		return time.Time{}, fmt.Errorf("sandbox %s: renew: %w", s.ID(), ErrNoSandbox)
	}
	st := *s.st
	st.Expires = time.Now().UTC().Add(ttl)
	if err := writeState(&st); err != nil {
		return time.Time{}, fmt.Errorf("sandbox %s: renew: %w", s.ID(), err)
	}
	if err := rewriteSlot(st.Index, lease{ID: st.ID, Owner: st.Owner, Expires: st.Expires, State: statePath(st.DataDir, st.ID)}); err != nil {
		return time.Time{}, fmt.Errorf("sandbox %s: renew the slot lease: %w", s.ID(), err)
	}
	s.st = &st
	select { // only the latest expiry matters
	case <-s.renewed:
	default:
	}
	s.renewed <- st.Expires
	return st.Expires, nil
}

// Down removes everything of the sandbox: its processes, namespaces (and with
// them links, qdiscs and the nftables table), cgroup, learner home, state and
// slot. It is idempotent and safe after a failed or partial Up.
func (s *Sandbox) Down(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != "up" {
		return nil
	}
	if err := destroy(ctx, s.log, s.ID(), s.st); err != nil {
		return fmt.Errorf("sandbox %s: %w", s.ID(), err)
	}
	s.state = "down"
	close(s.done)
	return nil
}

// up returns the state of an up sandbox or ErrNotUp.
func (s *Sandbox) up() (*State, *topology.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != "up" {
		return nil, nil, fmt.Errorf("sandbox %s: %w", s.ID(), labs.ErrNotUp)
	}
	return s.st, s.plan, nil
}
