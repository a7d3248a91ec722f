package transport

import (
	"io"
	"net"
	"sync"
)

// minTask is the smallest piece a message is cut into across sockets, like
// NCCL's NET/Socket (64 KiB): small messages use fewer sockets.
const minTask = 64 << 10

// socketConn is NET/Socket: one message is split across several TCP sockets,
// each served by its own goroutine (NCCL's helper threads).
type socketConn struct {
	socks []net.Conn
	dev   int
}

var _ Conn = (*socketConn)(nil)

// split returns how many sockets carry a message of n bytes and the size of each part.
func split(n, nsocks int) (parts, size int) {
	parts = (n + minTask - 1) / minTask
	parts = max(1, min(parts, nsocks))
	return parts, (n + parts - 1) / parts
}

func (s *socketConn) each(p []byte, f func(c net.Conn, b []byte) error) error {
	parts, size := split(len(p), len(s.socks))
	if parts == 1 {
		return netErr(f(s.socks[0], p))
	}
	var wg sync.WaitGroup
	errs := make([]error, parts)
	for i := range parts {
		lo := min(i*size, len(p))
		hi := min(lo+size, len(p))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(s.socks[i], p[lo:hi])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return netErr(err)
		}
	}
	return nil
}

func (s *socketConn) Send(p []byte) error {
	return s.each(p, func(c net.Conn, b []byte) error { _, err := c.Write(b); return err })
}

func (s *socketConn) Recv(p []byte) error {
	return s.each(p, func(c net.Conn, b []byte) error { _, err := io.ReadFull(c, b); return err })
}

func (s *socketConn) Close() error {
	for _, c := range s.socks {
		c.Close()
	}
	return nil
}

func (s *socketConn) Kind() Kind { return Socket }
func (s *socketConn) Dev() int   { return s.dev }
