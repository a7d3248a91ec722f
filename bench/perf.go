package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commlab/commlab/bench/bootstrap"
	"github.com/commlab/commlab/bench/ncclmsg"
	"github.com/commlab/commlab/bench/ncclsock"
	"github.com/commlab/commlab/bench/trace"
	"github.com/commlab/commlab/bench/transport"
)

// Options are nccl-tests' flags plus commlab's placement flags.
type Options struct {
	Coll       Collective `json:"coll"`
	MinBytes   int64      `json:"min_bytes"`   // -b
	MaxBytes   int64      `json:"max_bytes"`   // -e
	StepFactor int64      `json:"step_factor"` // -f
	StepBytes  int64      `json:"step_bytes"`  // -i (used when -f is 1)
	Iters      int        `json:"iters"`       // -n
	Warmup     int        `json:"warmup"`      // -w
	Check      int        `json:"check"`       // -c
	Op         string     `json:"op"`          // -o
	DType      string     `json:"dtype"`       // -d
	Root       int        `json:"root"`        // -r
	Average    int        `json:"average"`     // -a: 0 rank 0, 1 mean, 2 min, 3 max
	NThreads   int        `json:"nthreads"`    // -t
	NGpus      int        `json:"ngpus"`       // -g
	Trace      string     `json:"trace,omitempty"`
	Train      int        `json:"train,omitempty"`      // training steps before the sweep (train.go)
	ComputeMS  int        `json:"compute_ms,omitempty"` // --compute-ms: emulated backward time per step
	Buckets    int        `json:"buckets,omitempty"`    // --buckets: gradient buckets per step (0 or 1: one)
	Hosts      []HostSpec `json:"hosts,omitempty"`
}

// DefaultOptions are nccl-tests' defaults.
func DefaultOptions() Options {
	return Options{MinBytes: 32 << 20, MaxBytes: 32 << 20, StepFactor: 1, StepBytes: 1 << 20, Iters: 20, Warmup: 5, Check: 1,
		Op: "sum", DType: "float", Average: 1, NThreads: 1, NGpus: 1}
}

// NRanks is the total number of ranks the options ask for.
func (o Options) NRanks() int {
	if len(o.Hosts) == 0 {
		return o.NThreads * o.NGpus
	}
	n := 0
	for _, h := range o.Hosts {
		n += h.Ranks
	}
	return n
}

// Validate rejects bad options with the flag's name, before any rank starts.
func (o Options) Validate() error {
	if _, err := ParseCollective(string(o.Coll)); err != nil {
		return err
	}
	switch {
	case o.MinBytes < 0 || o.MaxBytes < 0:
		return fmt.Errorf("sizes must not be negative (-b %d, -e %d)", o.MinBytes, o.MaxBytes)
	case o.MinBytes > o.MaxBytes:
		return fmt.Errorf("size range reversed: -b %d (minBytes) is larger than -e %d (maxBytes)", o.MinBytes, o.MaxBytes)
	case o.StepFactor < 1:
		return fmt.Errorf("-f %d: the step factor must be at least 1", o.StepFactor)
	case o.StepFactor == 1 && o.StepBytes < 1:
		return fmt.Errorf("-i %d: the step must be at least 1 byte when -f is 1", o.StepBytes)
	case o.StepFactor > 1 && o.MinBytes == 0:
		return errors.New("-b 0 with a step factor would never grow: use -b 1 or more")
	case o.Iters < 1:
		return fmt.Errorf("-n %d: at least one iteration", o.Iters)
	case o.Warmup < 0:
		return fmt.Errorf("-w %d: warmup iterations must not be negative", o.Warmup)
	case o.Check < 0:
		return fmt.Errorf("-c %d: want 0 or 1", o.Check)
	case o.Average < 0 || o.Average > 3:
		return fmt.Errorf("-a %d: want 0 (rank 0), 1 (average), 2 (min) or 3 (max)", o.Average)
	case o.NThreads < 1 || o.NGpus < 1:
		return fmt.Errorf("-t %d -g %d: both must be at least 1", o.NThreads, o.NGpus)
	case o.Train < 0 || o.Train > 10000:
		return fmt.Errorf("--train %d: want 0 (none) to 10000 steps", o.Train)
	case o.ComputeMS < 0 || o.ComputeMS > 60000:
		return fmt.Errorf("--compute-ms %d: want 0 (none) to 60000", o.ComputeMS)
	case o.Buckets < 0 || o.Buckets > maxBuckets:
		return fmt.Errorf("--buckets %d: want 1 to %d", o.Buckets, maxBuckets)
	case (o.ComputeMS > 0 || o.Buckets > 1) && o.Train == 0:
		return errors.New("--compute-ms and --buckets shape the training loop: add --train N")
	case o.MaxBytes > 4<<30:
		return fmt.Errorf("-e %d: at most 4G per rank in the emulation", o.MaxBytes)
	}
	if _, err := parseOps(o.Op); err != nil {
		return err
	}
	if _, err := parseTypes(o.DType); err != nil {
		return err
	}
	if n := o.NRanks(); n < 1 || n > 256 {
		return fmt.Errorf("%d ranks: want 1 to 256", n)
	}
	if o.Root < 0 || o.Root >= o.NRanks() {
		return fmt.Errorf("-r %d: root must be a rank from 0 to %d", o.Root, o.NRanks()-1)
	}
	return nil
}

// ParseSize reads nccl-tests' size syntax: a number with an optional K, M, G or
// T suffix (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "B")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M or G suffix", s)
	}
	return int64(f * float64(mult)), nil
}

// Sizes lists the message sizes the options sweep.
func (o Options) Sizes() []int64 {
	var out []int64
	for s := o.MinBytes; s <= o.MaxBytes; {
		out = append(out, s)
		if o.StepFactor > 1 {
			s *= o.StepFactor
		} else {
			s += o.StepBytes
		}
		if len(out) > 10000 {
			break
		}
	}
	return out
}

// RankEnv is what the launcher tells a rank process.
type RankEnv struct {
	Rank, NRanks, LocalRank int
	Node                    string
	ID                      string    // unique id; empty for rank 0, which creates it
	IDOut                   io.Writer // where rank 0 publishes the id (fd 3)
}

// Environment variables of the rank protocol.
const (
	EnvRank      = "COMMLAB_BENCH_RANK"
	EnvNRanks    = "COMMLAB_BENCH_NRANKS"
	EnvLocalRank = "COMMLAB_BENCH_LOCAL_RANK"
	EnvNode      = "COMMLAB_BENCH_NODE"
	EnvID        = "COMMLAB_BENCH_ID"
	EnvOpts      = "COMMLAB_BENCH_OPTS"
)

// RankEnvFromOS reads a rank's identity from its environment.
func RankEnvFromOS(getenv func(string) string) (RankEnv, error) {
	var re RankEnv
	var err error
	num := func(k string) int {
		if err != nil {
			return 0
		}
		n, e := strconv.Atoi(getenv(k))
		if e != nil {
			err = fmt.Errorf("%s=%q: not set by a launcher (run `commlab bench <collective>` instead)", k, getenv(k))
		}
		return n
	}
	re.Rank, re.NRanks, re.LocalRank = num(EnvRank), num(EnvNRanks), num(EnvLocalRank)
	re.Node, re.ID = getenv(EnvNode), getenv(EnvID)
	return re, err
}

// Failure is a rank's fatal error, printed the way nccl-tests reports an NCCL failure.
type Failure struct {
	Node string
	Err  error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s: Test NCCL failure commlab/bench '%s / %s'", f.Node, f.kind(), f.Err)
}

// kind is the text of the return code NCCL would give. A connect NCCL gives up
// on carries its code (ncclsock: refused until the retries run out is 6; no
// route, and in 2.24-2.26 a timeout or EHOSTUNREACH, is 2 at once). A peer
// that went away or stalled is ncclRemoteError (6), and so are the emulation's
// own deadlines, which stand for NCCL retrying or waiting; a local failure is
// ncclSystemError (2).
func (f *Failure) kind() string {
	const (
		system = "unhandled system error (run with NCCL_DEBUG=INFO for details)"
		remote = "remote process exited or there was a network error"
	)
	var gaveUp *ncclsock.Error
	if errors.As(f.Err, &gaveUp) {
		if gaveUp.Code == ncclsock.RemoteError {
			return remote
		}
		return system
	}
	s := f.Err.Error()
	if errors.Is(f.Err, syscall.ENETUNREACH) || strings.Contains(s, "network is unreachable") {
		return system
	}
	var wc *transport.WCError
	if errors.As(f.Err, &wc) || errors.Is(f.Err, io.EOF) || errors.Is(f.Err, syscall.ECONNREFUSED) || errors.Is(f.Err, syscall.ECONNRESET) {
		return remote
	}
	for _, peerGone := range []string{
		"closed by remote peer", "connection reset", "connection refused", ": EOF", "i/o timeout",
		"did not complete within", "no answer within", "no connection within", "checked in within",
	} {
		if strings.Contains(s, peerGone) {
			return remote
		}
	}
	return system
}

func (f *Failure) Unwrap() error { return f.Err }

// RunRank is the body of one rank process: join the communicator, sweep the
// sizes, and (rank 0) print the nccl-tests table.
func RunRank(ctx context.Context, o Options, re RankEnv, stdout io.Writer) (err error) {
	node := re.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	defer func() {
		if err != nil {
			err = &Failure{Node: node, Err: err}
		}
	}()
	if err := o.Validate(); err != nil {
		return err
	}
	env, err := ParseEnv(os.Getenv)
	if err != nil {
		return err
	}
	lg, err := newLog(env, node, re.LocalRank, stdout)
	if err != nil {
		return err
	}
	defer lg.Close()

	id, root, err := uniqueID(env, re)
	if err != nil {
		return err
	}
	if root != nil {
		defer root.Close()
	}
	var rec *trace.Recorder
	if o.Trace != "" {
		rec = trace.NewRecorder(0)
	}
	split, err := ParseSplit(os.Getenv)
	if err != nil {
		return err
	}
	comm, err := NewComm(ctx, CommConfig{Rank: re.Rank, NRanks: re.NRanks, LocalRank: re.LocalRank, Node: node, ID: id, Env: env, Log: lg, Recorder: rec, Split: split})
	if err != nil {
		if root != nil {
			select {
			case rerr := <-waitRoot(root):
				if rerr != nil {
					return fmt.Errorf("%w (%v)", rerr, err)
				}
			case <-time.After(time.Second):
			}
		}
		return err
	}
	defer comm.Close()
	if o.Coll.rooted() && o.Root >= comm.NRanks {
		return fmt.Errorf("-r %d: %s leaves %d ranks in this rank's communicator; root must be a rank from 0 to %d", o.Root, split.Var, comm.NRanks, comm.NRanks-1)
	}
	b := &benchRun{o: o, comm: comm, rec: rec, out: stdout, seed: id.Magic}
	if o.Train > 0 {
		if _, err := b.train(ctx, o.Train); err != nil {
			return err
		}
	}
	if err := b.sweep(ctx); err != nil {
		return err
	}
	lg.Info("INIT", "%s", ncclmsg.Destroy.Sprintf(comm.handle(), comm.Rank, comm.NRanks, re.LocalRank, 0, "Destroy"))
	if b.wrong > 0 {
		return fmt.Errorf("%d wrong elements", b.wrong)
	}
	return nil
}

func waitRoot(r *bootstrap.Root) <-chan error {
	c := make(chan error, 1)
	go func() { c <- r.Wait() }()
	return c
}

// uniqueID gets the communicator's id: from the launcher, from NCCL_COMM_ID, or
// (rank 0) by starting the bootstrap root on the bootstrap interface.
func uniqueID(env Env, re RankEnv) (bootstrap.UniqueID, *bootstrap.Root, error) {
	if env.CommID != "" {
		ap, err := netip.ParseAddrPort(env.CommID)
		if err != nil {
			return bootstrap.UniqueID{}, nil, fmt.Errorf("NCCL_COMM_ID=%q: want ip:port", env.CommID)
		}
		h := fnv.New64a()
		h.Write([]byte(env.CommID))
		id := bootstrap.UniqueID{Magic: h.Sum64(), Root: ap}
		if re.Rank != 0 {
			return id, nil, nil
		}
		root, err := bootstrap.NewRoot(ap, id.Magic, re.NRanks, env.Timeout)
		return id, root, err
	}
	if re.ID != "" {
		id, err := bootstrap.ParseUniqueID(re.ID)
		return id, nil, err
	}
	if re.Rank != 0 {
		return bootstrap.UniqueID{}, nil, fmt.Errorf("rank %d has no unique id (%s is empty)", re.Rank, EnvID)
	}
	all, err := listIfaces()
	if err != nil {
		return bootstrap.UniqueID{}, nil, err
	}
	devs := socketDevices(env.SocketIfname, all)
	if len(devs) == 0 {
		return bootstrap.UniqueID{}, nil, fmt.Errorf("bootstrap: no interface matches NCCL_SOCKET_IFNAME=%q (interfaces: %s)", env.SocketIfname, devList(all, false))
	}
	root, err := bootstrap.NewRoot(netip.AddrPortFrom(devs[0].IP, 0), 0, re.NRanks, env.Timeout)
	if err != nil {
		return bootstrap.UniqueID{}, nil, err
	}
	if re.IDOut != nil {
		if _, err := fmt.Fprintln(re.IDOut, root.ID().String()); err != nil {
			root.Close()
			return bootstrap.UniqueID{}, nil, fmt.Errorf("publish unique id: %w", err)
		}
	}
	return root.ID(), root, nil
}

// benchRun is one rank's sweep.
type benchRun struct {
	o       Options
	comm    *Comm
	rec     *trace.Recorder
	out     io.Writer
	seed    uint64
	wrong   int64
	bwSum   float64
	bwCount int
	send    []byte
	recv    []byte
	scratch []byte
}

// geometry returns nccl-tests' count, the bytes reported, and buffer sizes.
func (b *benchRun) geometry(size int64, t DataType) (count, bytes, sendLen, recvLen int) {
	n, es := b.comm.NRanks, t.Size()
	switch b.o.Coll {
	case AllGather:
		count = int(size) / es / n
		return count, count * n * es, count * es, count * n * es
	case ReduceScatter:
		count = int(size) / es / n
		return count, count * n * es, count * n * es, count * es
	case AllToAll:
		count = int(size) / es / n
		return count, count * n * es, count * n * es, count * n * es
	}
	count = int(size) / es
	return count, count * es, count * es, count * es
}

func (b *benchRun) sweep(ctx context.Context) error {
	o, c := b.o, b.comm
	types, _ := parseTypes(o.DType)
	ops, _ := parseOps(o.Op)
	if !o.Coll.reduces() {
		ops = []Op{Sum}
	}
	_, _, sl, rl := b.geometry(o.MaxBytes, Float32)
	b.send, b.recv = make([]byte, sl), make([]byte, rl)
	if o.Coll == AllToAll {
		b.scratch = make([]byte, sl)
	}
	if c.WorldRank == 0 {
		h := Header{Program: string(o.Coll) + "_perf", NCCL: versionString(b.comm.env.Release), NThreads: o.NThreads, NGpus: o.NGpus, MinBytes: o.MinBytes, MaxBytes: o.MaxBytes,
			Step: o.StepFactor, StepIsFactor: o.StepFactor > 1, Warmup: o.Warmup, Iters: o.Iters, AggIters: 1, Check: o.Check}
		if o.StepFactor <= 1 {
			h.Step = o.StepBytes
		}
		nodes, pids, locals, colors := c.Nodes(), c.Pids(), c.LocalRanks(), c.Colors()
		for r := range nodes {
			h.Devices = append(h.Devices, DeviceLine{Rank: r, Group: colors[r], Pid: pids[r], Host: nodes[r], Device: locals[r]})
		}
		WriteHeader(b.out, h)
	}
	// Warm up at the largest and the smallest size, as nccl-tests does.
	for _, size := range []int64{o.MaxBytes, o.MinBytes} {
		k := b.call(size, types[0], ops[0], false)
		for range o.Warmup {
			if err := b.timed(ctx, k, "warmup"); err != nil {
				return err
			}
		}
	}
	for _, size := range o.Sizes() {
		for _, t := range types {
			for _, op := range ops {
				if err := b.row(ctx, size, t, op); err != nil {
					return err
				}
			}
		}
	}
	if err := b.writeTrace(ctx); err != nil {
		return err
	}
	usage, err := b.gatherUsage(ctx)
	if err != nil {
		return err
	}
	if c.WorldRank == 0 {
		avg := 0.0
		if b.bwCount > 0 {
			avg = b.bwSum / float64(b.bwCount)
		}
		WriteFooter(b.out, b.wrong, avg)
		for r, u := range usage {
			fmt.Fprintf(b.out, "# Rank %2d on %10s: cpu %.2f s (user %.2f, sys %.2f), max RSS %d MiB\n", r, c.Nodes()[r], u[0]+u[1], u[0], u[1], int(u[2])>>10)
		}
	}
	return nil
}

// gatherUsage collects every rank's CPU seconds (user, sys) and peak RSS (KiB).
func (b *benchRun) gatherUsage(ctx context.Context) ([][3]float64, error) {
	var msg [24]byte
	user, sys, maxRSS := selfUsage()
	binary.LittleEndian.PutUint64(msg[0:], math.Float64bits(user))
	binary.LittleEndian.PutUint64(msg[8:], math.Float64bits(sys))
	binary.LittleEndian.PutUint64(msg[16:], math.Float64bits(maxRSS))
	all, err := b.comm.AllGather(ctx, msg[:])
	if err != nil {
		return nil, fmt.Errorf("gather resource usage: %w", err)
	}
	out := make([][3]float64, len(all))
	for r, m := range all {
		for i := range 3 {
			out[r][i] = math.Float64frombits(binary.LittleEndian.Uint64(m[8*i:]))
		}
	}
	return out, nil
}

func (b *benchRun) call(size int64, t DataType, op Op, inPlace bool) call {
	count, _, sl, rl := b.geometry(size, t)
	k := call{coll: b.o.Coll, t: t, op: op, root: -1, count: count, algo: b.comm.env.Algo}
	if b.o.Coll.rooted() {
		k.root = b.o.Root
	}
	k.send, k.recv = b.send[:sl], b.recv[:rl]
	if inPlace {
		es, r := t.Size(), b.comm.Rank
		switch b.o.Coll {
		case AllGather:
			k.send = k.recv[r*count*es : (r+1)*count*es]
		case ReduceScatter:
			k.recv = b.send[r*count*es : (r+1)*count*es]
			k.send = b.send[:sl]
		default:
			k.send = k.recv
		}
	}
	return k
}

func (b *benchRun) timed(ctx context.Context, k call, what string) error {
	start := time.Now()
	err := b.comm.run(ctx, b.prepare(k))
	b.rec.Add(string(k.coll), what, start, map[string]any{"bytes": len(k.recv), "algo": k.algo})
	return err
}

// prepare gives in-place alltoall a private copy of its input (the exchange
// must not overwrite a block it has yet to send).
func (b *benchRun) prepare(k call) call {
	if k.coll == AllToAll && sameStart(k.send, k.recv) {
		copy(b.scratch, k.recv)
		k.send = b.scratch[:len(k.recv)]
	}
	return k
}

func (b *benchRun) row(ctx context.Context, size int64, t DataType, op Op) error {
	c, o := b.comm, b.o
	count, bytes, _, _ := b.geometry(size, t)
	row := Row{Bytes: int64(bytes), Count: int64(count), Type: t.String(), RedOp: op.String(), Root: -1}
	if !o.Coll.reduces() {
		row.RedOp = "none"
	}
	if o.Coll.rooted() {
		row.Root = o.Root
	}
	for _, inPlace := range []bool{false, true} {
		k := b.call(size, t, op, inPlace)
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		phase := "out-of-place"
		if inPlace {
			phase = "in-place"
		}
		start := time.Now()
		for range o.Iters {
			if err := b.timed(ctx, k, phase); err != nil {
				return err
			}
		}
		sec := time.Since(start).Seconds() / float64(o.Iters)
		wrong := int64(-1)
		if o.Check > 0 && !(inPlace && o.Coll == SendRecv) {
			// The trace shows the check's local work (no communication) as slices of
			// their own: a rank short of CPU is slow here, where no peer hides it.
			t0 := time.Now()
			b.initData(k)
			b.rec.Add("init data", "check", t0, map[string]any{"bytes": len(k.send)})
			if err := b.timed(ctx, k, "check"); err != nil {
				return err
			}
			t0 = time.Now()
			wrong = b.checkData(k)
			b.rec.Add("verify", "check", t0, map[string]any{"bytes": len(k.recv)})
		}
		var msg [16]byte
		binary.LittleEndian.PutUint64(msg[:], math.Float64bits(sec))
		binary.LittleEndian.PutUint64(msg[8:], uint64(wrong))
		all, err := c.AllGather(ctx, msg[:])
		if err != nil {
			return err
		}
		var times []float64
		var wsum int64 = -1
		for _, m := range all {
			times = append(times, math.Float64frombits(binary.LittleEndian.Uint64(m)))
			if w := int64(binary.LittleEndian.Uint64(m[8:])); w >= 0 {
				wsum = max(wsum, 0) + w
			}
		}
		sec = reduceTimes(times, o.Average)
		res := Result{TimeUs: sec * 1e6, Wrong: wsum}
		if sec > 0 {
			res.AlgBw = float64(bytes) / 1e9 / sec
		}
		res.BusBw = res.AlgBw * o.Coll.BusBwFactor(c.NRanks)
		b.bwSum += res.BusBw
		b.bwCount++
		if wsum > 0 {
			b.wrong += wsum
		}
		if inPlace {
			row.In = res
		} else {
			row.Out = res
		}
	}
	if c.WorldRank == 0 {
		WriteRow(b.out, row)
	}
	return nil
}

func reduceTimes(t []float64, avg int) float64 {
	switch avg {
	case 0:
		return t[0]
	case 2:
		m := t[0]
		for _, v := range t {
			m = min(m, v)
		}
		return m
	case 3:
		m := t[0]
		for _, v := range t {
			m = max(m, v)
		}
		return m
	}
	s := 0.0
	for _, v := range t {
		s += v
	}
	return s / float64(len(t))
}

// initData writes the inputs of call k for this rank.
func (b *benchRun) initData(k call) {
	r, es := b.comm.Rank, k.t.Size()
	switch k.coll {
	case AllGather:
		fill(k.t, k.send, b.seed, r, 0, k.count)
	default:
		fill(k.t, k.send, b.seed, r, 0, len(k.send)/es)
	}
}

// checkData counts the elements of this rank's output that differ from the
// reference computed here from every rank's inputs.
func (b *benchRun) checkData(k call) int64 {
	r, n, seed := b.comm.Rank, b.comm.NRanks, b.seed
	var wrong int64
	at := func(i int) float64 { return getValue(k.t, k.recv[4*i:]) }
	switch k.coll {
	case AllReduce:
		for i := range k.count {
			if at(i) != float64(expectReduced(k.op, seed, n, i)) {
				wrong++
			}
		}
	case Reduce:
		if r == k.root {
			for i := range k.count {
				if at(i) != float64(expectReduced(k.op, seed, n, i)) {
					wrong++
				}
			}
		}
	case Broadcast:
		for i := range k.count {
			if at(i) != float64(genValue(seed, k.root, i)) {
				wrong++
			}
		}
	case AllGather:
		for q := range n {
			for i := range k.count {
				if at(q*k.count+i) != float64(genValue(seed, q, i)) {
					wrong++
				}
			}
		}
	case ReduceScatter:
		for i := range k.count {
			if at(i) != float64(expectReduced(k.op, seed, n, r*k.count+i)) {
				wrong++
			}
		}
	case AllToAll:
		for q := range n {
			for i := range k.count {
				if at(q*k.count+i) != float64(genValue(seed, q, r*k.count+i)) {
					wrong++
				}
			}
		}
	case SendRecv:
		prev := (r - 1 + n) % n
		for i := range k.count {
			if at(i) != float64(genValue(seed, prev, i)) {
				wrong++
			}
		}
	}
	return wrong
}

// writeTrace gathers every rank's timeline on rank 0 and writes the Chrome trace.
func (b *benchRun) writeTrace(ctx context.Context) error {
	if b.o.Trace == "" {
		return nil
	}
	data, err := trace.Marshal(b.rec.Events())
	if err != nil {
		return err
	}
	all, err := b.comm.AllGather(ctx, data)
	if err != nil {
		return fmt.Errorf("gather trace events: %w", err)
	}
	if b.comm.WorldRank != 0 {
		return nil
	}
	nodes := b.comm.Nodes()
	var ranks []trace.Rank
	for r, raw := range all {
		evs, err := trace.Unmarshal(raw)
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
		ranks = append(ranks, trace.Rank{Rank: r, Node: nodes[r], Events: evs})
	}
	if err := writeFileAtomic(b.o.Trace, func(w io.Writer) error { return trace.WriteChrome(w, ranks) }); err != nil {
		return fmt.Errorf("write trace %s: %w", b.o.Trace, err)
	}
	fmt.Fprintf(b.out, "# Trace of %d ranks written to %s (Chrome trace JSON: open in Perfetto)\n", len(ranks), b.o.Trace)
	return nil
}

// writeFileAtomic writes path through a new file in the same directory renamed
// over it, so that a reader (a lab's learner polling a workload's trace) never
// sees half a file, and a symlink planted at path is replaced, not followed.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
