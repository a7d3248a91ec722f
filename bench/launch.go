package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commlab/commlab/internal/host"
)

// HostSpec is one node and how many ranks it runs (--hosts node1:2,node2:2).
type HostSpec struct {
	Node  string `json:"node"`
	Ranks int    `json:"ranks"`
}

var nodeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ParseHosts reads "node1:2,node2:2" (a missing count means 1).
func ParseHosts(s string) ([]HostSpec, error) {
	var out []HostSpec
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, cnt, has := strings.Cut(f, ":")
		n := 1
		if has {
			v, err := strconv.Atoi(cnt)
			if err != nil || v < 1 || v > 64 {
				return nil, fmt.Errorf("--hosts %q: %q: the rank count after ':' must be 1 to 64", s, f)
			}
			n = v
		}
		if !nodeName.MatchString(name) {
			return nil, fmt.Errorf("--hosts %q: %q is not a node name", s, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("--hosts %q: node %q listed twice", s, name)
		}
		seen[name] = true
		out = append(out, HostSpec{Node: name, Ranks: n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--hosts %q: no node", s)
	}
	return out, nil
}

// Spec is a process to start in a node.
type Spec struct {
	Node       string
	Argv       []string
	Env        []string // added to the launcher's environment
	Stdout     io.Writer
	Stderr     io.Writer
	ExtraFiles []*os.File // fd 3 onwards
}

// Proc is a started process.
type Proc interface {
	Wait() error
	Kill() error
	Pid() int
}

// Starter starts a process in a lab node. The launcher only needs this.
type Starter interface {
	Start(ctx context.Context, s Spec) (Proc, error)
}

type cmdProc struct{ cmd *exec.Cmd }

func (p cmdProc) Wait() error { return p.cmd.Wait() }
func (p cmdProc) Kill() error { return p.cmd.Process.Kill() }
func (p cmdProc) Pid() int    { return p.cmd.Process.Pid }

func startCmd(argv []string, s Spec) (Proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = s.Stdout, s.Stderr, s.ExtraFiles
	// Ranks die with the launcher (the thread that forks may exit first: see
	// FAULTS.md; the launcher kills its ranks on every path anyway).
	cmd.SysProcAttr = ownGroup()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", argv[0], s.Node, err)
	}
	return cmdProc{cmd}, nil
}

// LocalStarter runs ranks as plain processes on this host; node names are
// labels (ranks on different labels still talk over NET transports).
type LocalStarter struct{}

var _ Starter = LocalStarter{}

// Start implements Starter.
func (LocalStarter) Start(_ context.Context, s Spec) (Proc, error) { return startCmd(s.Argv, s) }

// NetnsStarter runs each rank inside the network namespace of its lab node:
// cl-<sandbox>-<node>, or the node name itself when it already starts with cl-.
type NetnsStarter struct {
	Sandbox string
}

var _ Starter = NetnsStarter{}

// Namespace returns the namespace of a node.
func (n NetnsStarter) Namespace(node string) string {
	if strings.HasPrefix(node, host.Prefix) || n.Sandbox == "" {
		return node
	}
	return host.NetNSName(n.Sandbox, node)
}

// Start implements Starter.
func (n NetnsStarter) Start(_ context.Context, s Spec) (Proc, error) {
	ns := n.Namespace(s.Node)
	if _, err := os.Stat("/run/netns/" + ns); err != nil {
		return nil, fmt.Errorf("node %s: network namespace %s not found (is the lab up?)", s.Node, ns)
	}
	return startCmd(append([]string{"ip", "netns", "exec", ns}, s.Argv...), s)
}

// Launcher starts the ranks of a run, like mpirun: rank 0 first, which creates
// the unique id; then the others with the id in their environment. It waits for
// all, and when one fails it gives the others a grace period to report their own
// error and then kills them, so a dead rank never leaves a hang behind.
type Launcher struct {
	Starter Starter
	Exe     string // the commlab binary; argv is Exe bench rank
	Stdout  io.Writer
	Stderr  io.Writer
	Env     []string      // extra environment for every rank
	Grace   time.Duration // after the first failure; 0 means 5s
	Timeout time.Duration // for rank 0 to publish the unique id; 0 means 60s
	// Started, if set, is told about every rank process (tests use it).
	Started func(rank int, node string, p Proc)
}

// placement lists (node, local rank) for every rank, node by node.
func placement(o Options) []HostSpec {
	hosts := o.Hosts
	if len(hosts) == 0 {
		h, _ := os.Hostname()
		hosts = []HostSpec{{Node: h, Ranks: o.NThreads * o.NGpus}}
	}
	var out []HostSpec
	for _, h := range hosts {
		for l := range h.Ranks {
			out = append(out, HostSpec{Node: h.Node, Ranks: l})
		}
	}
	return out
}

// lineWriter forwards whole lines to w under a shared lock, so ranks' output
// does not interleave mid-line.
type lineWriter struct {
	mu  *sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	if i := strings.LastIndexByte(string(l.buf), '\n'); i >= 0 {
		l.mu.Lock()
		l.w.Write(l.buf[:i+1])
		l.mu.Unlock()
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.mu.Lock()
		l.w.Write(append(l.buf, '\n'))
		l.mu.Unlock()
		l.buf = nil
	}
}

// RankError is a rank process that failed.
type RankError struct {
	Rank int
	Node string
	Err  error
}

func (e *RankError) Error() string { return fmt.Sprintf("rank %d on %s: %v", e.Rank, e.Node, e.Err) }
func (e *RankError) Unwrap() error { return e.Err }

// Run validates o, starts every rank and waits for them.
func (l *Launcher) Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	grace, idTimeout := l.Grace, l.Timeout
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if idTimeout <= 0 {
		idTimeout = 60 * time.Second
	}
	optsJSON, err := json.Marshal(o)
	if err != nil {
		return err
	}
	places := placement(o)
	n := len(places)
	var outMu sync.Mutex
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, n)
	procs := make([]Proc, n)
	writers := []*lineWriter{}
	killAll := func() {
		for _, p := range procs {
			if p != nil {
				p.Kill()
			}
		}
	}
	defer func() {
		for _, w := range writers {
			w.flush()
		}
	}()
	start := func(rank int, id string, extra []*os.File) error {
		pl := places[rank]
		env := append([]string{
			EnvRank + "=" + strconv.Itoa(rank), EnvNRanks + "=" + strconv.Itoa(n),
			EnvLocalRank + "=" + strconv.Itoa(pl.Ranks), EnvNode + "=" + pl.Node,
			EnvOpts + "=" + string(optsJSON),
		}, l.Env...)
		if id != "" {
			env = append(env, EnvID+"="+id)
		}
		so := &lineWriter{mu: &outMu, w: l.Stdout}
		se := &lineWriter{mu: &outMu, w: l.Stderr}
		writers = append(writers, so, se)
		p, err := l.Starter.Start(ctx, Spec{Node: pl.Node, Argv: []string{l.Exe, "bench", "rank"}, Env: env, Stdout: so, Stderr: se, ExtraFiles: extra})
		if err != nil {
			return &RankError{Rank: rank, Node: pl.Node, Err: err}
		}
		procs[rank] = p
		if l.Started != nil {
			l.Started(rank, pl.Node, p)
		}
		go func() { exits <- exit{rank, p.Wait()} }()
		return nil
	}

	// Rank 0 creates the unique id and writes it on fd 3.
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe for the unique id: %w", err)
	}
	err = start(0, "", []*os.File{pw})
	pw.Close()
	if err != nil {
		pr.Close()
		return err
	}
	idc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		idc <- strings.TrimSpace(line)
	}()
	var id string
	select {
	case id = <-idc:
	case e := <-exits:
		pr.Close()
		killAll()
		return &RankError{Rank: 0, Node: places[0].Node, Err: fmt.Errorf("exited before publishing the unique id: %v", e.err)}
	case <-time.After(idTimeout):
		pr.Close()
		killAll()
		return &RankError{Rank: 0, Node: places[0].Node, Err: fmt.Errorf("no unique id within %s", idTimeout)}
	case <-ctx.Done():
		pr.Close()
		killAll()
		return ctx.Err()
	}
	pr.Close()
	if id == "" {
		// Rank 0 failed before the id (its error is on stderr); collect its exit.
		killAll()
		e := <-exits
		return &RankError{Rank: 0, Node: places[0].Node, Err: fmt.Errorf("no unique id: %v", e.err)}
	}
	for r := 1; r < n; r++ {
		if err := start(r, id, nil); err != nil {
			killAll()
			return err
		}
	}

	var first error
	var deadline <-chan time.Time
	done := ctx.Done()
	for left := n; left > 0; {
		select {
		case e := <-exits:
			left--
			if e.err != nil && first == nil {
				first = &RankError{Rank: e.rank, Node: places[e.rank].Node, Err: e.err}
				deadline = time.After(grace)
			}
		case <-deadline:
			killAll()
			deadline = nil
		case <-done:
			killAll()
			done = nil
			if first == nil {
				first = ctx.Err()
			}
		}
	}
	return first
}
