package transport

import (
	"sync"
	"time"
)

// ibCC is the RoCE emulation's congestion control for one path (a local NIC
// to a peer's address), shared by the queue pairs a rank opens on it: a
// congestion window, raised and cut once per round trip by the one-way delay
// of the packets and by NAKs.
//
// Real RoCE NICs run DCQCN: a switch marks ECN when its queue passes a
// threshold, the receiver returns CNPs, and the sender cuts the queue pair's
// rate. A veth behind tbf marks nothing, so the emulation reads the forward
// queue from delay instead, as Swift and TIMELY do for RDMA: each data packet
// that asks for an ACK carries its send time, the ACK returns its one-way
// delay, and the smallest one-way delay of a round less the smallest of the
// last seconds is the queue the path's data waits in. Below the target the
// window grows (doubling per round in the start-up, then by an eighth) while it
// is what holds the data back; above it the window is cut in proportion to
// the excess, at most by half; a NAK or an ack timeout cuts it by 30 %. Queue
// pairs with data to send share the window evenly, as a NIC serves its QPs in
// turn.
//
// One-way delay rather than round-trip time, because on a link busy both ways
// ACKs wait behind the reverse direction's data: the round trip would count
// the peer's queue as ours. A short forward queue keeps that wait short for the
// peer too, and go-back-N retransmits at most a window.
type ibCC struct {
	mu     sync.Mutex
	window uint64 // per queue pair bound on bytes in flight (NCCL_BUFFSIZE/4)
	qps    int    // queue pairs on the path
	active int    // queue pairs with data waiting to go
	wakers map[*qpCC]func()

	inFlight uint64  // bytes sent and not acked, all queue pairs
	cwnd     float64 // bytes
	startup  bool

	baseOWD   time.Duration // smallest one-way delay in the last baseWindow
	baseOWDAt time.Time

	// the current round
	rdStart   time.Time // a sample sent after it, once acked, ends the round
	rdMinOWD  time.Duration
	rdOWD     bool // rdMinOWD is set
	rdLimited bool // the window held data back
	rdLoss    bool
}

// ccSample is what a queue pair remembers of a packet that asks for an ACK.
type ccSample struct {
	end    uint64 // the queue pair's stream offset after the packet
	sentAt time.Time
}

const (
	initCwnd    = 32 << 10
	minCwnd     = 32 << 10
	queueTarget = 10 * time.Millisecond // forward queueing delay the window aims below: above a loaded machine's scheduling noise, below a lab tbf's 54 ms
	baseWindow  = 10 * time.Second
	growth      = 1.125 // per round below the target, after the start-up
	maxCut      = 0.5
	lossCut     = 0.7
	// ackEveryMax bounds the bytes between two packets asking for an ACK: ACKs
	// share the shaper with the reverse direction's data, so fewer are cheaper,
	// but each one clocks the window and carries a delay.
	ackEveryMax = 32 << 10
)

func newIBCC(window uint64) *ibCC {
	return &ibCC{window: max(window, minCwnd), wakers: map[*qpCC]func(){}, cwnd: initCwnd, startup: true}
}

func (c *ibCC) maxCwnd() float64 { return float64(c.window * uint64(max(c.qps, 1))) }

// onAck accounts n newly acked bytes at now, of which sent were counted in
// flight; s is the newest sample they cover, if any, and owd the one-way
// delay of the packet that asked for the ACK (if owdOK).
func (c *ibCC) onAck(now time.Time, sent uint64, s *ccSample, owd time.Duration, owdOK bool) {
	c.inFlight -= min(sent, c.inFlight)
	if owdOK {
		if c.baseOWDAt.IsZero() || owd <= c.baseOWD || now.Sub(c.baseOWDAt) > baseWindow {
			c.baseOWD, c.baseOWDAt = owd, now
		}
		if !c.rdOWD || owd < c.rdMinOWD {
			c.rdMinOWD, c.rdOWD = owd, true
		}
	}
	if s != nil && s.sentAt.After(c.rdStart) {
		if c.startup && owdOK {
			// The queue a start-up builds shows in its last packets, not in
			// the round's smallest delay: one more doubling could overflow it.
			c.rdMinOWD = owd
		}
		c.endRound(now)
	}
}

// endRound sets the window from what the round saw.
func (c *ibCC) endRound(now time.Time) {
	queue := c.rdMinOWD - c.baseOWD
	switch {
	case c.rdLoss:
		c.startup = false
		c.cwnd *= lossCut
	case c.rdOWD && queue > queueTarget:
		c.startup = false
		c.cwnd *= max(1-0.8*float64(queue-queueTarget)/float64(queue), maxCut)
	case !c.rdLimited:
		// the window held nothing back: no sign that a larger one would help
	case c.startup:
		c.cwnd *= 2
	default:
		c.cwnd *= growth
	}
	c.cwnd = min(max(c.cwnd, minCwnd), c.maxCwnd())
	c.rdStart, c.rdOWD, c.rdLimited, c.rdLoss = now, false, false, false
}

func (c *ibCC) onLoss() { c.rdLoss = true }

// qpCC is one queue pair's share of its path's congestion control. Its
// methods are called with the queue pair's own lock held.
type qpCC struct {
	path    *ibCC
	mss     int
	samples []ccSample // packets that asked for an ACK, in offset order
	lastReq uint64     // offset after the last packet that asked for an ACK
	waiting bool       // counted in path.active; written under path.mu
}

// newQPCC joins a queue pair to its path; wake (may be nil) is called when
// an ACK on the path may have opened the window for it.
func newQPCC(path *ibCC, mss int, wake func()) *qpCC {
	q := &qpCC{path: path, mss: mss}
	path.mu.Lock()
	path.qps++
	if wake != nil {
		path.wakers[q] = wake
	}
	path.mu.Unlock()
	return q
}

// setWaiting tells the path whether this queue pair has data to send.
func (q *qpCC) setWaiting(w bool) {
	if w == q.waiting {
		return
	}
	c := q.path
	c.mu.Lock()
	q.waiting = w
	if w {
		c.active++
	} else {
		c.active--
	}
	c.mu.Unlock()
}

// admit reports whether a packet of n bytes may go now, with own bytes of
// this queue pair in flight: the path's window must have room, and the queue
// pair may not take more than its share of it.
func (q *qpCC) admit(n int, own uint64) bool {
	c := q.path
	c.mu.Lock()
	defer c.mu.Unlock()
	share := uint64(c.cwnd) / uint64(max(c.active, 1))
	if c.inFlight > 0 && (float64(c.inFlight+uint64(n)) > c.cwnd || own+uint64(n) > max(share, 2*uint64(q.mss))) {
		c.rdLimited = true
		return false
	}
	c.inFlight += uint64(n)
	return true
}

// ackEvery is how many bytes may go between two packets asking for an ACK:
// about eight ACKs per window, at least every other packet.
func (q *qpCC) ackEvery() uint64 {
	c := q.path
	c.mu.Lock()
	w := uint64(c.cwnd) / uint64(max(c.active, 1))
	c.mu.Unlock()
	return max(min(ackEveryMax, w/8), 2*uint64(q.mss))
}

// requestAck records that the packet ending at end, sent at now, asks for an ACK.
func (q *qpCC) requestAck(now time.Time, end uint64) {
	q.lastReq = end
	q.samples = append(q.samples, ccSample{end: end, sentAt: now})
	c := q.path
	c.mu.Lock()
	if c.rdStart.IsZero() {
		c.rdStart = now // the first round ends with the ACK of a later packet
	}
	c.mu.Unlock()
}

// acked accounts the queue pair's cumulative ack moving from una to off, with
// nxt the next offset to send (an ack may pass it after a go-back-N) and the
// one-way delay the ACK reports.
func (q *qpCC) acked(now time.Time, una, off, nxt uint64, owd time.Duration, owdOK bool) {
	i := 0
	for i < len(q.samples) && q.samples[i].end <= off {
		i++
	}
	var s *ccSample
	if i > 0 {
		s = &ccSample{}
		*s = q.samples[i-1]
		q.samples = q.samples[:copy(q.samples, q.samples[i:])]
	}
	q.lastReq = max(q.lastReq, off)
	c := q.path
	c.mu.Lock()
	c.onAck(now, min(off, nxt)-min(una, nxt), s, owd, owdOK)
	var others []func()
	if c.qps > 1 {
		for o, w := range c.wakers {
			if o != q && o.waiting {
				others = append(others, w)
			}
		}
	}
	c.mu.Unlock()
	for _, w := range others {
		w() // the window this ACK opened is theirs too
	}
}

// rewound accounts a go-back-N to una from nxt after a NAK or a timeout (loss
// true) or a close (loss false): the bytes in flight are void.
func (q *qpCC) rewound(una, nxt uint64, loss bool) {
	q.samples = q.samples[:0]
	q.lastReq = una
	c := q.path
	c.mu.Lock()
	c.inFlight -= min(nxt-una, c.inFlight)
	if loss {
		c.onLoss()
	}
	c.mu.Unlock()
}

// close leaves the path.
func (q *qpCC) close(una, nxt uint64) {
	q.rewound(una, nxt, false)
	q.setWaiting(false)
	q.path.mu.Lock()
	q.path.qps--
	delete(q.path.wakers, q)
	q.path.mu.Unlock()
}
