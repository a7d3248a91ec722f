package transport

import (
	"testing"
	"time"
)

// simLink is tbf in virtual time: a bucket, a FIFO queue with a limit and a
// propagation delay. It is what lies outside the congestion control in these
// tests; bench's netns tests run the real one over a real tbf.
type simLink struct {
	rate     float64 // bytes/s
	burst    float64 // bucket, bytes
	delay    time.Duration
	limit    float64 // queue bytes before a drop
	lastDep  time.Time
	tokens   float64 // at lastDep
	maxQueue float64
}

// send returns when the packet leaves tbf, or false if the queue is full.
func (l *simLink) send(now time.Time, n int) (time.Time, bool) {
	start := now
	if l.lastDep.After(now) {
		start = l.lastDep
	}
	queued := max(l.lastDep.Sub(now).Seconds()*l.rate, 0)
	if queued+float64(n) > l.limit {
		return time.Time{}, false
	}
	l.maxQueue = max(l.maxQueue, queued)
	tokens := min(l.burst, l.tokens+start.Sub(l.lastDep).Seconds()*l.rate)
	if l.lastDep.IsZero() {
		tokens = l.burst
	}
	dep := start
	if tokens < float64(n) {
		dep = start.Add(time.Duration((float64(n) - tokens) / l.rate * 1e9))
		tokens = float64(n)
	}
	l.lastDep, l.tokens = dep, tokens-float64(n)
	return dep, true
}

type simAck struct {
	at  time.Time
	end uint64
	owd time.Duration
}

// simFlow is a queue pair with unlimited data, driven as ibSender.fill drives one.
type simFlow struct {
	cc       *qpCC
	una, nxt uint64
	acks     []simAck
}

const simMSS = 1448

// step sends what the path's window allows at now.
func (f *simFlow) step(t *testing.T, now time.Time, link *simLink) {
	f.cc.setWaiting(true)
	every := f.cc.ackEvery()
	for f.cc.admit(simMSS, f.nxt-f.una) {
		f.nxt += simMSS
		req := f.nxt-f.cc.lastReq >= every
		if req {
			f.cc.requestAck(now, f.nxt)
		}
		dep, ok := link.send(now, simMSS+52)
		if !ok {
			t.Fatalf("queue overflow: the window let %.0f bytes queue", link.limit)
		}
		if req {
			f.acks = append(f.acks, simAck{dep.Add(2 * link.delay), f.nxt, dep.Add(link.delay).Sub(now)})
		}
	}
	if f.nxt > f.cc.lastReq { // the window is full: the last packet asks for an ACK
		f.cc.requestAck(now, f.nxt)
		f.acks = append(f.acks, simAck{link.lastDep.Add(2 * link.delay), f.nxt, link.lastDep.Add(link.delay).Sub(now)})
	}
}

// simulate runs flows over link for d of virtual time in steps of 20 µs; rateAt
// may change the link's rate. It returns the bytes each flow delivered in the
// second half of the run.
func simulate(t *testing.T, link *simLink, nflows int, d time.Duration, rateAt func(time.Duration) float64) []uint64 {
	t.Helper()
	t0 := time.Unix(1e9, 0)
	path := newIBCC(ibWindow)
	flows := make([]*simFlow, nflows)
	for i := range flows {
		flows[i] = &simFlow{cc: newQPCC(path, simMSS, nil)}
	}
	half := make([]uint64, nflows)
	const dt = 20 * time.Microsecond
	for el := time.Duration(0); el < d; el += dt {
		now := t0.Add(el)
		if rateAt != nil {
			link.rate = rateAt(el)
		}
		if el == d/2 {
			link.maxQueue = 0
			for i, f := range flows {
				half[i] = f.una
			}
		}
		for _, f := range flows {
			for len(f.acks) > 0 && !f.acks[0].at.After(now) {
				a := f.acks[0]
				f.cc.acked(now, f.una, a.end, f.nxt, a.owd, true)
				f.una = a.end
				f.acks = f.acks[1:]
			}
		}
		// Queue pairs take turns going first, as their goroutines would.
		for i := range flows {
			flows[(i+int(el/dt))%nflows].step(t, now, link)
		}
	}
	got := make([]uint64, nflows)
	for i, f := range flows {
		got[i] = f.una - half[i]
	}
	return got
}

func TestIBCCFillsTheLinkWithAShortQueue(t *testing.T) {
	const run = 4 * time.Second
	for _, tc := range []struct {
		name   string
		rate   float64 // bytes/s
		delay  time.Duration
		flows  int
		rateAt func(time.Duration) float64
		final  float64 // link rate in the second half
	}{
		{"200 Mbit", 25e6, 50 * time.Microsecond, 1, nil, 25e6},
		{"800 Mbit", 100e6, 50 * time.Microsecond, 1, nil, 100e6},
		{"two queue pairs share 400 Mbit", 50e6, 50 * time.Microsecond, 2, nil, 50e6},
		{"10 Mbit", 1.25e6, 50 * time.Microsecond, 1, nil, 1.25e6},
		{"100 Mbit, 20 ms", 12.5e6, 10 * time.Millisecond, 1, nil, 12.5e6},
		{"rate halves after 1 s", 50e6, 50 * time.Microsecond, 2, func(el time.Duration) float64 {
			if el < time.Second {
				return 50e6
			}
			return 25e6
		}, 25e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A lab's tbf: a bucket of 4 ms and a queue of 54 ms (injector's tbfSizing).
			link := &simLink{rate: tc.rate, burst: tc.rate * 0.004, delay: tc.delay, limit: tc.rate * 0.054}
			got := simulate(t, link, tc.flows, run, tc.rateAt)
			var sum uint64
			for _, g := range got {
				sum += g
			}
			share := float64(sum) / (run / 2).Seconds() / tc.final
			queueMs := link.maxQueue / tc.final * 1e3
			t.Logf("goodput %.3f of the link; per queue pair %v bytes; max queue %.1f ms", share, got, queueMs)
			// Packets carry 52 bytes of headers the goodput does not count: at most 0.965.
			if share < 0.9 {
				t.Errorf("goodput %.3f × the link rate, want at least 0.9", share)
			}
			// 20 ms, or the smallest window on a slow link.
			if link.maxQueue > max(0.02*tc.final, 1.1*minCwnd) {
				t.Errorf("the queue reached %.1f ms (%.0f bytes), want at most 20 ms or %d bytes", queueMs, link.maxQueue, minCwnd)
			}
			for i, g := range got {
				if tc.flows > 1 && float64(g) < 0.4*float64(sum) {
					t.Errorf("queue pair %d got %d of %d bytes: not its share", i, g, sum)
				}
			}
		})
	}
}

func TestIBCCRounds(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	const base = 50 * time.Microsecond
	// round acks one sample sent at the round's start, with a one-way delay of
	// base+queue; limited says whether the window held data back.
	round := func(c *ibCC, el time.Duration, queue time.Duration, limited bool) time.Duration {
		c.rdLimited = limited
		s := &ccSample{sentAt: c.rdStart.Add(time.Nanosecond)} // sent in the round
		el += time.Millisecond
		c.onAck(t0.Add(el), 0, s, base+queue, true)
		return el
	}
	start := func(c *ibCC) time.Duration { return round(c, 0, 0, true) } // sets the base delay; doubles
	for _, tc := range []struct {
		name string
		run  func(c *ibCC)
		want float64 // cwnd
		up   bool    // still in the start-up
	}{
		{"the start-up doubles the window while it limits", func(c *ibCC) { round(c, start(c), 0, true) }, 4 * initCwnd, true},
		{"a window that limits nothing stays", func(c *ibCC) { round(c, start(c), 0, false) }, 2 * initCwnd, true},
		{"a queue above the target cuts in proportion", func(c *ibCC) { round(c, start(c), 2*queueTarget, true) },
			2 * initCwnd * (1 - 0.8*0.5), false},
		{"at most by half", func(c *ibCC) { round(c, start(c), 100*time.Millisecond, true) }, initCwnd, false},
		{"then it grows by an eighth", func(c *ibCC) {
			el := round(c, start(c), 100*time.Millisecond, true)
			round(c, el, queueTarget/2, true)
		}, initCwnd * growth, false},
		{"a NAK cuts by 30 %", func(c *ibCC) {
			el := start(c)
			c.onLoss()
			round(c, el, 0, true)
		}, 2 * initCwnd * lossCut, false},
		{"never below the minimum", func(c *ibCC) {
			el := start(c)
			for range 20 {
				el = round(c, el, 100*time.Millisecond, true)
			}
		}, minCwnd, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newIBCC(ibWindow)
			c.qps = 1
			tc.run(c)
			if c.cwnd < 0.999*tc.want || c.cwnd > 1.001*tc.want || c.startup != tc.up {
				t.Errorf("cwnd %.0f, start-up %v; want %.0f, %v", c.cwnd, c.startup, tc.want, tc.up)
			}
		})
	}
}

// TestIBCCWindowShare: a queue pair may not take more than its share of the
// path's window while another one waits.
func TestIBCCWindowShare(t *testing.T) {
	c := newIBCC(ibWindow)
	a, b := newQPCC(c, simMSS, nil), newQPCC(c, simMSS, nil)
	a.setWaiting(true)
	b.setWaiting(true)
	var own [2]uint64
	for i := 0; ; i++ {
		q := []*qpCC{a, a, a, b}[i%4] // a tries three times as often
		k := i % 4 / 3
		if !q.admit(simMSS, own[k]) {
			if own[0] > 0 && own[1] > 0 {
				break
			}
			continue
		}
		own[k] += simMSS
	}
	if own[0] > uint64(c.cwnd)/2+simMSS || own[0]+own[1] > uint64(c.cwnd)+simMSS {
		t.Errorf("in flight %v with a window of %.0f: want at most half each", own, c.cwnd)
	}
}
