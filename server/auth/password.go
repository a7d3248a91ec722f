package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
	"golang.org/x/crypto/argon2"
)

// Password length limits, in characters (runes). NIST SP 800-63B asks for at
// least 8 and a maximum of at least 64; 10 adds margin, 128 keeps hashing
// input bounded while leaving room for passphrases.
const (
	MinPasswordLen = 10
	MaxPasswordLen = 128
)

// Argon2Params are argon2id cost parameters.
type Argon2Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes
	Threads uint8
	SaltLen uint32 // bytes
	KeyLen  uint32 // bytes
}

// DefaultArgon2 is OWASP's first argon2id recommendation (m=19 MiB, t=2,
// p=1). Sized for a 2-core server: one hash takes tens of milliseconds and
// 19 MiB, so 100 logins at once need about 1.9 GiB at worst, where m=64 MiB
// would need 6.4 GiB; the login rate limiter keeps bursts well below that.
// p=1 because parallel lanes only help when cores are idle, and on a busy
// 2-core server they are not.
var DefaultArgon2 = Argon2Params{Memory: 19 * 1024, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// Bounds on parameters read back from a stored hash, so a tampered or
// corrupt hash cannot make verification allocate gigabytes or spin.
const (
	maxMemory  = 1 << 20 // KiB (1 GiB)
	maxTime    = 16
	minSaltLen = 8
	maxSaltLen = 64
	minKeyLen  = 16
	maxKeyLen  = 64
)

// MinPasswordScore is the least zxcvbn score (0-4) a new password needs: 3 means
// at least 10^8 guesses, so common passwords, dictionary words with digits,
// repeats (aaaaaaaaaa), sequences (1234567890, qwertyuiop) and the user's own
// email or name are refused.
const MinPasswordScore = 3

// ErrWeakPassword marks a password that is easy to guess.
var ErrWeakPassword = errors.New("password is too easy to guess")

// ErrBadHash means a stored password hash could not be parsed.
var ErrBadHash = errors.New("malformed password hash")

// ValidatePassword checks the password policy; userInputs (email, name) count
// as guessable words. Its errors are meant for the user; they never contain the
// password.
func ValidatePassword(password string, userInputs ...string) error {
	if !utf8.ValidString(password) {
		return errors.New("password is not valid UTF-8 text")
	}
	n := utf8.RuneCountInString(password)
	switch {
	case n < MinPasswordLen:
		return fmt.Errorf("password is too short: %d characters, use at least %d", n, MinPasswordLen)
	case n > MaxPasswordLen:
		return fmt.Errorf("password is too long: %d characters, use at most %d", n, MaxPasswordLen)
	case strings.TrimSpace(password) == "":
		return errors.New("password must not be only spaces")
	}
	// zxcvbn sees repeats of ASCII only: "éééééééééé" would pass it.
	distinct := map[rune]bool{}
	for _, r := range password {
		distinct[r] = true
	}
	if len(distinct) < 5 {
		return fmt.Errorf("%w: only %d different characters", ErrWeakPassword, len(distinct))
	}
	inputs := []string{"commlab"}
	for _, in := range userInputs {
		// An email counts whole, by its local part and by the words in it.
		local, _, _ := strings.Cut(in, "@")
		inputs = append(inputs, in, local)
		inputs = append(inputs, strings.FieldsFunc(local, func(r rune) bool { return strings.ContainsRune("._-+", r) })...)
	}
	if r := zxcvbn.PasswordStrength(password, inputs); r.Score < MinPasswordScore {
		return fmt.Errorf("%w: about %.0g guesses, want at least 1e8", ErrWeakPassword, r.Guesses)
	}
	return nil
}

// HashPassword checks the policy and returns password hashed with
// DefaultArgon2, as a PHC string: $argon2id$v=19$m=19456,t=2,p=1$salt$hash.
func HashPassword(password string, userInputs ...string) (string, error) {
	if err := ValidatePassword(password, userInputs...); err != nil {
		return "", err
	}
	return hashWith(password, DefaultArgon2), nil
}

// hashSlots bounds the argon2 computations running at once: each takes
// Argon2Params.Memory (19 MiB), and the login limiter is per client address,
// so 30 registrations from 30 addresses would otherwise need 30 of them at
// once (the server went from 97 MB to 981 MB). Two keep both cores busy.
var hashSlots = make(chan struct{}, 2)

// hashing counts computations in flight or waiting; the last one out hands
// the burst's memory back to the OS rather than leaving it to the heap.
var hashing atomic.Int32

func idKey(password, salt []byte, p Argon2Params) []byte {
	hashing.Add(1)
	hashSlots <- struct{}{}
	key := argon2.IDKey(password, salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	<-hashSlots
	if hashing.Add(-1) == 0 {
		go debug.FreeOSMemory() // off the request's path
	}
	return key
}

func hashWith(password string, p Argon2Params) string {
	salt := make([]byte, p.SaltLen)
	rand.Read(salt) // never fails (crypto/rand, Go 1.24+)
	key := idKey([]byte(password), salt, p)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// decodeHash parses a PHC argon2id string.
func decodeHash(encoded string) (p Argon2Params, salt, key []byte, err error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" {
		return p, nil, nil, fmt.Errorf("%w: want $argon2id$v=19$m=..,t=..,p=..$salt$hash", ErrBadHash)
	}
	if parts[1] != "argon2id" {
		return p, nil, nil, fmt.Errorf("%w: algorithm %q, want argon2id", ErrBadHash, parts[1])
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || fmt.Sprintf("v=%d", v) != parts[2] {
		return p, nil, nil, fmt.Errorf("%w: version field %q", ErrBadHash, parts[2])
	}
	if v != argon2.Version {
		return p, nil, nil, fmt.Errorf("%w: argon2 version %d, want %d", ErrBadHash, v, argon2.Version)
	}
	var threads uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &threads); err != nil ||
		fmt.Sprintf("m=%d,t=%d,p=%d", p.Memory, p.Time, threads) != parts[3] {
		return p, nil, nil, fmt.Errorf("%w: parameters %q", ErrBadHash, parts[3])
	}
	if p.Time < 1 || p.Time > maxTime || threads < 1 || threads > 255 || p.Memory < 8*threads || p.Memory > maxMemory {
		return p, nil, nil, fmt.Errorf("%w: parameters %q out of range", ErrBadHash, parts[3])
	}
	p.Threads = uint8(threads)
	b64 := base64.RawStdEncoding.Strict()
	if salt, err = b64.DecodeString(parts[4]); err != nil || len(salt) < minSaltLen || len(salt) > maxSaltLen {
		return p, nil, nil, fmt.Errorf("%w: salt is not %d to %d bytes of base64", ErrBadHash, minSaltLen, maxSaltLen)
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) < minKeyLen || len(key) > maxKeyLen {
		return p, nil, nil, fmt.Errorf("%w: hash is not %d to %d bytes of base64", ErrBadHash, minKeyLen, maxKeyLen)
	}
	p.SaltLen, p.KeyLen = uint32(len(salt)), uint32(len(key))
	return p, salt, key, nil
}

// VerifyPassword reports whether password matches the encoded hash, comparing
// in constant time. A hash that cannot be parsed is an error (ErrBadHash), not
// a mismatch, so a corrupt row is noticed rather than locking the user out
// silently.
func VerifyPassword(encoded, password string) (bool, error) {
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	// No accepted password is this long; refuse before hashing megabytes.
	if len(password) > 4*MaxPasswordLen {
		return false, nil
	}
	got := idKey([]byte(password), salt, p)
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

// dummyHash is verified against when a login names no known account; made
// on first use so importing the package costs nothing.
var dummyHash = sync.OnceValue(func() string { return hashWith("commlab-no-such-user", DefaultArgon2) })

// VerifyAbsent does the work of one VerifyPassword against a fixed hash. Call
// it when a login names an unknown email, so the reply takes as long as for a
// known one and does not reveal which accounts exist.
func VerifyAbsent(password string) {
	_, _ = VerifyPassword(dummyHash(), password)
}

// NeedsRehash reports whether encoded was made with parameters other than
// DefaultArgon2 (or cannot be parsed); after a successful login the caller
// should then store HashPassword's new hash.
func NeedsRehash(encoded string) bool {
	p, _, _, err := decodeHash(encoded)
	return err != nil || p != DefaultArgon2
}
