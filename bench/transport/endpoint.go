package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/commlab/commlab/bench/ncclsock"
)

// Device is a NIC a rank may use for NET transports.
type Device struct {
	Name string
	IP   netip.Addr
	MTU  int
}

// Config describes one rank's endpoint.
type Config struct {
	CommID uint64 // shared by all ranks of a communicator; rejects strays
	Rank   int
	// UnixName is the abstract Unix socket name for P2P and SHM; empty disables them.
	UnixName string
	// NetDevs are the NICs for NET transports, in NCCL's device order.
	NetDevs []Device
	// Net is Socket or IB: what this rank dials for NET connections.
	Net Kind
	// NSocks is the number of TCP sockets per NET/Socket connection
	// (NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD).
	NSocks int
	// IBTimeout is the RoCE emulation's ack timeout (4.096 µs × 2^NCCL_IB_TIMEOUT).
	IBTimeout time.Duration
	// IBRetry is NCCL_IB_RETRY_CNT: retransmissions without progress before error 12.
	IBRetry int
	// IBWindow bounds the bytes in flight per RoCE queue pair (0: 1 MiB).
	IBWindow int
	// RocePort is the UDP destination port of the RoCE emulation (4791).
	RocePort int
	// ShmDir holds the SHM segments (/dev/shm).
	ShmDir string
	// SetupTimeout bounds every connection handshake.
	SetupTimeout time.Duration
	// Connect dials TCP (NET/Socket, the RoCE emulation's setup) as NCCL's
	// socket layer does: retries, return codes and log lines.
	Connect ncclsock.Dialer
	// OnError, if set, is called (from its own goroutine) when a connection
	// fails asynchronously, e.g. a RoCE work completion error.
	OnError func(error)
}

// Addr is what a rank publishes so that peers can connect to it.
type Addr struct {
	Unix string           `json:"unix,omitempty"`
	Net  []netip.AddrPort `json:"net,omitempty"`
}

const magicHeader = 0x636f6d6d6c616221 // "commlab!"

type connKey struct{ src, ch int }

// Endpoint is a rank's listening side plus its dialer.
type Endpoint struct {
	cfg   Config
	unix  *net.UnixListener
	tcp   []*net.TCPListener
	addr  Addr
	mu    sync.Mutex
	ready map[connKey]chan Conn
	socks map[connKey][]net.Conn
	paths map[[2]netip.Addr]*ibCC // RoCE congestion control per local NIC and peer
	errs  chan error
	done  chan struct{}
	wg    sync.WaitGroup
}

// Listen opens the endpoint's listeners: one abstract Unix socket and one TCP
// listener per NET device.
func Listen(cfg Config) (*Endpoint, error) {
	if cfg.NSocks < 1 {
		cfg.NSocks = 1
	}
	if cfg.SetupTimeout <= 0 {
		cfg.SetupTimeout = 30 * time.Second
	}
	if cfg.RocePort == 0 {
		cfg.RocePort = 4791
	}
	if cfg.ShmDir == "" {
		cfg.ShmDir = "/dev/shm"
	}
	e := &Endpoint{cfg: cfg, ready: map[connKey]chan Conn{}, socks: map[connKey][]net.Conn{},
		paths: map[[2]netip.Addr]*ibCC{}, done: make(chan struct{})}
	if cfg.UnixName != "" {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + cfg.UnixName, Net: "unix"})
		if err != nil {
			return nil, fmt.Errorf("listen on unix socket @%s: %w", cfg.UnixName, err)
		}
		e.unix = ln
		e.addr.Unix = cfg.UnixName
		e.wg.Add(1)
		go e.acceptLoop(ln)
	}
	for _, d := range cfg.NetDevs {
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(d.IP, 0)))
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("listen on %s (%s): %w", d.Name, d.IP, err)
		}
		e.tcp = append(e.tcp, ln)
		e.addr.Net = append(e.addr.Net, ln.Addr().(*net.TCPAddr).AddrPort())
		e.wg.Add(1)
		go e.acceptLoop(ln)
	}
	return e, nil
}

// Addr is the address to publish to peers.
func (e *Endpoint) Addr() Addr { return e.addr }

// Close stops the listeners; established Conns stay open.
func (e *Endpoint) Close() {
	select {
	case <-e.done:
		return
	default:
	}
	close(e.done)
	if e.unix != nil {
		e.unix.Close()
	}
	for _, l := range e.tcp {
		l.Close()
	}
	e.wg.Wait()
	e.mu.Lock()
	for _, ss := range e.socks {
		for _, s := range ss {
			s.Close()
		}
	}
	e.socks = map[connKey][]net.Conn{}
	e.mu.Unlock()
}

func (e *Endpoint) slot(k connKey) chan Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.ready[k]
	if !ok {
		c = make(chan Conn, 1)
		e.ready[k] = c
	}
	return c
}

// Accept waits for the connection that rank src dials to this rank on channel ch.
func (e *Endpoint) Accept(ctx context.Context, src, ch int) (Conn, error) {
	slot := e.slot(connKey{src, ch})
	t := time.NewTimer(e.cfg.SetupTimeout)
	defer t.Stop()
	select {
	case c := <-slot:
		return c, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for connection from rank %d channel %d: %w", src, ch, ctx.Err())
	case <-t.C:
		return nil, fmt.Errorf("wait for connection from rank %d channel %d: no connection within %s", src, ch, e.cfg.SetupTimeout)
	}
}

// header opens every setup connection.
type header struct {
	Magic   uint64
	Kind    uint8
	Src     uint32
	Ch      uint16
	Idx     uint16
	N       uint16
	Payload []byte
}

func writeHeader(w io.Writer, h header) error {
	b := make([]byte, 21+len(h.Payload))
	binary.LittleEndian.PutUint64(b[0:], h.Magic)
	b[8] = h.Kind
	binary.LittleEndian.PutUint32(b[9:], h.Src)
	binary.LittleEndian.PutUint16(b[13:], h.Ch)
	binary.LittleEndian.PutUint16(b[15:], h.Idx)
	binary.LittleEndian.PutUint16(b[17:], h.N)
	binary.LittleEndian.PutUint16(b[19:], uint16(len(h.Payload)))
	copy(b[21:], h.Payload)
	_, err := w.Write(b)
	return err
}

func readHeader(r io.Reader) (header, error) {
	var b [21]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return header{}, err
	}
	h := header{
		Magic: binary.LittleEndian.Uint64(b[0:]),
		Kind:  b[8],
		Src:   binary.LittleEndian.Uint32(b[9:]),
		Ch:    binary.LittleEndian.Uint16(b[13:]),
		Idx:   binary.LittleEndian.Uint16(b[15:]),
		N:     binary.LittleEndian.Uint16(b[17:]),
	}
	if n := binary.LittleEndian.Uint16(b[19:]); n > 0 {
		h.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, h.Payload); err != nil {
			return header{}, err
		}
	}
	return h, nil
}

func (e *Endpoint) acceptLoop(ln net.Listener) {
	defer e.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go e.handle(c)
	}
}

// handle reads a setup header and turns the connection into the receiving
// side of a Conn. Strays (wrong magic, bad header) are dropped.
func (e *Endpoint) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(e.cfg.SetupTimeout))
	h, err := readHeader(c)
	if err != nil || h.Magic != e.cfg.CommID {
		c.Close()
		return
	}
	k := connKey{int(h.Src), int(h.Ch)}
	var conn Conn
	switch Kind(h.Kind) {
	case P2P:
		c.SetDeadline(time.Time{})
		conn = &streamConn{c: c, kind: P2P}
	case SHM:
		conn, err = acceptSHM(c, h.Payload)
	case Socket:
		c.SetDeadline(time.Time{})
		setTCPOpts(c)
		e.mu.Lock()
		ss := e.socks[k]
		if ss == nil {
			ss = make([]net.Conn, h.N)
		}
		if int(h.Idx) >= len(ss) {
			e.mu.Unlock()
			c.Close()
			return
		}
		ss[h.Idx] = c
		e.socks[k] = ss
		full := true
		for _, s := range ss {
			full = full && s != nil
		}
		if full {
			delete(e.socks, k)
		}
		e.mu.Unlock()
		if !full {
			return
		}
		conn = &socketConn{socks: ss, dev: devOf(e.tcp, c)}
	case IB:
		conn, err = e.acceptIB(c, h.Payload)
	default:
		err = fmt.Errorf("unknown transport %d", h.Kind)
	}
	if err != nil {
		c.Close()
		return
	}
	select {
	case e.slot(k) <- conn:
	default:
		conn.Close() // a duplicate: the slot is taken
	}
}

func devOf(lns []*net.TCPListener, c net.Conn) int {
	la, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return 0
	}
	for i, l := range lns {
		if l.Addr().(*net.TCPAddr).IP.Equal(la.IP) {
			return i
		}
	}
	return 0
}

// Dial connects this rank to rank dst's endpoint on channel ch using kind.
// dev selects the local NET device (and the peer's, modulo its count).
func (e *Endpoint) Dial(ctx context.Context, kind Kind, dst int, peer Addr, ch, dev int) (Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.SetupTimeout)
	defer cancel()
	h := header{Magic: e.cfg.CommID, Kind: uint8(kind), Src: uint32(e.cfg.Rank), Ch: uint16(ch)}
	switch kind {
	case P2P, SHM:
		if peer.Unix == "" {
			return nil, fmt.Errorf("rank %d has no local endpoint for %s", dst, kind)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", "@"+peer.Unix)
		if err != nil {
			return nil, fmt.Errorf("connect to rank %d via %s: %w", dst, kind, err)
		}
		if kind == P2P {
			if err := writeHeader(c, h); err != nil {
				c.Close()
				return nil, fmt.Errorf("connect to rank %d via %s: %w", dst, kind, err)
			}
			return &streamConn{c: c, kind: P2P}, nil
		}
		conn, err := dialSHM(ctx, c, h, e.cfg.ShmDir, dst)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("connect to rank %d via SHM: %w", dst, err)
		}
		return conn, nil
	case Socket, IB:
		if len(e.cfg.NetDevs) == 0 || len(peer.Net) == 0 {
			return nil, fmt.Errorf("connect to rank %d via %s: no network device", dst, kind)
		}
		ld := e.cfg.NetDevs[dev%len(e.cfg.NetDevs)]
		ra := peer.Net[dev%len(peer.Net)]
		if kind == IB {
			conn, err := e.dialIB(ctx, h, ld, ra, dev%len(e.cfg.NetDevs))
			if err != nil {
				return nil, fmt.Errorf("connect to rank %d via NET/IB/%d (%s -> %s): %w", dst, dev, ld.Name, ra, err)
			}
			return conn, nil
		}
		n := e.cfg.NSocks
		socks := make([]net.Conn, n)
		for i := range n {
			d := e.cfg.Connect
			d.Local = ld.IP
			c, err := d.Dial(ctx, ra)
			if err == nil {
				hh := h
				hh.Idx, hh.N = uint16(i), uint16(n)
				err = writeHeader(c, hh)
			}
			if err != nil {
				for _, s := range socks[:i] {
					s.Close()
				}
				if c != nil {
					c.Close()
				}
				return nil, fmt.Errorf("connect to rank %d via NET/Socket/%d (%s %s -> %s): %w", dst, dev, ld.Name, ld.IP, ra, err)
			}
			setTCPOpts(c)
			socks[i] = c
		}
		return &socketConn{socks: socks, dev: dev % len(e.cfg.NetDevs)}, nil
	}
	return nil, fmt.Errorf("connect to rank %d: unknown transport %v", dst, kind)
}

func setTCPOpts(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

// streamConn is the P2P transport: a kernel stream between two processes.
type streamConn struct {
	c    net.Conn
	kind Kind
}

var _ Conn = (*streamConn)(nil)

func (s *streamConn) Send(p []byte) error {
	_, err := s.c.Write(p)
	return netErr(err)
}

func (s *streamConn) Recv(p []byte) error {
	_, err := io.ReadFull(s.c, p)
	return netErr(err)
}

func (s *streamConn) Close() error { return s.c.Close() }
func (s *streamConn) Kind() Kind   { return s.kind }
func (s *streamConn) Dev() int     { return 0 }

func netErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, net.ErrClosed):
		return ErrClosed
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("connection closed by remote peer: %w", err)
	}
	return err
}
