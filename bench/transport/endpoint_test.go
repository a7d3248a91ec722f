package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"
)

// pair listens on two endpoints of one communicator and connects rank 0 to
// rank 1 with kind over real sockets (loopback for the NET transports).
func pair(t *testing.T, kind Kind) (send, recv Conn) {
	t.Helper()
	var id [8]byte
	rand.Read(id[:])
	name := fmt.Sprintf("commlab-transport-test-%x", id)
	lo := Device{Name: "lo", IP: netip.MustParseAddr("127.0.0.1"), MTU: 1500}
	eps := make([]*Endpoint, 2)
	for r := range eps {
		ep, err := Listen(Config{CommID: 0x7e57, Rank: r, UnixName: fmt.Sprintf("%s-%d", name, r), NetDevs: []Device{lo},
			Net: kind, IBTimeout: 100 * time.Millisecond, IBRetry: 7, RocePort: 30000 + int(id[0])<<4 + int(id[1]&15),
			ShmDir: os.TempDir(), SetupTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		eps[r] = ep
		t.Cleanup(ep.Close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	send, err := eps[0].Dial(ctx, kind, 1, eps[1].Addr(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv, err = eps[1].Accept(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close(); recv.Close() })
	return send, recv
}

func TestTransportsDeliverInOrder(t *testing.T) {
	for _, kind := range []Kind{P2P, SHM, Socket, IB} {
		t.Run(kind.String(), func(t *testing.T) {
			send, recv := pair(t, kind)
			if send.Kind() != kind || recv.Kind() != kind {
				t.Errorf("connections are %v and %v, want %v", send.Kind(), recv.Kind(), kind)
			}
			// Messages of odd sizes, received in pieces that do not match them.
			sizes := []int{1, 4095, 1 << 20, 3<<20 + 7, 13}
			var want []byte
			for _, n := range sizes {
				b := make([]byte, n)
				rand.Read(b)
				want = append(want, b...)
			}
			errc := make(chan error, 1)
			go func() {
				off := 0
				for _, n := range sizes {
					if err := send.Send(want[off : off+n]); err != nil {
						errc <- err
						return
					}
					off += n
				}
				errc <- nil
			}()
			got := make([]byte, len(want))
			for off, piece := 0, 1; off < len(got); piece = piece*3 + 1 {
				n := min(piece, len(got)-off)
				if err := recv.Recv(got[off : off+n]); err != nil {
					t.Fatalf("recv at %d: %v", off, err)
				}
				off += n
			}
			if err := <-errc; err != nil {
				t.Fatalf("send: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes received differ from those sent", len(want))
			}
		})
	}
}
