package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/commlab/commlab/bench/transport"
)

// Collective names a benchmarked operation, as nccl-tests names its binaries
// (without the _perf suffix).
type Collective string

// The collectives.
const (
	AllReduce     Collective = "all_reduce"
	AllGather     Collective = "all_gather"
	ReduceScatter Collective = "reduce_scatter"
	Broadcast     Collective = "broadcast"
	Reduce        Collective = "reduce"
	AllToAll      Collective = "alltoall"
	SendRecv      Collective = "sendrecv"
)

// Collectives lists every collective.
var Collectives = []Collective{AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv}

// ParseCollective accepts the name with or without nccl-tests' _perf suffix.
func ParseCollective(s string) (Collective, error) {
	n := strings.TrimSuffix(strings.ToLower(s), "_perf")
	n = strings.ReplaceAll(n, "-", "_")
	if n == "all_to_all" {
		n = "alltoall"
	}
	for _, c := range Collectives {
		if string(c) == n {
			return c, nil
		}
	}
	names := make([]string, len(Collectives))
	for i, c := range Collectives {
		names[i] = string(c)
	}
	return "", fmt.Errorf("unknown collective %q (want one of %s)", s, strings.Join(names, ", "))
}

// reduces reports whether the collective takes a reduction operation.
func (c Collective) reduces() bool {
	return c == AllReduce || c == ReduceScatter || c == Reduce
}

// rooted reports whether the collective has a root rank.
func (c Collective) rooted() bool { return c == Broadcast || c == Reduce }

// BusBwFactor is nccl-tests' bus bandwidth factor for n ranks.
func (c Collective) BusBwFactor(n int) float64 {
	switch c {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// part splits count elements in n nearly equal parts; part i starts at off.
func part(count, n, i int) (off, cnt int) {
	base, rem := count/n, count%n
	return i*base + min(i, rem), base + btoi(i < rem)
}

// sameStart reports whether a and b start at the same byte (in-place use).
func sameStart(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// call is one collective invocation.
type call struct {
	coll       Collective
	t          DataType
	op         Op
	root       int
	count      int // nccl-tests' count: per-rank count for all_gather, reduce_scatter, alltoall
	send, recv []byte
	algo       string
}

// errAborted wraps the reason the communicator was aborted.
var errAborted = errors.New("communicator aborted")

// run executes one collective with a watchdog: if it does not finish within
// the timeout, every connection is closed and the call fails (NCCL would hang).
func (c *Comm) run(ctx context.Context, k call) error {
	if err := c.aborted(); err != nil {
		return fmt.Errorf("%w: %v", errAborted, err)
	}
	timeout := c.env.Timeout
	wd := time.AfterFunc(timeout, func() {
		c.abort(fmt.Errorf("%s of %d bytes did not complete within %s (watchdog; real NCCL would hang here)", k.coll, len(k.recv), timeout))
	})
	stop := context.AfterFunc(ctx, func() { c.abort(ctx.Err()) })
	err := c.dispatch(ctx, k)
	wd.Stop()
	stop()
	if err != nil {
		c.abort(err)
		// The first abort carries the root cause (a dead peer, error 12, the watchdog).
		if a := c.aborted(); a != nil && !errors.Is(a, transport.ErrClosed) {
			return a
		}
	}
	return err
}

func (c *Comm) dispatch(ctx context.Context, k call) error {
	n := c.NRanks
	es := k.t.Size()
	red := reducer(k.t, k.op)
	var wg sync.WaitGroup
	errs := make([]error, c.nch)
	for ch := range c.nch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[ch] = c.channel(ctx, k, ch, n, es, red)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, transport.ErrClosed) {
			return err
		}
	}
	return errors.Join(errs...)
}

// channel runs channel ch's share of the call.
func (c *Comm) channel(ctx context.Context, k call, ch, n, es int, red reduceFn) error {
	r := c.Rank
	switch k.coll {
	case AllReduce:
		off, cnt := part(k.count, c.nch, ch)
		send, recv := k.send[off*es:(off+cnt)*es], k.recv[off*es:(off+cnt)*es]
		if n == 1 {
			copy(recv, send)
			return nil
		}
		if k.algo == "tree" {
			return c.treeUpDown(ctx, ch, 0, send, recv, red, true, true)
		}
		chunk := func(i int) (int, int) { o, c := part(cnt, n, (i%n+n)%n); return o * es, (o + c) * es }
		var steps []xfer
		// Reduce-scatter: at step k send chunk r-1-k... arranged so rank r ends with chunk r.
		for s := 0; s < n-1; s++ {
			so, se := chunk(r - 1 - s)
			ro, re := chunk(r - 2 - s)
			x := xfer{recv: recv[ro:re], mine: send[ro:re], dep: s - 1, recvAfter: -1}
			if s == 0 {
				x.send = send[so:se]
			} else {
				x.send = recv[so:se]
			}
			steps = append(steps, x)
		}
		// All-gather of the reduced chunks.
		for s := 0; s < n-1; s++ {
			so, se := chunk(r - s)
			ro, re := chunk(r - s - 1)
			steps = append(steps, xfer{send: recv[so:se], recv: recv[ro:re], dep: n - 2 + s, recvAfter: -1})
		}
		return c.chain(ctx, ch, c.ringNext(), c.ringPrev(), steps, red)
	case AllGather:
		off, cnt := part(k.count, c.nch, ch)
		region := func(i int) []byte {
			i = (i%n + n) % n
			return k.recv[(i*k.count+off)*es : (i*k.count+off+cnt)*es]
		}
		mine := k.send[off*es : (off+cnt)*es]
		own := region(r)
		if !sameStart(own, mine) {
			copy(own, mine)
		}
		if n == 1 {
			return nil
		}
		var steps []xfer
		for s := 0; s < n-1; s++ {
			x := xfer{send: region(r - s), recv: region(r - s - 1), dep: s - 1, recvAfter: -1}
			if s == 0 {
				x.send = mine
			}
			steps = append(steps, x)
		}
		return c.chain(ctx, ch, c.ringNext(), c.ringPrev(), steps, red)
	case ReduceScatter:
		off, cnt := part(k.count, c.nch, ch)
		in := func(i int) []byte {
			i = (i%n + n) % n
			return k.send[(i*k.count+off)*es : (i*k.count+off+cnt)*es]
		}
		out := k.recv[off*es : (off+cnt)*es]
		if n == 1 {
			copy(out, in(0))
			return nil
		}
		// Partial sums ping-pong between two scratch chunks; the last lands in out.
		scratch := c.scratch(ch, cnt*es)
		var steps []xfer
		for s := 0; s < n-1; s++ {
			dst := scratch[s%2]
			if s == n-2 {
				dst = out
			}
			x := xfer{recv: dst, mine: in(r - 2 - s), dep: s - 1, recvAfter: s - 1}
			if s == 0 {
				x.send = in(r - 1)
			} else {
				x.send = steps[s-1].recv
			}
			steps = append(steps, x)
		}
		return c.chain(ctx, ch, c.ringNext(), c.ringPrev(), steps, red)
	case Broadcast, Reduce:
		off, cnt := part(k.count, c.nch, ch)
		send, recv := k.send[off*es:(off+cnt)*es], k.recv[off*es:(off+cnt)*es]
		if n == 1 {
			copy(recv, send)
			return nil
		}
		if k.algo == "tree" {
			return c.treeUpDown(ctx, ch, k.root, send, recv, red, k.coll == Reduce, k.coll == Broadcast)
		}
		if k.coll == Broadcast {
			p := (r - k.root + n) % n // position on the chain from the root
			if p == 0 {
				if !sameStart(recv, send) {
					copy(recv, send)
				}
				return c.chain(ctx, ch, c.ringNext(), -1, []xfer{{send: send, dep: -1, recvAfter: -1}}, red)
			}
			x := xfer{recv: recv, dep: 0, recvAfter: -1}
			next := -1
			if p < n-1 {
				x.send, next = recv, c.ringNext()
			}
			return c.chain(ctx, ch, next, c.ringPrev(), []xfer{x}, red)
		}
		p := (r - k.root - 1 + 2*n) % n // chain root+1 -> ... -> root
		if p == 0 {
			return c.chain(ctx, ch, c.ringNext(), -1, []xfer{{send: send, dep: -1, recvAfter: -1}}, red)
		}
		x := xfer{recv: recv, mine: send, dep: 0, recvAfter: -1}
		next := -1
		if p < n-1 {
			x.send, next = recv, c.ringNext()
		}
		return c.chain(ctx, ch, next, c.ringPrev(), []xfer{x}, red)
	case AllToAll:
		off, cnt := part(k.count, c.nch, ch)
		blk := func(b []byte, i int) []byte { return b[(i*k.count+off)*es : (i*k.count+off+cnt)*es] }
		copy(blk(k.recv, r), blk(k.send, r))
		var peers []int
		for s := 1; s < n; s++ {
			peers = append(peers, (r+s)%n)
		}
		return c.exchange(ctx, ch, peers, func(p int) []byte { return blk(k.send, p) }, func(p int) []byte { return blk(k.recv, p) })
	case SendRecv:
		off, cnt := part(k.count, c.nch, ch)
		send, recv := k.send[off*es:(off+cnt)*es], k.recv[off*es:(off+cnt)*es]
		if n == 1 {
			copy(recv, send)
			return nil
		}
		next, prev := c.ringNext(), c.ringPrev()
		return c.pair(ctx, ch, next, prev, send, recv)
	}
	return fmt.Errorf("collective %q not implemented", k.coll)
}

// xfer is one step of a pipelined chain: send to the next rank while receiving
// from the previous one. Received bytes are copied to recv, or reduced with mine
// into recv. Slice s of the send waits for slice s of step dep's receive; slice
// s of the receive waits for slice s of step recvAfter's send (buffer reuse).
type xfer struct {
	send, recv, mine []byte
	dep, recvAfter   int
}

// progress counts finished slices per step, shared by a chain's two goroutines.
type progress struct {
	mu   sync.Mutex
	cond *sync.Cond
	done []int
	err  error
}

func newProgress(n int) *progress {
	p := &progress{done: make([]int, n)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *progress) wait(step, slice int) error {
	if step < 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.done[step] <= slice && p.err == nil {
		p.cond.Wait()
	}
	return p.err
}

func (p *progress) mark(step, slice int) {
	p.mu.Lock()
	p.done[step] = slice + 1
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *progress) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

func slices(n, slice int) int { return (n + slice - 1) / slice }

func sliceOf(b []byte, s, slice int) []byte { return b[s*slice : min((s+1)*slice, len(b))] }

// chain runs steps to next and from prev (-1: none) on channel ch.
func (c *Comm) chain(ctx context.Context, ch, next, prev int, steps []xfer, red reduceFn) error {
	var sc, rc transport.Conn
	var err error
	if next >= 0 {
		if sc, err = c.sendConn(ctx, next, ch, 0); err != nil {
			return err
		}
	}
	if prev >= 0 {
		if rc, err = c.recvConn(ctx, prev, ch, 0); err != nil {
			return err
		}
	}
	S := c.slice
	recvd, sent := newProgress(len(steps)), newProgress(len(steps))
	var wg sync.WaitGroup
	var rerr error
	if rc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tmp := c.tmp(ch)
			for k, x := range steps {
				if x.recv == nil {
					continue
				}
				for s := range slices(len(x.recv), S) {
					if err := sent.wait(x.recvAfter, s); err != nil {
						rerr = err
						return
					}
					dst := sliceOf(x.recv, s, S)
					if x.mine == nil {
						if err := rc.Recv(dst); err != nil {
							rerr = c.xferErr("receive from", prev, ch, err)
							recvd.fail(rerr)
							c.abort(rerr)
							return
						}
					} else {
						t := tmp[:len(dst)]
						if err := rc.Recv(t); err != nil {
							rerr = c.xferErr("receive from", prev, ch, err)
							recvd.fail(rerr)
							c.abort(rerr)
							return
						}
						red(dst, t, sliceOf(x.mine, s, S))
					}
					recvd.mark(k, s)
				}
			}
		}()
	}
	var serr error
	if sc != nil {
	send:
		for k, x := range steps {
			if x.send == nil {
				continue
			}
			for s := range slices(len(x.send), S) {
				if err := recvd.wait(x.dep, s); err != nil {
					serr = err
					break send
				}
				if err := sc.Send(sliceOf(x.send, s, S)); err != nil {
					serr = c.xferErr("send to", next, ch, err)
					sent.fail(serr)
					c.abort(serr)
					break send
				}
				sent.mark(k, s)
			}
		}
	}
	wg.Wait()
	if serr != nil {
		return serr
	}
	return rerr
}

func (c *Comm) xferErr(what string, peer, ch int, err error) error {
	var wc *transport.WCError
	if errors.As(err, &wc) {
		return err // already logged by the OnError hook
	}
	return fmt.Errorf("channel %02d: %s rank %d (%s): %w", ch, what, peer, c.info[peer].Node, err)
}

// treeUpDown runs a pipelined binary-tree reduce toward root (up) and/or
// broadcast from root (down) on channel ch.
func (c *Comm) treeUpDown(ctx context.Context, ch, root int, send, recv []byte, red reduceFn, up, down bool) error {
	parent, kids := c.tree(ch%2, root)
	S := c.slice
	ns := slices(len(recv), S)
	var pSend, pRecv transport.Conn
	kSend := make([]transport.Conn, len(kids))
	kRecv := make([]transport.Conn, len(kids))
	var err error
	if parent >= 0 {
		if up {
			if pSend, err = c.sendConn(ctx, parent, ch, 0); err != nil {
				return err
			}
		}
		if down {
			if pRecv, err = c.recvConn(ctx, parent, ch, 0); err != nil {
				return err
			}
		}
	}
	for i, k := range kids {
		if up {
			if kRecv[i], err = c.recvConn(ctx, k, ch, 0); err != nil {
				return err
			}
		}
		if down {
			if kSend[i], err = c.sendConn(ctx, k, ch, 0); err != nil {
				return err
			}
		}
	}
	reduced := newProgress(1)
	fail := func(err error) error {
		reduced.fail(err)
		c.abort(err)
		return err
	}
	var wg sync.WaitGroup
	var upErr, downErr error
	if up {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tmp := c.tmp(ch)
			for s := range ns {
				acc, mine := sliceOf(recv, s, S), sliceOf(send, s, S)
				if len(kids) == 0 && !sameStart(acc, mine) {
					copy(acc, mine)
				}
				for i, kc := range kRecv {
					t := tmp[:len(acc)]
					if err := kc.Recv(t); err != nil {
						upErr = fail(c.xferErr("receive from", kids[i], ch, err))
						return
					}
					if i == 0 {
						red(acc, t, mine)
					} else {
						red(acc, t, acc)
					}
				}
				if pSend != nil {
					if err := pSend.Send(acc); err != nil {
						upErr = fail(c.xferErr("send to", parent, ch, err))
						return
					}
				}
				reduced.mark(0, s)
			}
		}()
	}
	if down {
		if !up && parent < 0 && !sameStart(recv, send) {
			copy(recv, send)
		}
		for s := range ns {
			b := sliceOf(recv, s, S)
			switch {
			case pRecv != nil:
				if err := pRecv.Recv(b); err != nil {
					downErr = fail(c.xferErr("receive from", parent, ch, err))
				}
			case up:
				downErr = reduced.wait(0, s)
			}
			if downErr != nil {
				break
			}
			for i, kc := range kSend {
				if err := kc.Send(b); err != nil {
					downErr = fail(c.xferErr("send to", kids[i], ch, err))
					break
				}
			}
			if downErr != nil {
				break
			}
		}
	}
	wg.Wait()
	if upErr != nil {
		return upErr
	}
	return downErr
}

// pair sends to next and receives from prev concurrently (sendrecv).
func (c *Comm) pair(ctx context.Context, ch, next, prev int, send, recv []byte) error {
	return c.exchangeTo(ctx, ch, []int{next}, []int{prev}, func(int) []byte { return send }, func(int) []byte { return recv })
}

// exchange sends to and receives from every peer concurrently (alltoall).
func (c *Comm) exchange(ctx context.Context, ch int, peers []int, sendBuf, recvBuf func(int) []byte) error {
	return c.exchangeTo(ctx, ch, peers, peers, sendBuf, recvBuf)
}

func (c *Comm) exchangeTo(ctx context.Context, ch int, to, from []int, sendBuf, recvBuf func(int) []byte) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(to)+len(from))
	for _, p := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.sendConn(ctx, p, ch, 1)
			if err == nil {
				b := sendBuf(p)
				for s := range slices(len(b), c.slice) {
					if err = conn.Send(sliceOf(b, s, c.slice)); err != nil {
						err = c.xferErr("send to", p, ch, err)
						break
					}
				}
			}
			if err != nil {
				errs <- err
				c.abort(err)
			}
		}()
	}
	for _, p := range from {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.recvConn(ctx, p, ch, 1)
			if err == nil {
				b := recvBuf(p)
				for s := range slices(len(b), c.slice) {
					if err = conn.Recv(sliceOf(b, s, c.slice)); err != nil {
						err = c.xferErr("receive from", p, ch, err)
						break
					}
				}
			}
			if err != nil {
				errs <- err
				c.abort(err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var first error
	for err := range errs {
		if first == nil || errors.Is(first, transport.ErrClosed) {
			first = err
		}
	}
	return first
}

// tmp is channel ch's receive staging buffer of one slice (reused: allocating
// per call would make the garbage collector part of every measurement).
func (c *Comm) tmp(ch int) []byte {
	c.bufMu.Lock()
	defer c.bufMu.Unlock()
	if c.tmps == nil {
		c.tmps = make([][]byte, c.nch)
	}
	if c.tmps[ch] == nil {
		c.tmps[ch] = make([]byte, c.slice)
	}
	return c.tmps[ch]
}

// scratch returns channel ch's two reduce-scatter partial-sum buffers of n bytes.
func (c *Comm) scratch(ch, n int) [2][]byte {
	c.bufMu.Lock()
	defer c.bufMu.Unlock()
	if c.scratches == nil {
		c.scratches = make([][2][]byte, c.nch)
	}
	s := &c.scratches[ch]
	if len(s[0]) < n {
		s[0], s[1] = make([]byte, n), make([]byte, n)
	}
	return [2][]byte{s[0][:n], s[1][:n]}
}
