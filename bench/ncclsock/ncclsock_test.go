package ncclsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// TestDecide: what each release does with each connect error.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		rel   string
		errno syscall.Errno
		want  action
	}{
		{"2.24", syscall.ECONNREFUSED, retry},
		{"2.24", syscall.ETIMEDOUT, noPollout},
		{"2.26", syscall.EHOSTUNREACH, noPollout},
		{"2.26", syscall.ENETUNREACH, fail},
		{"2.27", syscall.ETIMEDOUT, retry},
		{"2.27", syscall.EHOSTUNREACH, retry},
		{"2.28", syscall.ECONNREFUSED, retry},
		{"2.28", syscall.ENETUNREACH, fail},
		{"2.28", syscall.ECONNABORTED, fail},
	} {
		rel, err := ncclmsg.ParseRelease(tc.rel)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := decide(rel, tc.errno); got != tc.want {
			t.Errorf("%s %v: action %d, want %d", tc.rel, tc.errno, got, tc.want)
		}
	}
}

type lines struct {
	mu   sync.Mutex
	info []string
	warn []string
}

func (l *lines) Info(subs, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = append(l.info, subs+" "+fmt.Sprintf(format, args...))
}

func (l *lines) Warn(where, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warn = append(l.warn, where+" "+fmt.Sprintf(format, args...))
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	return a
}

// TestRefusedRetriesThenRemoteError: a refused connect is retried with growing
// sleeps and ends in ncclRemoteError, worded as each release words it.
func TestRefusedRetriesThenRemoteError(t *testing.T) {
	for _, tc := range []struct {
		rel, info, warn string
	}{
		{"2.28", "NET|INIT socketPollConnect: connect to 127.0.0.1<PORT> returned Connection refused, retrying (2/2) after sleep for 2 msec",
			"misc/socket.cc:582 socketPollConnect: connect to 127.0.0.1<PORT> returned Connection refused, exceeded error retry count after 3 attempts"},
		{"2.25", "ALL socketPollConnect: connect returned Connection refused, retrying (2/2) after sleep for 2 msec",
			"misc/socket.cc:543 socketPollConnect: connect returned Connection refused, exceeded error retry count (3)"},
	} {
		rel, _ := ncclmsg.ParseRelease(tc.rel)
		addr := closedPort(t)
		port := func(s string) string { return strings.ReplaceAll(s, "PORT", fmt.Sprint(addr.Port())) }
		var l lines
		_, err := Dialer{Release: rel, RetryCnt: 2, Sleep: time.Millisecond, Log: &l}.Dial(context.Background(), addr)
		var e *Error
		if !errors.As(err, &e) || e.Code != RemoteError || e.Errno != syscall.ECONNREFUSED {
			t.Fatalf("%s: %v, want a remote error after refused connects", tc.rel, err)
		}
		if len(l.info) != 2 || l.info[1] != port(tc.info) {
			t.Errorf("%s: INFO lines %q, want 2 ending with %q", tc.rel, l.info, port(tc.info))
		}
		if len(l.warn) != 1 || l.warn[0] != port(tc.warn) {
			t.Errorf("%s: WARN lines %q, want %q", tc.rel, l.warn, port(tc.warn))
		}
	}
}

// TestDeadlineFirst: when the caller's deadline ends the retries, Dial says so
// and carries no NCCL return code.
func TestDeadlineFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := Dialer{Sleep: 100 * time.Millisecond}.Dial(ctx, closedPort(t))
	var e *Error
	if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), "no answer within the deadline") {
		t.Errorf("got %v, want the deadline", err)
	}
}
