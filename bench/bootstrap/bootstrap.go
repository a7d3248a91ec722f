// Package bootstrap connects the ranks of a commlab bench communicator the way
// NCCL bootstraps: rank 0 creates a unique id (a random magic plus the address of
// a root listener), the id reaches every rank out of band, each rank checks in
// with the root, the root hands each rank the address of its ring successor, and
// the ranks then exchange their information with a ring all-gather. Every wait
// has a deadline; a rank that does not answer yields an error naming it.
package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/commlab/commlab/bench/ncclsock"
)

// UniqueID identifies a communicator and where its root listens, like ncclUniqueId.
type UniqueID struct {
	Magic uint64
	Root  netip.AddrPort
}

// String encodes the id for an environment variable: <16 hex digits>@<ip:port>.
func (u UniqueID) String() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], u.Magic)
	return hex.EncodeToString(b[:]) + "@" + u.Root.String()
}

// ParseUniqueID decodes String's form.
func ParseUniqueID(s string) (UniqueID, error) {
	m, a, ok := strings.Cut(s, "@")
	if !ok {
		return UniqueID{}, fmt.Errorf("unique id %q: want <hex magic>@<ip:port>", s)
	}
	b, err := hex.DecodeString(m)
	if err != nil || len(b) != 8 {
		return UniqueID{}, fmt.Errorf("unique id %q: magic is not 16 hex digits", s)
	}
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		return UniqueID{}, fmt.Errorf("unique id %q: %w", s, err)
	}
	return UniqueID{Magic: binary.BigEndian.Uint64(b), Root: ap}, nil
}

// Root is the rendezvous listener run by rank 0's process.
type Root struct {
	ln     *net.TCPListener
	id     UniqueID
	nranks int
	done   chan error
}

// NewRoot listens on listen (port 0 picks one) with the given magic (0: random) and serves one bootstrap of nranks
// ranks in the background; Wait returns its outcome.
func NewRoot(listen netip.AddrPort, magic uint64, nranks int, timeout time.Duration) (*Root, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(listen))
	if err != nil {
		return nil, fmt.Errorf("bootstrap root: listen on %s: %w", listen, err)
	}
	if magic == 0 {
		var b [8]byte
		rand.Read(b[:])
		magic = binary.LittleEndian.Uint64(b[:])
	}
	r := &Root{
		ln:     ln,
		id:     UniqueID{Magic: magic, Root: ln.Addr().(*net.TCPAddr).AddrPort()},
		nranks: nranks,
		done:   make(chan error, 1),
	}
	go func() { r.done <- r.serve(timeout) }()
	return r, nil
}

// ID is the unique id to hand to every rank.
func (r *Root) ID() UniqueID { return r.id }

// Wait returns when the root has served every rank, or failed.
func (r *Root) Wait() error { return <-r.done }

// Close stops the root.
func (r *Root) Close() { r.ln.Close() }

type checkIn struct {
	conn   net.Conn
	listen string
}

func (r *Root) serve(timeout time.Duration) error {
	defer r.ln.Close()
	deadline := time.Now().Add(timeout)
	r.ln.SetDeadline(deadline)
	ranks := make(map[int]checkIn)
	defer func() {
		for _, c := range ranks {
			c.conn.Close()
		}
	}()
	for len(ranks) < r.nranks {
		c, err := r.ln.Accept()
		if err != nil {
			var missing []int
			for i := range r.nranks {
				if _, ok := ranks[i]; !ok {
					missing = append(missing, i)
				}
			}
			if isTimeout(err) {
				return fmt.Errorf("bootstrap root: %d of %d ranks checked in within %s; missing ranks %v", len(ranks), r.nranks, timeout, missing)
			}
			return fmt.Errorf("bootstrap root: accept: %w", err)
		}
		c.SetDeadline(deadline)
		magic, rank, nranks, listen, err := readCheckIn(c)
		if err != nil || magic != r.id.Magic {
			c.Close()
			continue
		}
		if nranks != r.nranks || rank < 0 || rank >= nranks {
			c.Close()
			return fmt.Errorf("bootstrap root: rank %d says nranks %d, want %d", rank, nranks, r.nranks)
		}
		if _, dup := ranks[rank]; dup {
			c.Close()
			return fmt.Errorf("bootstrap root: rank %d checked in twice", rank)
		}
		ranks[rank] = checkIn{c, listen}
	}
	for i := range r.nranks {
		next := ranks[(i+1)%r.nranks].listen
		if err := writeBlob(ranks[i].conn, []byte(next)); err != nil {
			return fmt.Errorf("bootstrap root: send ring address to rank %d: %w", i, err)
		}
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func readCheckIn(c net.Conn) (magic uint64, rank, nranks int, listen string, err error) {
	var h [16]byte
	if _, err = io.ReadFull(c, h[:]); err != nil {
		return
	}
	magic = binary.LittleEndian.Uint64(h[:])
	rank = int(int32(binary.LittleEndian.Uint32(h[8:])))
	nranks = int(int32(binary.LittleEndian.Uint32(h[12:])))
	b, err := readBlob(c, 256)
	return magic, rank, nranks, string(b), err
}

func writeBlob(w io.Writer, b []byte) error {
	buf := make([]byte, 4+len(b))
	binary.LittleEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err := w.Write(buf)
	return err
}

func readBlob(r io.Reader, limit int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(h[:]))
	if n > limit {
		return nil, fmt.Errorf("message of %d bytes exceeds %d", n, limit)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// Bootstrap is one rank's ring of bootstrap connections.
type Bootstrap struct {
	Rank, NRanks int
	next, prev   net.Conn
	timeout      time.Duration
	mu           sync.Mutex
}

const maxBlob = 64 << 20

// Init joins the communicator id as rank of nranks, listening on listenIP for
// its ring predecessor. Every step must finish within timeout.
// Connects (to the root, to the ring successor) go through dial, which retries
// and gives up as NCCL's socket layer does.
func Init(ctx context.Context, id UniqueID, rank, nranks int, listenIP netip.Addr, timeout time.Duration, dial ncclsock.Dialer) (*Bootstrap, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("bootstrap: rank %d of %d is out of range", rank, nranks)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(listenIP, 0)))
	if err != nil {
		return nil, fmt.Errorf("bootstrap: listen on %s: %w", listenIP, err)
	}
	defer ln.Close()
	ln.SetDeadline(deadline)

	root, err := dial.Dial(ctx, id.Root)
	var gaveUp *ncclsock.Error
	switch {
	case errors.As(err, &gaveUp):
		return nil, fmt.Errorf("bootstrap: rank %d: connect to root %s: %w", rank, id.Root, err)
	case err != nil:
		return nil, fmt.Errorf("bootstrap: rank %d: connect to root %s within %s: %w", rank, id.Root, timeout, err)
	}
	defer root.Close()
	root.SetDeadline(deadline)
	var h [16]byte
	binary.LittleEndian.PutUint64(h[:], id.Magic)
	binary.LittleEndian.PutUint32(h[8:], uint32(rank))
	binary.LittleEndian.PutUint32(h[12:], uint32(nranks))
	if _, err := root.Write(h[:]); err != nil {
		return nil, fmt.Errorf("bootstrap: rank %d: check in with root %s: %w", rank, id.Root, err)
	}
	if err := writeBlob(root, []byte(ln.Addr().String())); err != nil {
		return nil, fmt.Errorf("bootstrap: rank %d: check in with root %s: %w", rank, id.Root, err)
	}
	nextAddr, err := readBlob(root, 256)
	if err != nil {
		if isTimeout(err) {
			return nil, fmt.Errorf("bootstrap: rank %d: root %s did not hand out the ring within %s (a peer did not check in)", rank, id.Root, timeout)
		}
		return nil, fmt.Errorf("bootstrap: rank %d: read ring address from root %s: %w", rank, id.Root, err)
	}

	b := &Bootstrap{Rank: rank, NRanks: nranks, timeout: timeout}
	type acc struct {
		c   net.Conn
		err error
	}
	accCh := make(chan acc, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				accCh <- acc{nil, err}
				return
			}
			c.SetDeadline(deadline)
			var m [12]byte
			if _, err := io.ReadFull(c, m[:]); err != nil || binary.LittleEndian.Uint64(m[:]) != id.Magic {
				c.Close()
				continue
			}
			c.SetDeadline(time.Time{})
			accCh <- acc{c, nil}
			return
		}
	}()
	nextAP, err := netip.ParseAddrPort(string(nextAddr))
	if err != nil {
		return nil, fmt.Errorf("bootstrap: rank %d: root %s handed out a bad address %q", rank, id.Root, nextAddr)
	}
	next, err := dial.Dial(ctx, nextAP)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: rank %d: connect to rank %d at %s: %w", rank, (rank+1)%nranks, nextAddr, err)
	}
	var m [12]byte
	binary.LittleEndian.PutUint64(m[:], id.Magic)
	binary.LittleEndian.PutUint32(m[8:], uint32(rank))
	if _, err := next.Write(m[:]); err != nil {
		next.Close()
		return nil, fmt.Errorf("bootstrap: rank %d: greet rank %d: %w", rank, (rank+1)%nranks, err)
	}
	a := <-accCh
	if a.err != nil {
		next.Close()
		return nil, fmt.Errorf("bootstrap: rank %d: rank %d did not connect within %s: %w", rank, (rank-1+nranks)%nranks, timeout, a.err)
	}
	b.next, b.prev = next, a.c
	return b, nil
}

// Close closes the ring connections.
func (b *Bootstrap) Close() {
	b.next.Close()
	b.prev.Close()
}

// AllGather gives every rank the data of every rank, indexed by rank.
func (b *Bootstrap) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	b.next.SetDeadline(deadline)
	b.prev.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() {
		b.next.SetDeadline(time.Unix(1, 0))
		b.prev.SetDeadline(time.Unix(1, 0))
	})
	defer stop()
	n := b.NRanks
	out := make([][]byte, n)
	out[b.Rank] = data
	for k := 0; k < n-1; k++ {
		si := (b.Rank - k + n) % n
		ri := (b.Rank - k - 1 + n) % n
		errc := make(chan error, 1)
		go func() { errc <- writeBlob(b.next, out[si]) }()
		got, err := readBlob(b.prev, maxBlob)
		serr := <-errc
		if err != nil {
			return nil, fmt.Errorf("bootstrap all-gather: receive from rank %d: %w", (b.Rank-1+n)%n, describe(err, b.timeout))
		}
		if serr != nil {
			return nil, fmt.Errorf("bootstrap all-gather: send to rank %d: %w", (b.Rank+1)%n, describe(serr, b.timeout))
		}
		out[ri] = got
	}
	return out, nil
}

func describe(err error, timeout time.Duration) error {
	if isTimeout(err) {
		return fmt.Errorf("peer did not answer within %s: %w", timeout, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("peer closed the connection (did it exit?): %w", err)
	}
	return err
}

// Barrier returns when every rank has entered it.
func (b *Bootstrap) Barrier(ctx context.Context) error {
	_, err := b.AllGather(ctx, nil)
	return err
}
