package transport

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

// The RoCE emulation: every packet goes to UDP port 4791 (data to the receiver,
// ACK/NAK to the sender), source ports give each queue pair its own flow, as RoCEv2
// does. Reliability is go-back-N on a byte stream: the receiver accepts only the
// next expected offset, NAKs once on a gap, acks cumulatively with its window
// when a packet asks for it (the AckReq bit of the BTH), on a duplicate and when
// a gap fills. The sender keeps its bytes in flight within a congestion window
// (ibCC), asks for an ACK every ackEvery bytes and on the last packet it can
// send; it retransmits from the first unacked byte on NAK or when no ack came
// within the timeout; after more than IBRetry retries without progress it fails
// with IBV_WC_RETRY_EXC_ERR (status 12), as an RC queue pair does.
const (
	pktData  = 1
	pktAck   = 2
	pktNak   = 3
	pktProbe = 4

	dataHdr = 24 // type, flags, qpn, offset, send time
	ackLen  = 32 // type, flags, qpn, offset, window, one-way delay

	flagAckReq = 1 // data header byte 1: the receiver must ACK this packet
	flagOWD    = 1 // ACK byte 1: bytes 24-31 hold a one-way delay

	ibRing = 4 << 20 // send and receive buffer per queue pair
	// ibWindow is the default bound on bytes in flight per queue pair; the
	// congestion window (ibCC) is usually smaller.
	ibWindow = 1 << 20
	ibMaxMTU = 4096 // the largest IB MTU
	ibBatch  = 64
)

// IBStats counts a sender's protocol events.
type IBStats struct {
	Packets, Retransmits, Timeouts, Naks uint64
}

type ibSender struct {
	data, acks *net.UDPConn
	pc         *ipv4.PacketConn
	qpn        uint32
	mss        int
	timeout    time.Duration
	retryCnt   int
	wc         WCError
	dev        int
	onErr      func(error)
	window     uint64

	mu           sync.Mutex
	cond         *sync.Cond
	ring         []byte
	una, nxt     uint64 // first unacked, next to send
	end          uint64 // end of queued data
	rwnd         uint64 // receiver's right edge
	retries      int
	lastProgress time.Time
	lastProbe    time.Time
	err          error
	stats        IBStats

	cc *qpCC

	kick   chan struct{}
	closed chan struct{}
	once   sync.Once
}

type ibReceiver struct {
	data, acks *net.UDPConn
	pc         *ipv4.PacketConn
	qpn        uint32
	dev        int

	mu         sync.Mutex
	cond       *sync.Cond
	ring       []byte
	rcvNxt     uint64
	consumed   uint64
	advertised uint64 // consumed at the last window update
	nakFor     uint64
	nakSent    bool
	owd        int64 // arrival less send time of the last packet asking for an ACK
	owdOK      bool
	// stash holds packets that arrived ahead of a gap. veth delivers a flow out
	// of order when the sending thread moves between CPUs, which a real fabric
	// does not do; the stash absorbs that, and a gap that outlives reorderWindow
	// later packets is treated as loss (NAK, go-back-N) as on RoCE.
	stash  map[uint64][]byte
	err    error
	closed chan struct{}
	once   sync.Once
}

var (
	_ Conn = (*ibSender)(nil)
	_ Conn = (*ibReceiver)(nil)
)

// udpDial opens a UDP socket bound to local (port may be 0) and connected to remote.
// Sockets bound to the RoCE port share it through SO_REUSEPORT; the kernel
// delivers each flow to its connected socket. One on port 0 gets a port of its own
// (roceSocket).
func udpDial(ctx context.Context, local, remote netip.AddrPort) (*net.UDPConn, error) {
	d := net.Dialer{
		LocalAddr: net.UDPAddrFromAddrPort(local),
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = roceSocket(int(fd), local.Port() != 0) })
			if err != nil {
				return err
			}
			return serr
		},
	}
	c, err := d.DialContext(ctx, "udp4", remote.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

func localPort(c *net.UDPConn) uint16 { return c.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

func mssFor(mtu int) int {
	if mtu <= 0 {
		mtu = 1500
	}
	return min(ibMaxMTU, mtu-20-8-dataHdr)
}

func gid(ip netip.Addr) string { return "::ffff:" + ip.Unmap().String() }

// dialIB is the sender side: data flows from an ephemeral port to the peer's
// RoCE port; acks come back to our RoCE port.
func (e *Endpoint) dialIB(ctx context.Context, h header, ld Device, ra netip.AddrPort, dev int) (Conn, error) {
	d := e.cfg.Connect
	d.Local = ld.IP
	oob, err := d.Dial(ctx, ra)
	if err != nil {
		return nil, err
	}
	defer oob.Close()
	dl, _ := ctx.Deadline()
	oob.SetDeadline(dl)
	port := uint16(e.cfg.RocePort)
	data, err := udpDial(ctx, netip.AddrPortFrom(ld.IP, 0), netip.AddrPortFrom(ra.Addr(), port))
	if err != nil {
		return nil, fmt.Errorf("open queue pair: %w", err)
	}
	var qb [4]byte
	rand.Read(qb[:])
	qpn := binary.LittleEndian.Uint32(qb[:])
	p := make([]byte, 6)
	binary.LittleEndian.PutUint16(p, localPort(data))
	binary.LittleEndian.PutUint32(p[2:], qpn)
	h.Payload = p
	if err := writeHeader(oob, h); err != nil {
		data.Close()
		return nil, err
	}
	var reply [6]byte
	if _, err := io.ReadFull(oob, reply[:]); err != nil {
		data.Close()
		return nil, fmt.Errorf("queue pair handshake: %w", err)
	}
	ackPort := binary.LittleEndian.Uint16(reply[:])
	rwnd := binary.LittleEndian.Uint32(reply[2:])
	acks, err := udpDial(ctx, netip.AddrPortFrom(ld.IP, port), netip.AddrPortFrom(ra.Addr(), ackPort))
	if err != nil {
		data.Close()
		return nil, fmt.Errorf("open ack path on UDP %d: %w", port, err)
	}
	to := e.cfg.IBTimeout
	if to <= 0 {
		to = time.Second
	}
	s := &ibSender{
		data: data, acks: acks, pc: ipv4.NewPacketConn(data), qpn: qpn,
		mss: mssFor(ld.MTU), timeout: to, retryCnt: e.cfg.IBRetry, dev: dev, onErr: e.cfg.OnError,
		window: uint64(min(max(e.cfg.IBWindow, 64<<10), ibRing)),
		ring:   make([]byte, ibRing), rwnd: uint64(rwnd),
		kick: make(chan struct{}, 1), closed: make(chan struct{}),
		wc: WCError{
			Peer: fmt.Sprintf("%s<%d>", ra.Addr(), ra.Port()), Status: 12, Opcode: 0, VendorErr: 129, Type: "Send",
			LocalGid: gid(ld.IP), RemoteGid: gid(ra.Addr()), HCA: ld.Name,
		},
	}
	s.cond = sync.NewCond(&s.mu)
	s.cc = newQPCC(e.path(ld.IP, ra.Addr()), s.mss, s.wake)
	go s.sendLoop()
	go s.ackLoop()
	return s, nil
}

// path returns the congestion control shared by the queue pairs from local to remote.
func (e *Endpoint) path(local, remote netip.Addr) *ibCC {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := [2]netip.Addr{local, remote}
	p, ok := e.paths[k]
	if !ok {
		p = newIBCC(uint64(min(max(e.cfg.IBWindow, 64<<10), ibRing)))
		e.paths[k] = p
	}
	return p
}

// acceptIB is the receiver side, run on the out-of-band TCP connection.
func (e *Endpoint) acceptIB(c net.Conn, payload []byte) (Conn, error) {
	defer c.Close()
	if len(payload) != 6 {
		return nil, fmt.Errorf("bad queue pair handshake")
	}
	srcPort := binary.LittleEndian.Uint16(payload)
	qpn := binary.LittleEndian.Uint32(payload[2:])
	la := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	ra := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	port := uint16(e.cfg.RocePort)
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.SetupTimeout)
	defer cancel()
	acks, err := udpDial(ctx, netip.AddrPortFrom(la, 0), netip.AddrPortFrom(ra, port))
	if err != nil {
		return nil, err
	}
	data, err := udpDial(ctx, netip.AddrPortFrom(la, port), netip.AddrPortFrom(ra, srcPort))
	if err != nil {
		acks.Close()
		return nil, err
	}
	var reply [6]byte
	binary.LittleEndian.PutUint16(reply[:], localPort(acks))
	binary.LittleEndian.PutUint32(reply[2:], ibRing)
	if _, err := c.Write(reply[:]); err != nil {
		acks.Close()
		data.Close()
		return nil, err
	}
	r := &ibReceiver{
		data: data, acks: acks, pc: ipv4.NewPacketConn(data), qpn: qpn, dev: devOf(e.tcp, c),
		ring: make([]byte, ibRing), closed: make(chan struct{}),
	}
	r.cond = sync.NewCond(&r.mu)
	go r.recvLoop()
	return r, nil
}

// ---- sender ----

func (s *ibSender) Kind() Kind { return IB }
func (s *ibSender) Dev() int   { return s.dev }

// IBStats returns the counters of an emulated RoCE send queue pair; ok is
// false for other connections.
func IBStatsOf(c Conn) (st IBStats, ok bool) {
	s, ok := c.(*ibSender)
	if !ok {
		return st, false
	}
	return s.Stats(), true
}

// Stats returns the sender's counters.
func (s *ibSender) Stats() IBStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *ibSender) Recv([]byte) error { return errors.New("NET/IB: receive on a send queue pair") }

func (s *ibSender) Send(p []byte) error {
	s.mu.Lock()
	for len(p) > 0 {
		for s.err == nil && s.end-s.una == uint64(len(s.ring)) {
			s.cond.Wait()
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return err
		}
		room := uint64(len(s.ring)) - (s.end - s.una)
		n := min(uint64(len(p)), room)
		pos := s.end % uint64(len(s.ring))
		k := copy(s.ring[pos:], p[:n])
		copy(s.ring, p[k:n])
		s.end += n
		p = p[n:]
		s.wake()
	}
	s.mu.Unlock()
	return nil
}

func (s *ibSender) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// fail records the queue pair's error (called with s.mu held) and, for a work
// completion error, tells the owner at once: like NCCL's proxy polling the
// completion queue, the failure surfaces even when no Send is waiting.
func (s *ibSender) fail(err error) {
	if s.err == nil {
		s.err = err
		var wc *WCError
		if s.onErr != nil && errors.As(err, &wc) {
			go s.onErr(err)
		}
	}
	s.cond.Broadcast()
}

func (s *ibSender) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.fail(ErrClosed)
		s.cc.close(s.una, s.nxt)
		s.mu.Unlock()
		close(s.closed)
		s.data.Close()
		s.acks.Close()
	})
	return nil
}

func (s *ibSender) sendLoop() {
	bufs := make([][]byte, ibBatch)
	msgs := make([]ipv4.Message, ibBatch)
	for i := range bufs {
		bufs[i] = make([]byte, dataHdr+s.mss)
		msgs[i].Buffers = [][]byte{nil}
	}
	probe := make([]byte, dataHdr)
	timer := time.NewTimer(time.Hour)
	for {
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		if s.una < s.nxt && now.Sub(s.lastProgress) >= s.timeout {
			s.retries++
			s.stats.Timeouts++
			if s.retries > s.retryCnt {
				wc := s.wc
				wc.Len = 0
				s.fail(&wc)
				s.mu.Unlock()
				return
			}
			s.stats.Retransmits += (s.nxt - s.una + uint64(s.mss) - 1) / uint64(s.mss)
			s.rewind()
			s.lastProgress = now
		}
		if s.una == s.nxt && s.end > s.nxt && s.nxt < s.rwnd {
			s.lastProgress = now // timer starts with the first packet after idle
		}
		k := s.fill(now, bufs, msgs)
		sendProbe := false
		wait := time.Hour
		switch {
		case s.una < s.nxt:
			wait = s.timeout - now.Sub(s.lastProgress)
		case s.end > s.nxt && s.nxt >= s.rwnd: // window closed: probe until it opens (RNR retries are unlimited)
			if now.Sub(s.lastProbe) >= s.timeout {
				sendProbe = true
				s.lastProbe = now
			}
			wait = s.timeout
		case s.end > s.nxt: // held by the path's window: ACKs on the path wake us; this is a safety net
			wait = 10 * time.Millisecond
		}
		s.mu.Unlock()
		if k > 0 {
			for sent := 0; sent < k; {
				n, err := s.pc.WriteBatch(msgs[sent:k], 0)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					break // ENOBUFS, ECONNREFUSED...: the packets are lost, go-back-N recovers
				}
				sent += n
			}
			continue
		}
		if sendProbe {
			probe[0] = pktProbe
			binary.LittleEndian.PutUint32(probe[4:], s.qpn)
			s.data.Write(probe)
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-s.kick:
		case <-timer.C:
		case <-s.closed:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// fill builds up to len(bufs) data packets that the windows allow now
// (called with s.mu held).
func (s *ibSender) fill(now time.Time, bufs [][]byte, msgs []ipv4.Message) (k int) {
	limit := min(s.end, s.rwnd, s.una+s.window)
	s.cc.setWaiting(s.nxt < s.end)
	every := s.cc.ackEvery()
	stamp := monoNanos()
	for k < len(bufs) && s.nxt < limit {
		n := int(min(uint64(s.mss), limit-s.nxt))
		if !s.cc.admit(n, s.nxt-s.una) {
			if k > 0 && bufs[k-1][1] != flagAckReq {
				bufs[k-1][1] = flagAckReq // the window is full: its last packet asks for an ACK
				s.cc.requestAck(now, s.nxt)
			}
			break
		}
		b := bufs[k][:dataHdr+n]
		b[0], b[1] = pktData, 0
		binary.LittleEndian.PutUint32(b[4:], s.qpn)
		binary.LittleEndian.PutUint64(b[8:], s.nxt)
		binary.LittleEndian.PutUint64(b[16:], uint64(stamp))
		pos := s.nxt % uint64(len(s.ring))
		c := copy(b[dataHdr:], s.ring[pos:])
		if c < n {
			copy(b[dataHdr+c:], s.ring[:n-c])
		}
		msgs[k].Buffers[0] = b
		s.nxt += uint64(n)
		if s.nxt-s.cc.lastReq >= every || s.nxt == limit {
			b[1] = flagAckReq
			s.cc.requestAck(now, s.nxt)
		}
		k++
	}
	s.stats.Packets += uint64(k)
	if s.nxt == s.end {
		s.cc.setWaiting(false)
	}
	return k
}

// rewind goes back to the first unacked byte (go-back-N); called with s.mu held.
func (s *ibSender) rewind() {
	s.cc.rewound(s.una, s.nxt, true)
	s.nxt = s.una
}

// acked moves the cumulative ack to off; owd is the one-way delay the ACK
// reports (when owdOK); called with s.mu held.
func (s *ibSender) acked(now time.Time, off uint64, owd time.Duration, owdOK bool) {
	s.cc.acked(now, s.una, off, s.nxt, owd, owdOK)
	s.una = off
	s.nxt = max(s.nxt, off)
}

func (s *ibSender) ackLoop() {
	b := make([]byte, 64)
	for {
		n, err := s.acks.Read(b)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				continue
			}
			s.mu.Lock()
			s.fail(fmt.Errorf("NET/IB: ack path: %w", err))
			s.mu.Unlock()
			return
		}
		if n < ackLen || binary.LittleEndian.Uint32(b[4:]) != s.qpn {
			continue
		}
		off := binary.LittleEndian.Uint64(b[8:])
		win := binary.LittleEndian.Uint64(b[16:])
		s.mu.Lock()
		if off > s.una && off <= s.end {
			s.acked(time.Now(), off, time.Duration(int64(binary.LittleEndian.Uint64(b[24:]))), b[1]&flagOWD != 0)
			s.retries = 0
			s.lastProgress = time.Now()
			s.cond.Broadcast()
		}
		if win > s.rwnd {
			s.rwnd = win
		}
		if b[0] == pktNak && off == s.una && off < s.nxt {
			s.stats.Naks++
			s.stats.Retransmits += (s.nxt - off + uint64(s.mss) - 1) / uint64(s.mss)
			s.retries++
			if s.retries > s.retryCnt {
				wc := s.wc
				s.fail(&wc)
			}
			s.rewind()
			s.lastProgress = time.Now()
		}
		s.mu.Unlock()
		s.wake()
	}
}

// ---- receiver ----

func (r *ibReceiver) Kind() Kind        { return IB }
func (r *ibReceiver) Dev() int          { return r.dev }
func (r *ibReceiver) Send([]byte) error { return errors.New("NET/IB: send on a receive queue pair") }

func (r *ibReceiver) Close() error {
	r.once.Do(func() {
		r.mu.Lock()
		if r.err == nil {
			r.err = ErrClosed
		}
		r.cond.Broadcast()
		r.mu.Unlock()
		close(r.closed)
		r.data.Close()
		r.acks.Close()
	})
	return nil
}

func (r *ibReceiver) Recv(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(p) > 0 {
		for r.err == nil && r.rcvNxt == r.consumed {
			r.cond.Wait()
		}
		if r.err != nil {
			return r.err
		}
		avail := r.rcvNxt - r.consumed
		n := min(uint64(len(p)), avail)
		pos := r.consumed % uint64(len(r.ring))
		k := copy(p[:n], r.ring[pos:])
		copy(p[k:n], r.ring)
		r.consumed += n
		p = p[n:]
		if r.consumed-r.advertised >= uint64(len(r.ring))/4 {
			r.sendAck(pktAck)
		}
	}
	return nil
}

// sendAck is called with r.mu held.
func (r *ibReceiver) sendAck(typ byte) {
	var b [ackLen]byte
	b[0] = typ
	binary.LittleEndian.PutUint32(b[4:], r.qpn)
	binary.LittleEndian.PutUint64(b[8:], r.rcvNxt)
	binary.LittleEndian.PutUint64(b[16:], r.consumed+uint64(len(r.ring)))
	if r.owdOK {
		b[1] = flagOWD
		binary.LittleEndian.PutUint64(b[24:], uint64(r.owd))
		r.owdOK = false
	}
	r.advertised = r.consumed
	r.acks.Write(b[:])
}

// reorderWindow is how many packets past a gap the receiver holds before it
// declares the gap lost; it NAKs earlier, from nakAfter packets on, when a
// packet past the gap asks for an ACK.
const (
	reorderWindow = 48
	nakAfter      = 16
)

// deliver appends in-order payload to the receive ring; called with r.mu held.
func (r *ibReceiver) deliver(pl []byte) {
	pos := r.rcvNxt % uint64(len(r.ring))
	k := copy(r.ring[pos:], pl)
	copy(r.ring, pl[k:])
	r.rcvNxt += uint64(len(pl))
}

func (r *ibReceiver) recvLoop() {
	msgs := make([]ipv4.Message, ibBatch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 65536)}
	}
	for {
		n, err := r.pc.ReadBatch(msgs, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				continue
			}
			r.mu.Lock()
			if r.err == nil {
				r.err = fmt.Errorf("NET/IB: receive: %w", err)
			}
			r.cond.Broadcast()
			r.mu.Unlock()
			return
		}
		arrived := monoNanos()
		r.mu.Lock()
		if r.stash == nil {
			r.stash = map[uint64][]byte{}
		}
		progress, ack := false, false
		for i := range n {
			b := msgs[i].Buffers[0][:msgs[i].N]
			if len(b) < dataHdr || binary.LittleEndian.Uint32(b[4:]) != r.qpn {
				continue
			}
			switch b[0] {
			case pktProbe:
				ack = true
			case pktData:
				off := binary.LittleEndian.Uint64(b[8:])
				pl := b[dataHdr:]
				if b[1]&flagAckReq != 0 {
					r.owd, r.owdOK = arrived-int64(binary.LittleEndian.Uint64(b[16:])), true
				}
				free := uint64(len(r.ring)) - (r.rcvNxt - r.consumed)
				switch {
				case off == r.rcvNxt && uint64(len(pl)) <= free:
					r.deliver(pl)
					ack = ack || b[1]&flagAckReq != 0
					for {
						next, ok := r.stash[r.rcvNxt]
						if !ok || uint64(len(next)) > uint64(len(r.ring))-(r.rcvNxt-r.consumed) {
							break
						}
						delete(r.stash, r.rcvNxt)
						r.deliver(next)
						ack = true // a gap filled: the sender learns it at once
					}
					if len(r.stash) > 0 {
						for k := range r.stash {
							if k < r.rcvNxt {
								delete(r.stash, k)
							}
						}
					}
					progress = true
				case off > r.rcvNxt:
					stashed := len(r.stash) < reorderWindow && off-r.rcvNxt < uint64(len(r.ring))
					if stashed {
						if _, dup := r.stash[off]; !dup {
							r.stash[off] = append([]byte(nil), pl...)
						}
					}
					// A packet that asks for an ACK past a gap that reordering
					// does not explain gets the sequence-error NAK it would get on RoCE.
					if stashed && (b[1]&flagAckReq == 0 || len(r.stash) < nakAfter) {
						break
					}
					if !r.nakSent || r.nakFor != r.rcvNxt {
						r.nakSent, r.nakFor = true, r.rcvNxt
						r.sendAck(pktNak)
					}
				default:
					ack = true // duplicate or no room: tell the sender where we are
				}
			}
		}
		if progress {
			r.cond.Broadcast()
		}
		if ack {
			r.sendAck(pktAck)
		}
		r.mu.Unlock()
	}
}
