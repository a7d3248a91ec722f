package auth

import (
	"container/list"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiterEntries bounds a Limiter's memory whatever the traffic: about
// 200 bytes an entry, so at most ~20 MB. Past it the least recently seen
// client is forgotten (its bucket starts full again), which only matters
// under a flood of distinct addresses.
const maxLimiterEntries = 100_000

// Limiter is a token bucket per client, for login and signup attempts.
// Clients idle for longer than the TTL are forgotten, so memory follows the
// number of recently active clients. IPv6 clients are keyed by their /64,
// the block one host usually controls, so rotating addresses buys nothing.
type Limiter struct {
	rate  rate.Limit
	burst int
	ttl   time.Duration
	now   func() time.Time // for tests

	mu      sync.Mutex
	entries map[string]*list.Element // key -> element holding *limiterEntry
	lru     list.List                // front = most recently seen
	max     int
}

type limiterEntry struct {
	key  string
	lim  *rate.Limiter
	seen time.Time
}

// NewLimiter allows each client r events per second with bursts of burst,
// and forgets clients idle for ttl. ttl should be at least burst/r, the time
// a bucket takes to refill, or a forgotten client gets a full bucket early;
// shorter values are raised to that. It panics on non-positive arguments,
// which are programming errors.
func NewLimiter(r rate.Limit, burst int, ttl time.Duration) *Limiter {
	if r <= 0 || burst < 1 || ttl <= 0 {
		panic(fmt.Sprintf("auth.NewLimiter(%v, %d, %v): rate, burst and ttl must be positive", r, burst, ttl))
	}
	if r != rate.Inf {
		if refill := time.Duration(float64(burst) / float64(r) * float64(time.Second)); ttl < refill {
			ttl = refill
		}
	}
	return &Limiter{rate: r, burst: burst, ttl: ttl, now: time.Now, entries: map[string]*list.Element{}, max: maxLimiterEntries}
}

// Allow takes one token from ip's bucket. When the bucket is empty it
// returns false and how long until a token is available (for Retry-After).
func (l *Limiter) Allow(ip string) (ok bool, retryAfter time.Duration) {
	key := clientKey(ip)
	now := l.now()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.evict(now)
	var e *limiterEntry
	if el, found := l.entries[key]; found {
		e = el.Value.(*limiterEntry)
		l.lru.MoveToFront(el)
	} else {
		e = &limiterEntry{key: key, lim: rate.NewLimiter(l.rate, l.burst)}
		l.entries[key] = l.lru.PushFront(e)
	}
	e.seen = now
	res := e.lim.ReserveN(now, 1)
	if !res.OK() {
		return false, l.ttl
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now) // a refused attempt does not use up the future token
		return false, d
	}
	return true, 0
}

// evict drops clients idle for longer than the TTL, oldest first, and the
// least recently seen ones beyond the size bound. The list is ordered by
// last use, so this stops at the first fresh entry: O(1) amortized.
func (l *Limiter) evict(now time.Time) {
	for {
		back := l.lru.Back()
		if back == nil {
			return
		}
		e := back.Value.(*limiterEntry)
		if now.Sub(e.seen) <= l.ttl && l.lru.Len() < l.max {
			return
		}
		l.lru.Remove(back)
		delete(l.entries, e.key)
	}
}

// Len returns the number of clients currently tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// clientKey folds an IPv6 address to its /64 and an IPv4-mapped IPv6
// address to IPv4. A string that is not an IP (a unix-socket peer, say) is
// used as it is.
func clientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return ip
	}
	return p.String()
}
