package transport

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// SHM geometry: NCCL's default 4 MiB buffer in NCCL_STEPS=8 slots.
const (
	shmSlots    = 8
	shmSlotSize = 512 << 10
)

// shmConn is the SHM transport: data goes through slots of a file mapped by
// both processes; a Unix socket carries only slot lengths and credits.
type shmConn struct {
	ctrl net.Conn
	rd   *bufio.Reader
	mem  []byte
	mu   sync.RWMutex // held shared by Send/Recv, exclusively by Close before munmap
	seq  uint64       // next slot to fill (sender) or drain (receiver)
	free int          // sender: free slots
	off  int          // receiver: read position in the current slot
	n    int          // receiver: bytes in the current slot
}

var _ Conn = (*shmConn)(nil)

// ErrShm reports a /dev/shm segment that could not be created, as NCCL does when
// /dev/shm is too small ("failed to extend ... to N bytes").
var ErrShm = errors.New("shared memory segment")

func dialSHM(ctx context.Context, c net.Conn, h header, dir string, dst int) (Conn, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	path := filepath.Join(dir, "commlab-bench-"+hex.EncodeToString(rnd[:]))
	size := shmSlots * shmSlotSize
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrShm, path, err)
	}
	defer f.Close()
	if err := allocate(int(f.Fd()), int64(size)); err != nil {
		os.Remove(path)
		errno, _ := err.(syscall.Errno)
		return nil, ncclmsg.ShmExtend.Warning(fmt.Errorf("%w: %v", ErrShm, err), path, size, ncclmsg.Strerror(errno), int(errno))
	}
	mem, err := mapShared(int(f.Fd()), size)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("%w: mmap %s: %v", ErrShm, path, err)
	}
	h.Payload = []byte(path)
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	err = writeHeader(c, h)
	var ack [1]byte
	if err == nil {
		_, err = io.ReadFull(c, ack[:])
	}
	os.Remove(path) // both sides have it mapped now (or setup failed)
	if err != nil || ack[0] != 1 {
		unmap(mem)
		if err == nil {
			err = fmt.Errorf("rank %d could not map %s", dst, path)
		}
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &shmConn{ctrl: c, rd: bufio.NewReader(c), mem: mem, free: shmSlots}, nil
}

func acceptSHM(c net.Conn, payload []byte) (Conn, error) {
	path := string(payload)
	if !strings.HasPrefix(filepath.Base(path), "commlab-bench-") {
		return nil, fmt.Errorf("unexpected shm path %q", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		c.Write([]byte{0})
		return nil, err
	}
	defer f.Close()
	mem, err := mapShared(int(f.Fd()), shmSlots*shmSlotSize)
	if err != nil {
		c.Write([]byte{0})
		return nil, err
	}
	if _, err := c.Write([]byte{1}); err != nil {
		unmap(mem)
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &shmConn{ctrl: c, rd: bufio.NewReader(c), mem: mem}, nil
}

func (s *shmConn) Send(p []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mem == nil {
		return ErrClosed
	}
	var msg [4]byte
	for len(p) > 0 {
		for s.free == 0 {
			if _, err := io.ReadFull(s.rd, msg[:1]); err != nil {
				return netErr(err)
			}
			s.free++
		}
		slot := int(s.seq % shmSlots)
		n := copy(s.mem[slot*shmSlotSize:(slot+1)*shmSlotSize], p)
		binary.LittleEndian.PutUint32(msg[:], uint32(n))
		if _, err := s.ctrl.Write(msg[:]); err != nil {
			return netErr(err)
		}
		s.free--
		s.seq++
		p = p[n:]
	}
	return nil
}

func (s *shmConn) Recv(p []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mem == nil {
		return ErrClosed
	}
	var msg [4]byte
	for len(p) > 0 {
		if s.off == s.n {
			if _, err := io.ReadFull(s.rd, msg[:]); err != nil {
				return netErr(err)
			}
			s.n, s.off = int(binary.LittleEndian.Uint32(msg[:])), 0
			if s.n > shmSlotSize {
				return fmt.Errorf("shm: bad slot length %d", s.n)
			}
		}
		slot := int(s.seq % shmSlots)
		k := copy(p, s.mem[slot*shmSlotSize+s.off:slot*shmSlotSize+s.n])
		s.off += k
		p = p[k:]
		if s.off == s.n {
			s.seq++
			if _, err := s.ctrl.Write([]byte{1}); err != nil {
				return netErr(err)
			}
		}
	}
	return nil
}

func (s *shmConn) Close() error {
	s.ctrl.Close() // unblocks Send/Recv, which then release the read lock
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem != nil {
		unmap(s.mem)
		s.mem = nil
	}
	return nil
}

func (s *shmConn) Kind() Kind { return SHM }
func (s *shmConn) Dev() int   { return 0 }
