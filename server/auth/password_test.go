package auth

import (
	"errors"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var phc = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestPasswordRoundTrip(t *testing.T) {
	const pw = "correct horse battery"
	h, err := HashPassword(pw)
	if err != nil {
		t.Fatalf("HashPassword: %v", err)
	}
	if !phc.MatchString(h) {
		t.Errorf("hash %q is not a PHC argon2id string with the default parameters", h)
	}
	if h2, _ := HashPassword(pw); h2 == h {
		t.Error("two hashes of one password are equal: salt not random")
	}
	tests := []struct {
		pw   string
		want bool
	}{
		{pw, true},
		{"correct horse battery ", false},
		{"Correct horse battery", false},
		{"", false},
		{strings.Repeat("x", 4*MaxPasswordLen+1), false},
	}
	for _, tc := range tests {
		got, err := VerifyPassword(h, tc.pw)
		if err != nil || got != tc.want {
			t.Errorf("VerifyPassword(hash, %.30q) = %v, %v; want %v, nil", tc.pw, got, err, tc.want)
		}
	}
}

func TestPasswordPolicy(t *testing.T) {
	tests := []struct {
		pw      string
		wantErr string // "" = accepted
	}{
		{"123456789", "too short: 9 characters, use at least 10"},
		{"wsx!RFV9mk", ""},
		{"ééééééééé", "too short: 9"}, // 18 bytes, 9 characters
		{"紫色长颈鹿在跑步机上", ""},            // 30 bytes, 10 characters
		{long128(), ""},
		// Easy to guess (issue 18: aaaaaaaaaa was accepted).
		{"aaaaaaaaaa", "too easy to guess"},
		{"éééééééééé", "too easy to guess"},
		{"1234567890", "too easy to guess"},
		{"qwertyuiop", "too easy to guess"},
		{"password123", "too easy to guess"},
		{"abcabcabca", "too easy to guess"},
		{"commlab2026", "too easy to guess"},
		{strings.Repeat("a", 128), "too easy to guess"},
		{strings.Repeat("a", 129), "too long: 129 characters, use at most 128"},
		{strings.Repeat(" ", 12), "only spaces"},
		{"abcdefghi\xff", "not valid UTF-8"},
	}
	for _, tc := range tests {
		err := ValidatePassword(tc.pw)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ValidatePassword(%q) = %v, want nil", tc.pw, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ValidatePassword(%q) = %v, want error containing %q", tc.pw, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), tc.pw):
			t.Errorf("ValidatePassword error %q repeats the password", err)
		}
		if tc.wantErr != "" {
			if _, err := HashPassword(tc.pw); err == nil {
				t.Errorf("HashPassword(%q) accepted a password the policy refuses", tc.pw)
			}
		}
	}
}

func TestTamperedHash(t *testing.T) {
	h := hashWith("tamper-proof-pw", Argon2Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
	parts := strings.Split(h, "$")
	salt, key := parts[4], parts[5]
	malformed := []string{
		"",
		"plaintext-password",
		"$2a$10$abcdefghijklmnopqrstuuCsoD1l7nBzl3rTn1FMi6fqBPbyjG4Fa", // bcrypt
		"$argon2i$v=19$m=64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=18$m=64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + key + "$",
		"$argon2id$v=19$m=x,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=+64,t=1,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=4294967295,t=1,p=1$" + salt + "$" + key, // would allocate 4 TiB
		"$argon2id$v=19$m=64,t=0,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1000000,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=0$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "!$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt[:8] + "$" + key,
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + key[:10],
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + key + "==",
	}
	for _, enc := range malformed {
		ok, err := VerifyPassword(enc, "tamper-proof-pw")
		if ok || !errors.Is(err, ErrBadHash) {
			t.Errorf("VerifyPassword(%q) = %v, %v; want false, ErrBadHash", enc, ok, err)
		}
		if !NeedsRehash(enc) {
			t.Errorf("NeedsRehash(%q) = false for a malformed hash", enc)
		}
	}
	// Well-formed but altered: a mismatch, not an error.
	flip := func(s string) string {
		b := []byte(s)
		if b[5] == 'A' {
			b[5] = 'B'
		} else {
			b[5] = 'A'
		}
		return string(b)
	}
	altered := []string{
		"$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + flip(key),
		"$argon2id$v=19$m=64,t=1,p=1$" + flip(salt) + "$" + key,
		"$argon2id$v=19$m=64,t=2,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=128,t=1,p=1$" + salt + "$" + key,
	}
	for _, enc := range altered {
		ok, err := VerifyPassword(enc, "tamper-proof-pw")
		if ok || err != nil {
			t.Errorf("VerifyPassword(%q) = %v, %v; want false, nil", enc, ok, err)
		}
	}
	if ok, err := VerifyPassword(h, "tamper-proof-pw"); !ok || err != nil {
		t.Errorf("VerifyPassword(original) = %v, %v; want true, nil", ok, err)
	}
}

func TestNeedsRehash(t *testing.T) {
	cur, err := HashPassword("up-to-date-password")
	if err != nil {
		t.Fatal(err)
	}
	weak := DefaultArgon2
	weak.Memory, weak.Time = 4096, 1
	tests := []struct {
		name string
		hash string
		want bool
	}{
		{"default parameters", cur, false},
		{"weaker parameters", hashWith("old-password", weak), true},
		{"longer key", hashWith("old-password", Argon2Params{Memory: 19456, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 64}), true},
		{"garbage", "nope", true},
	}
	for _, tc := range tests {
		if got := NeedsRehash(tc.hash); got != tc.want {
			t.Errorf("NeedsRehash(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestVerifyAbsentCostsAVerify checks the unknown-account path really runs
// argon2: if it returned at once, response times would reveal which
// emails have accounts.
func TestVerifyAbsentCostsAVerify(t *testing.T) {
	h, err := HashPassword("timing-password")
	if err != nil {
		t.Fatal(err)
	}
	VerifyAbsent("warm-up") // first call also makes the dummy hash
	minOf := func(f func()) time.Duration {
		best := time.Hour
		for range 3 {
			start := time.Now()
			f()
			best = min(best, time.Since(start))
		}
		return best
	}
	verify := minOf(func() { VerifyPassword(h, "wrong-password") })
	absent := minOf(func() { VerifyAbsent("wrong-password") })
	t.Logf("VerifyPassword %v, VerifyAbsent %v", verify, absent)
	if absent < verify/3 {
		t.Errorf("VerifyAbsent took %v, VerifyPassword %v: the unknown-account path is distinguishable", absent, verify)
	}
}

func BenchmarkHashPassword(b *testing.B) {
	for b.Loop() {
		if _, err := HashPassword("benchmark-password"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHashPasswordParallel(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := HashPassword("benchmark-password"); err != nil {
				b.Error(err)
			}
		}
	})
}

// long128 is a 128-character password with no pattern zxcvbn would find.
func long128() string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!@#%^&*-_=+"
	b := make([]byte, 128)
	for i := range b {
		b[i] = alphabet[(i*37+i*i*11+5)%len(alphabet)]
	}
	return string(b)
}

func TestPasswordNotTheUsersOwn(t *testing.T) {
	if err := ValidatePassword("wang.xiaoming1", "wang.xiaoming@example.com", "王小明"); !errors.Is(err, ErrWeakPassword) {
		t.Errorf("a password made of the email = %v, want ErrWeakPassword", err)
	}
}

// BenchmarkHashBurst: 30 registrations at once, as in the load run.
// Reports the peak heap while they hash; the hash slots bound it to about
// two argon2 blocks (2 x 19 MiB) whatever the burst.
func BenchmarkHashBurst(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
				}
			}
		}()
		var wg sync.WaitGroup
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := HashPassword("wsx!RFV9mk2"); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		close(stop)
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		time.Sleep(500 * time.Millisecond) // the last hash hands memory back in the background
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapSys-ms.HeapReleased)/(1<<20), "heap-held-after-MiB")
	}
}
