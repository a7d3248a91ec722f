package bootstrap

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/bench/ncclsock"
)

var lo = netip.MustParseAddr("127.0.0.1")

func TestAllGatherRing(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		root, err := NewRoot(netip.AddrPortFrom(lo, 0), 0, n, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		id, err := ParseUniqueID(root.ID().String())
		if err != nil || id != root.ID() {
			t.Fatalf("id round trip: %v %v", id, err)
		}
		var wg sync.WaitGroup
		got := make([][][]byte, n)
		errs := make([]error, n)
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := Init(context.Background(), id, r, n, lo, 5*time.Second, ncclsock.Dialer{})
				if err != nil {
					errs[r] = err
					return
				}
				defer b.Close()
				got[r], errs[r] = b.AllGather(context.Background(), []byte(fmt.Sprintf("rank%d", r)))
			}()
		}
		wg.Wait()
		if err := root.Wait(); err != nil {
			t.Fatal(err)
		}
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, errs[r])
			}
			for q := range n {
				if string(got[r][q]) != fmt.Sprintf("rank%d", q) {
					t.Errorf("n=%d rank %d slot %d = %q", n, r, q, got[r][q])
				}
			}
		}
	}
}

func TestMissingRankTimesOut(t *testing.T) {
	root, err := NewRoot(netip.AddrPortFrom(lo, 0), 0, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, ierr := Init(context.Background(), root.ID(), 0, 3, lo, time.Second, ncclsock.Dialer{})
	rerr := root.Wait()
	if ierr == nil || rerr == nil {
		t.Fatalf("want errors, got rank %v, root %v", ierr, rerr)
	}
	if !strings.Contains(rerr.Error(), "missing ranks [1 2]") {
		t.Errorf("root error does not name the missing ranks: %v", rerr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s, want about the 1s timeout", d)
	}
}

func TestRootUnreachable(t *testing.T) {
	id := UniqueID{Magic: 1, Root: netip.AddrPortFrom(lo, 1)} // nothing listens on port 1
	_, err := Init(context.Background(), id, 1, 2, lo, 500*time.Millisecond, ncclsock.Dialer{})
	if err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Errorf("want a timeout naming the root, got %v", err)
	}
}
