package auth

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// fakeClock is a settable time source for the limiter.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func limiterAt(c *fakeClock, r rate.Limit, b int, ttl time.Duration) *Limiter {
	l := NewLimiter(r, b, ttl)
	l.now = c.now
	return l
}

func TestLimiterBurstAndRefill(t *testing.T) {
	clk := newFakeClock()
	l := limiterAt(clk, 1, 3, time.Minute) // 1 attempt/s, bursts of 3
	for i := range 3 {
		if ok, _ := l.Allow("192.0.2.1"); !ok {
			t.Fatalf("attempt %d refused within the burst", i+1)
		}
	}
	ok, retry := l.Allow("192.0.2.1")
	if ok || retry <= 0 || retry > time.Second {
		t.Fatalf("4th attempt = %v, retry %v; want refused with 0 < retry <= 1s", ok, retry)
	}
	// Refused attempts do not push the next token further away.
	for range 5 {
		l.Allow("192.0.2.1")
	}
	if ok, _ := l.Allow("192.0.2.2"); !ok {
		t.Error("another client was refused: buckets are not per client")
	}
	clk.add(retry)
	if ok, _ := l.Allow("192.0.2.1"); !ok {
		t.Error("refused after waiting retryAfter")
	}
	if ok, _ := l.Allow("192.0.2.1"); ok {
		t.Error("allowed twice after one refill")
	}
}

func TestLimiterClientKeys(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true}, // same /64
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"fe80::1%eth0", "fe80::2%eth1", true},
		{"::ffff:192.0.2.7", "192.0.2.7", true},
		{"192.0.2.7", "192.0.2.8", false},
		{"not-an-ip", "not-an-ip", true},
		{"not-an-ip", "not-an-ip2", false},
	}
	for _, tc := range tests {
		if got := clientKey(tc.a) == clientKey(tc.b); got != tc.same {
			t.Errorf("clientKey(%q)=%q, clientKey(%q)=%q: same = %v, want %v", tc.a, clientKey(tc.a), tc.b, clientKey(tc.b), got, tc.same)
		}
	}
	l := limiterAt(newFakeClock(), 1, 1, time.Minute)
	l.Allow("2001:db8::1")
	if ok, _ := l.Allow("2001:db8::2"); ok {
		t.Error("a second address in the same /64 got a fresh bucket")
	}
}

func TestLimiterMemoryBounded(t *testing.T) {
	clk := newFakeClock()
	l := limiterAt(clk, 1, 5, 10*time.Minute)
	for i := range 10_000 {
		l.Allow(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff))
	}
	if n := l.Len(); n != 10_000 {
		t.Fatalf("Len after 10,000 clients = %d, want 10000", n)
	}
	clk.add(5 * time.Minute)
	l.Allow("192.0.2.1") // still fresh: nothing expires yet
	if n := l.Len(); n != 10_001 {
		t.Errorf("Len before TTL = %d, want 10001", n)
	}
	clk.add(5*time.Minute + time.Second)
	l.Allow("192.0.2.2")
	if n := l.Len(); n != 2 {
		t.Errorf("Len after the first 10,000 went idle past the TTL = %d, want 2", n)
	}

	// A flood inside the TTL stops at the hard bound.
	l = limiterAt(clk, 1, 5, time.Hour)
	l.max = 1000
	for i := range 5000 {
		l.Allow(fmt.Sprintf("10.0.%d.%d", i>>8, i&0xff))
		if n := l.Len(); n > 1000 {
			t.Fatalf("Len = %d after %d clients, want at most 1000", n, i+1)
		}
	}
}

func TestNewLimiter(t *testing.T) {
	if l := NewLimiter(0.5, 10, time.Second); l.ttl != 20*time.Second {
		t.Errorf("ttl = %v, want raised to the refill time 20s", l.ttl)
	}
	for _, tc := range []struct {
		r     rate.Limit
		burst int
		ttl   time.Duration
	}{{0, 1, time.Second}, {1, 0, time.Second}, {1, 1, 0}, {-1, 1, time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLimiter(%v, %d, %v) did not panic", tc.r, tc.burst, tc.ttl)
				}
			}()
			NewLimiter(tc.r, tc.burst, tc.ttl)
		}()
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := NewLimiter(rate.Every(time.Hour), 50, time.Hour)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if ok, _ := l.Allow("198.51.100.1"); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 50 {
		t.Errorf("800 concurrent attempts with a burst of 50 let %d through, want 50", allowed)
	}
}
