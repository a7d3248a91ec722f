package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/commlab/commlab/bench/bootstrap"
	"github.com/commlab/commlab/bench/ncclmsg"
	"github.com/commlab/commlab/bench/ncclsock"
	"github.com/commlab/commlab/bench/trace"
	"github.com/commlab/commlab/bench/transport"
)

// rankInfo is what each rank publishes during bootstrap.
type rankInfo struct {
	Rank      int            `json:"rank"`
	Node      string         `json:"node"`
	NodeID    string         `json:"node_id"`
	Pid       int            `json:"pid"`
	LocalRank int            `json:"local_rank"`
	Net       string         `json:"net"`
	Addr      transport.Addr `json:"addr"`
	Color     int            `json:"color"` // the communicator it joins (Split)
}

// Comm is a communicator: the ranks, their connections, rings and trees. Rank and
// NRanks are within the communicator; with a Split, the job's world is larger
// (World, WorldRank), and its bootstrap (barriers, control data) spans the world,
// as nccl-tests' MPI_COMM_WORLD does.
type Comm struct {
	Rank, NRanks int
	WorldRank    int
	env          Env
	log          *ncclLog
	info         []rankInfo // this communicator's ranks, info[i].Rank their world rank
	world        []rankInfo // every rank of the job
	bs           *bootstrap.Bootstrap
	ep           *transport.Endpoint
	netKind      transport.Kind
	nch          int
	slice        int // pipeline slice in bytes
	rec          *trace.Recorder
	id           uint64

	mu    sync.Mutex
	sends map[[2]int]transport.Conn // (peer, channel)
	recvs map[[2]int]transport.Conn
	p2p   map[[2]int]bool // pairs printed as p2p connections

	bufMu     sync.Mutex
	tmps      [][]byte
	scratches [][2][]byte

	abortMu  sync.Mutex
	abortErr error
}

// CommConfig is what a rank needs to join a communicator.
type CommConfig struct {
	Rank, NRanks, LocalRank int
	Node                    string // node name, for logs and the device table
	ID                      bootstrap.UniqueID
	Env                     Env
	Log                     *ncclLog
	Recorder                *trace.Recorder
	Split                   Split // the communicator this rank joins
}

// nodeIdentity tells ranks of one node apart from others: the node name given
// by the launcher, else the host name plus network namespace.
func nodeIdentity(node string) string {
	ns, _ := os.Readlink("/proc/self/ns/net")
	h, _ := os.Hostname()
	if node == "" {
		node = h
	}
	return node + "/" + ns
}

// pickDevices returns the bootstrap interface, the NET devices and the NET kind.
func pickDevices(env Env, lg *ncclLog, all []transport.Device) (boot transport.Device, devs []transport.Device, kind transport.Kind, err error) {
	sock := socketDevices(env.SocketIfname, all)
	if len(sock) == 0 {
		if env.SocketIfname != "" {
			return boot, nil, 0, fmt.Errorf("no interface matches NCCL_SOCKET_IFNAME=%q (interfaces: %s)", env.SocketIfname, devList(all, false))
		}
		return boot, nil, 0, fmt.Errorf("no usable network interface (interfaces: %s)", devList(all, false))
	}
	boot = sock[0]
	// As NCCL 2.28 initialises its NET plugins: IB first, then Socket.
	if !env.IBDisable && env.Net != "Socket" {
		ib := ibDevices(env.IBHCA, all)
		if len(ib) == 0 {
			lg.Info("INIT|NET", "%s", ncclmsg.IBNoDevice.Sprintf())
		}
		lg.Info("INIT|NET", "%s", ncclmsg.IBUsing.Sprintf(usingList(ib, true), "[RO]", boot.Name, boot.IP.String()+"<0>"))
		if len(ib) > 0 {
			usingNet(lg, "IB")
			return boot, ib, transport.IB, nil
		}
		if env.Net == "IB" {
			return boot, nil, 0, errors.New("NCCL_NET=IB but no RoCE device found (emulated HCAs are interfaces named rdma*, or those NCCL_IB_HCA names)")
		}
	} else if env.IBDisable && env.Net == "IB" {
		return boot, nil, 0, errors.New("NCCL_NET=IB contradicts NCCL_IB_DISABLE=1")
	}
	lg.Info("INIT|NET", "%s", ncclmsg.PluginFailed.Sprintf("IB"))
	lg.Info("INIT|NET", "%s", ncclmsg.SocketUsing.Sprintf(usingList(sock, false)))
	usingNet(lg, "Socket")
	return boot, sock, transport.Socket, nil
}

// usingList is the device list of NCCL's "NET/... : Using" lines: " [i]dev..." each.
func usingList(devs []transport.Device, ib bool) string {
	if len(devs) == 0 {
		return ""
	}
	return " " + devList(devs, ib)
}

// usingNet prints what NCCL prints once a NET plugin is chosen.
func usingNet(lg *ncclLog, name string) {
	lg.Info("INIT|NET", "%s", ncclmsg.PluginInit.Sprintf(name))
	lg.Info("INIT|NET", "%s", ncclmsg.PluginAssign.Sprintf(name))
	lg.Info("INIT", "%s", ncclmsg.UsingNetwork.Sprintf(name))
}

// NewComm joins the communicator: bootstrap, exchange of addresses, rings and
// trees, and their connections, logging as NCCL does.
func NewComm(ctx context.Context, cfg CommConfig) (*Comm, error) {
	env, lg := cfg.Env, cfg.Log
	ifaces, err := listIfaces()
	if err != nil {
		return nil, err
	}
	if sock := socketDevices(env.SocketIfname, ifaces); len(sock) > 0 {
		lg.Info("BOOTSTRAP", "%s", ncclmsg.Bootstrap.Sprintf(fmt.Sprintf(" %s:%s<0>", sock[0].Name, sock[0].IP)))
	}
	if cfg.Rank == 0 {
		lg.Version()
	}
	for _, s := range env.Set {
		lg.Info(s.subs, "%s", s.text)
	}
	boot, devs, kind, err := pickDevices(env, lg, ifaces)
	if err != nil {
		return nil, err
	}
	c := &Comm{
		Rank: cfg.Rank, NRanks: cfg.NRanks, WorldRank: cfg.Rank, env: env, log: lg, netKind: kind, nch: env.Channels(),
		rec: cfg.Recorder, id: cfg.ID.Magic,
		sends: map[[2]int]transport.Conn{}, recvs: map[[2]int]transport.Conn{}, p2p: map[[2]int]bool{},
	}
	// TCP connects (bootstrap, NET/Socket, RoCE setup) behave as in the release emulated.
	connect := ncclsock.Dialer{Release: env.Release, Log: lg}
	c.slice = max(env.BuffSize/8, 4096) &^ 3
	ep, err := transport.Listen(transport.Config{
		CommID: cfg.ID.Magic, Rank: cfg.Rank,
		UnixName: fmt.Sprintf("commlab-bench-%016x-%d", cfg.ID.Magic, cfg.Rank),
		NetDevs:  devs, Net: kind, NSocks: env.NSocks * env.NThreads,
		IBTimeout: env.IBAckTimeout(), IBRetry: env.IBRetryCnt, RocePort: env.RocePort,
		IBWindow: env.BuffSize / 4,
		ShmDir:   env.ShmDir, SetupTimeout: env.Timeout,
		Connect: connect,
		OnError: func(err error) {
			c.warnNCCL(err)
			c.abort(err)
		},
	})
	if err != nil {
		return nil, err
	}
	c.ep = ep
	bs, err := bootstrap.Init(ctx, cfg.ID, cfg.Rank, cfg.NRanks, boot.IP, env.Timeout, connect)
	if err != nil {
		ep.Close()
		return nil, err
	}
	c.bs = bs
	me := rankInfo{Rank: cfg.Rank, Node: cfg.Node, NodeID: nodeIdentity(cfg.Node), Pid: os.Getpid(), LocalRank: cfg.LocalRank, Net: kindName(kind), Addr: ep.Addr(),
		Color: cfg.Split.Color(cfg.Rank)}
	b, _ := json.Marshal(me)
	all, err := bs.AllGather(ctx, b)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("exchange rank information: %w", err)
	}
	c.world = make([]rankInfo, cfg.NRanks)
	for i, raw := range all {
		if err := json.Unmarshal(raw, &c.world[i]); err != nil {
			c.Close()
			return nil, fmt.Errorf("rank %d sent bad information: %w", i, err)
		}
		if c.world[i].Net != me.Net && c.world[i].NodeID != me.NodeID {
			c.Close()
			return nil, fmt.Errorf("NET transport mismatch: rank %d uses NET/%s, rank %d (%s) uses NET/%s; set NCCL_IB_DISABLE or NCCL_NET alike on every node",
				cfg.Rank, me.Net, i, c.world[i].Node, c.world[i].Net)
		}
	}
	c.split(me.Color)
	lg.Info("INIT", "%s", ncclmsg.InitStart.Sprintf(initFunc, c.handle(), c.Rank, c.NRanks, cfg.LocalRank, cfg.LocalRank, 0, c.id))
	if err := c.connectAll(ctx); err != nil {
		c.Close()
		return nil, err
	}
	lg.Info("INIT", "%s", ncclmsg.InitComplete.Sprintf(initFunc, c.handle(), c.Rank, c.NRanks, cfg.LocalRank, cfg.LocalRank, 0, c.id))
	return c, nil
}

// split keeps the ranks of one color, in world rank order (MPI_Comm_split with the
// world rank as key): each color's communicator gets its own id, as each of
// nccl-tests' split communicators gets its own ncclUniqueId.
func (c *Comm) split(color int) {
	c.info = nil
	for _, r := range c.world {
		if r.Color == color {
			if r.Rank == c.WorldRank {
				c.Rank = len(c.info)
			}
			c.info = append(c.info, r)
		}
	}
	c.NRanks = len(c.info)
	if len(c.info) < len(c.world) {
		c.id = splitmix(c.id ^ uint64(color+1))
	}
}

// splitmix is SplitMix64's finaliser: distinct colors get unrelated ids.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// initFunc is the API call NCCL names in the Init lines; nccl-tests calls
// ncclCommInitRank, which NCCL 2.28 runs as ncclCommInitRankConfig.
const initFunc = "ncclCommInitRankConfig"

// handle stands for the ncclComm_t pointer NCCL prints.
func (c *Comm) handle() uint64 { return c.id & 0xffffffffffff }

func kindName(k transport.Kind) string {
	if k == transport.IB {
		return "IB"
	}
	return "Socket"
}

func (c *Comm) sameNode(peer int) bool { return c.info[peer].NodeID == c.info[c.Rank].NodeID }

// kindFor chooses the transport to a peer as NCCL does: P2P, then SHM within a
// node, else the network.
func (c *Comm) kindFor(peer int) transport.Kind {
	if c.sameNode(peer) {
		if !c.env.P2PDisable && c.env.P2PLevel != "LOC" && c.env.P2PLevel != "0" {
			return transport.P2P
		}
		if !c.env.SHMDisable {
			return transport.SHM
		}
	}
	return c.netKind
}

// logConn prints the line NCCL's transport prints for a connection from rank
// src to rank dst (the sender's line for P2P and SHM, both ends' for NET).
func (c *Comm) logConn(ch, connIndex, src, dst int, k transport.Kind, dev int, side string) {
	s, d := c.info[src].LocalRank, c.info[dst].LocalRank
	switch k {
	case transport.P2P:
		c.log.Info("INIT|P2P", "%s", ncclmsg.ViaP2P.Sprintf(ch, connIndex, src, s, dst, d, "CUMEM", "", ""))
	case transport.SHM:
		c.log.Info("INIT|SHM", "%s", ncclmsg.ViaSHM.Sprintf(ch, src, s, dst, d, "direct", "direct"))
	case transport.Socket, transport.IB:
		m := ncclmsg.ViaNetSend
		if side == "receive" {
			m = ncclmsg.ViaNetRecv
		}
		c.log.Info("INIT|NET", "%s", m.Sprintf(ch, connIndex, src, s, dst, d, kindName(k), dev, "", "", ""))
	}
}

// ringNext and ringPrev: ranks are placed node by node, so the identity ring
// crosses each node boundary once, like NCCL's topology-aware rings.
func (c *Comm) ringNext() int { return (c.Rank + 1) % c.NRanks }
func (c *Comm) ringPrev() int { return (c.Rank - 1 + c.NRanks) % c.NRanks }

// tree returns the parent and children of v in tree t (0 or 1) rooted at root:
// a binary heap over ranks relative to the root, the second tree mirrored, so
// that the pair approximates NCCL's double binary tree.
func (c *Comm) tree(t, root int) (parent int, children []int) {
	n := c.NRanks
	rel := func(r int) int {
		if t == 0 {
			return (r - root + n) % n
		}
		return (root - r + n) % n
	}
	abs := func(v int) int {
		if t == 0 {
			return (v + root) % n
		}
		return (root - v + n) % n
	}
	v := rel(c.Rank)
	parent = -1
	if v > 0 {
		parent = abs((v - 1) / 2)
	}
	for _, ch := range []int{2*v + 1, 2*v + 2} {
		if ch < n {
			children = append(children, abs(ch))
		}
	}
	return parent, children
}

type link struct{ peer, ch int }

// connectAll connects every channel's ring and tree at init, printing NCCL's lines.
func (c *Comm) connectAll(ctx context.Context) error {
	if c.Rank == 0 {
		ring := ""
		w := len(strconv.Itoa(c.NRanks - 1)) // " %*d", rings.cc:15
		for i := range c.NRanks {
			ring += fmt.Sprintf(" %*d", w, i)
		}
		for ch := range c.nch {
			c.log.Info("INIT", "%s%s", ncclmsg.RingPrefix.Sprintf(ch, c.nch), ring)
		}
	}
	trees := ""
	for ch := range c.nch {
		p, kids := c.tree(ch%2, 0)
		k := []int{-1, -1, -1}
		copy(k, kids)
		trees += fmt.Sprintf(" [%d] %d/%d/%d->%d->%d", ch, k[0], k[1], k[2], c.Rank, p)
	}
	c.log.Info("INIT", "%s", ncclmsg.Trees.Sprintf(trees))
	c.log.Info("INIT", "%s", ncclmsg.P2PChunksize.Sprintf(c.slice))
	if c.NRanks == 1 {
		c.connectedRings()
		c.log.Info("INIT", "%s", ncclmsg.ConnTrees.Sprintf())
		return nil
	}
	var ringS, ringR, treeS, treeR []link
	for ch := range c.nch {
		ringS = append(ringS, link{c.ringNext(), ch})
		ringR = append(ringR, link{c.ringPrev(), ch})
	}
	if err := c.connect(ctx, ringS, ringR, 0); err != nil {
		return err
	}
	c.connectedRings()
	for ch := range c.nch {
		p, kids := c.tree(ch%2, 0)
		for _, k := range append(kids, p) {
			if k >= 0 && !c.has(k, ch) {
				treeS = append(treeS, link{k, ch})
				treeR = append(treeR, link{k, ch})
			}
		}
	}
	if err := c.connect(ctx, treeS, treeR, 0); err != nil {
		return err
	}
	c.log.Info("INIT", "%s", ncclmsg.ConnTrees.Sprintf())
	return nil
}

// warnNCCL prints the WARN line NCCL prints for err, if NCCL has one (socket
// connect failures print theirs where they happen).
func (c *Comm) warnNCCL(err error) {
	var w interface {
		error
		NCCLSrc() string
	}
	if errors.As(err, &w) {
		c.log.Warn(w.NCCLSrc(), "%s", w.Error())
	}
}

// connectedRings prints NCCL's line; no PXN and no GPU Direct RDMA here.
func (c *Comm) connectedRings() { c.log.Info("INIT", "%s", ncclmsg.ConnRings.Sprintf(0, 0)) }

func (c *Comm) has(peer, ch int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, s := c.sends[[2]int{peer, ch}]
	_, r := c.recvs[[2]int{peer, ch}]
	return s && r
}

// connect dials sends and accepts receives concurrently (dials never wait for
// the peer's Accept call, so the order across ranks cannot deadlock).
func (c *Comm) connect(ctx context.Context, sends, recvs []link, connIndex int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(sends)+len(recvs))
	for _, l := range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.sendConn(ctx, l.peer, l.ch, connIndex); err != nil {
				errs <- err
			}
		}()
	}
	for _, l := range recvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.recvConn(ctx, l.peer, l.ch, connIndex); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (c *Comm) sendConn(ctx context.Context, peer, ch, connIndex int) (transport.Conn, error) {
	k := [2]int{peer, ch}
	c.mu.Lock()
	conn, ok := c.sends[k]
	c.mu.Unlock()
	if ok {
		return conn, nil
	}
	kind := c.kindFor(peer)
	dev := ch
	conn, err := c.ep.Dial(ctx, kind, c.info[peer].Rank, c.info[peer].Addr, ch, dev)
	if err != nil {
		c.warnNCCL(err)
		return nil, fmt.Errorf("channel %02d: rank %d -> rank %d (%s): %w", ch, c.Rank, peer, c.info[peer].Node, err)
	}
	c.mu.Lock()
	c.sends[k] = conn
	c.mu.Unlock()
	c.logConn(ch, connIndex, c.Rank, peer, kind, conn.Dev(), "send")
	return conn, nil
}

func (c *Comm) recvConn(ctx context.Context, peer, ch, connIndex int) (transport.Conn, error) {
	k := [2]int{peer, ch}
	c.mu.Lock()
	conn, ok := c.recvs[k]
	c.mu.Unlock()
	if ok {
		return conn, nil
	}
	conn, err := c.ep.Accept(ctx, c.info[peer].Rank, ch)
	if err != nil {
		return nil, fmt.Errorf("channel %02d: rank %d <- rank %d (%s): %w", ch, c.Rank, peer, c.info[peer].Node, err)
	}
	c.mu.Lock()
	c.recvs[k] = conn
	c.mu.Unlock()
	if conn.Kind().IsNet() {
		c.logConn(ch, connIndex, peer, c.Rank, conn.Kind(), conn.Dev(), "receive")
	}
	return conn, nil
}

// abort closes every connection so that blocked transfers return; the
// communicator is unusable afterwards, as after ncclCommAbort.
func (c *Comm) abort(err error) {
	c.abortMu.Lock()
	if c.abortErr == nil {
		c.abortErr = err
	}
	c.abortMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.sends {
		conn.Close()
	}
	for _, conn := range c.recvs {
		conn.Close()
	}
}

// aborted returns the reason of an abort, if any.
func (c *Comm) aborted() error {
	c.abortMu.Lock()
	defer c.abortMu.Unlock()
	return c.abortErr
}

// logIBStats prints the RoCE emulation's counters per queue pair (NET subsystem),
// the emulation's stand-in for the NIC's retransmission counters.
func (c *Comm) logIBStats() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, conn := range c.sends {
		if st, ok := transport.IBStatsOf(conn); ok {
			c.log.Info("NET", "NET/IB : QP to rank %d channel %02d: %d packets, %d retransmitted, %d timeouts, %d NAKs", k[0], k[1], st.Packets, st.Retransmits, st.Timeouts, st.Naks)
		}
	}
}

// Close releases the communicator.
func (c *Comm) Close() {
	c.logIBStats()
	c.abort(transport.ErrClosed)
	if c.ep != nil {
		c.ep.Close()
	}
	if c.bs != nil {
		c.bs.Close()
	}
}

// AllGather exchanges small control data over the bootstrap ring.
func (c *Comm) AllGather(ctx context.Context, b []byte) ([][]byte, error) {
	return c.bs.AllGather(ctx, b)
}

// Barrier waits for every rank.
func (c *Comm) Barrier(ctx context.Context) error { return c.bs.Barrier(ctx) }

// Nodes returns the node name of every rank of the job (the world).
func (c *Comm) Nodes() []string {
	out := make([]string, len(c.world))
	for i, r := range c.world {
		out[i] = r.Node
	}
	return out
}

// Pids returns the process id of every rank of the job.
func (c *Comm) Pids() []int {
	out := make([]int, len(c.world))
	for i, r := range c.world {
		out[i] = r.Pid
	}
	return out
}

// LocalRanks returns every job rank's index within its node.
func (c *Comm) LocalRanks() []int {
	out := make([]int, len(c.world))
	for i, r := range c.world {
		out[i] = r.LocalRank
	}
	return out
}

// Colors returns the communicator (Split color) of every rank of the job.
func (c *Comm) Colors() []int {
	out := make([]int, len(c.world))
	for i, r := range c.world {
		out[i] = r.Color
	}
	return out
}
