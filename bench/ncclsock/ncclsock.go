// Package ncclsock connects TCP sockets the way NCCL's misc/socket.cc does in a
// given release: which connect errors it retries, the sleeps between attempts,
// the lines it logs, and the return code when it gives up.
//
// Each attempt waits for connect() as the kernel answers it: a refused connect
// fails at once, a host whose ARP gets no answer after about 3 s (EHOSTUNREACH),
// a silently dropped SYN after about 127 s (ETIMEDOUT, tcp_syn_retries=6).
// ENETUNREACH (no route) fails connect() itself and is never retried. Refused
// connects are retried in every release; timeouts and EHOSTUNREACH only from
// 2.27 (NCCL issue #1618): before, the error wakes poll() before the kernel
// closes the socket, poll returns POLLERR without POLLOUT, and NCCL gives up at
// once with ncclSystemError (2). Retries used up give ncclRemoteError (6).
package ncclsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// NCCL's return codes for a failed connect.
const (
	SystemError = 2 // ncclSystemError
	RemoteError = 6 // ncclRemoteError
)

// Defaults of NCCL_SOCKET_RETRY_CNT and NCCL_SOCKET_RETRY_SLEEP_MSEC (2.24-2.28).
const (
	DefaultRetryCnt = 34
	DefaultSleep    = 100 * time.Millisecond
)

// Logger prints NCCL debug lines; where is a message's file:line.
type Logger interface {
	Info(subs, format string, args ...any)
	Warn(where, format string, args ...any)
}

// Dialer connects like NCCL of one release. The zero value is NCCL 2.28.9's
// defaults without logging.
type Dialer struct {
	Release  ncclmsg.Release
	RetryCnt int           // NCCL_SOCKET_RETRY_CNT; 0: 34
	Sleep    time.Duration // NCCL_SOCKET_RETRY_SLEEP_MSEC; the n-th retry sleeps n times this; 0: 100 ms
	Local    netip.Addr    // source address; zero: any
	Log      Logger
}

// Error is a connect that NCCL would give up on, with its return code.
type Error struct {
	Code  int           // SystemError or RemoteError
	Errno syscall.Errno // the last connect error
	Msg   string        // NCCL's WARN text
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Errno }

type action int

const (
	retry     action = iota
	noPollout        // 2.24-2.26: poll() woke without POLLOUT; system error at once
	fail             // not retried; system error at once
)

// decide is what release rel does with a connect error: retry it or give up,
// and the function of misc/socket.cc that reports it.
func decide(rel ncclmsg.Release, errno syscall.Errno) (fn string, a action) {
	switch {
	case errno == syscall.ECONNREFUSED:
		return "socketPollConnect", retry
	case errno == syscall.ETIMEDOUT || errno == syscall.EHOSTUNREACH:
		if rel.RetriesOnTimeout() {
			return "socketPollConnect", retry
		}
		return "socketPollConnect", noPollout
	case errno == syscall.ENETUNREACH: // connect() itself fails: no route
		return "socketStartConnect", fail
	}
	return "socketPollConnect", fail
}

// Dial connects to addr. It returns an *Error when NCCL would give up, or,
// when ctx's deadline comes first (the emulation's own), an error that says so.
func (d Dialer) Dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	rel := d.Release
	if rel == (ncclmsg.Release{}) {
		rel = ncclmsg.Default
	}
	retryCnt, sleep := d.RetryCnt, d.Sleep
	if retryCnt <= 0 {
		retryCnt = DefaultRetryCnt
	}
	if sleep <= 0 {
		sleep = DefaultSleep
	}
	msgs := rel.Socket()
	peer := fmt.Sprintf("%s<%d>", addr.Addr(), addr.Port())
	warn := func(m ncclmsg.Msg, code int, errno syscall.Errno, args ...any) error {
		e := &Error{Code: code, Errno: errno, Msg: m.Sprintf(args...)}
		if d.Log != nil {
			d.Log.Warn(m.Src, "%s", e.Msg)
		}
		return e
	}
	nd := net.Dialer{}
	if d.Local.IsValid() {
		nd.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(d.Local, 0))
	}
	for retries := 0; ; {
		c, err := nd.DialContext(ctx, "tcp", addr.String())
		if err == nil {
			return c, nil
		}
		var errno syscall.Errno
		if ctx.Err() != nil || !errors.As(err, &errno) {
			return nil, deadline(ctx, err)
		}
		fn, action := decide(rel, errno)
		switch action {
		case noPollout:
			return nil, warn(msgs.NoPollout, SystemError, errno, 1, ", no POLLOUT events")
		case fail:
			return nil, warn(msgs.Failed, SystemError, errno, fn, peer, ncclmsg.Strerror(errno))
		}
		if retries == retryCnt {
			retries++
			if msgs.NamesPeer {
				return nil, warn(msgs.Exceeded, RemoteError, errno, fn, peer, ncclmsg.Strerror(errno), retries)
			}
			return nil, warn(msgs.Exceeded, RemoteError, errno, fn, ncclmsg.Strerror(errno), retries)
		}
		retries++
		wait := time.Duration(retries) * sleep
		if d.Log != nil {
			if msgs.NamesPeer {
				d.Log.Info(msgs.RetrySubsys, "%s", msgs.Retry.Sprintf(fn, peer, ncclmsg.Strerror(errno), retries, retryCnt, wait.Milliseconds()))
			} else {
				d.Log.Info(msgs.RetrySubsys, "%s", msgs.Retry.Sprintf(fn, ncclmsg.Strerror(errno), retries, retryCnt, wait.Milliseconds()))
			}
		}
		select {
		case <-ctx.Done():
			return nil, deadline(ctx, err)
		case <-time.After(wait):
		}
	}
}

// deadline words a connect that the caller's deadline ended while NCCL would
// still be waiting for connect() or retrying.
func deadline(ctx context.Context, last error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(last, os.ErrDeadlineExceeded) {
		return fmt.Errorf("no answer within the deadline; NCCL would still be retrying (last error: %w)", last)
	}
	return last
}
