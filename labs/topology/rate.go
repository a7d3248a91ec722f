package topology

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rate is a link rate in bits per second.
type Rate uint64

// Common rates.
const (
	Kbit Rate = 1000
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
	Tbit Rate = 1000 * Gbit
)

// Bounds of a shaped rate: below 1 Mbit/s tbf's granularity dominates, above
// 100 Gbit/s no single host carries it.
const (
	MinRate = 1 * Mbit
	MaxRate = 100 * Gbit
)

var rateUnits = []struct {
	suffix string
	mult   Rate
}{
	// Longest suffixes first so "mbit" is not read as "bit".
	{"tbit", Tbit}, {"gbit", Gbit}, {"mbit", Mbit}, {"kbit", Kbit}, {"bit", 1},
}

// ParseRate reads a rate with an explicit bit unit: "200Mbit", "1.5gbit",
// "800kbit". Byte units and bare numbers are refused because tc reads "bps" as
// bytes per second while people read it as bits: the mistake is a factor of 8.
func ParseRate(s string) (Rate, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("rate is empty: want e.g. 200Mbit")
	}
	low := strings.ToLower(t)
	if strings.HasSuffix(low, "bps") || strings.HasSuffix(low, "b/s") {
		return 0, fmt.Errorf("rate %q: byte units are ambiguous (tc reads bps as bytes/s); write bits, e.g. 200Mbit", s)
	}
	for _, u := range rateUnits {
		if !strings.HasSuffix(low, u.suffix) {
			continue
		}
		num := strings.TrimSpace(t[:len(t)-len(u.suffix)])
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("rate %q: %q is not a number", s, num)
		}
		if v <= 0 {
			return 0, fmt.Errorf("rate %q: must be greater than 0", s)
		}
		bits := v * float64(u.mult)
		if bits > float64(math.MaxUint64/2) {
			return 0, fmt.Errorf("rate %q: too large", s)
		}
		return Rate(math.Round(bits)), nil
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return 0, fmt.Errorf("rate %q: give a unit, e.g. %sMbit (bit, kbit, mbit, gbit)", s, t)
	}
	return 0, fmt.Errorf("rate %q: want a number and a unit (bit, kbit, mbit, gbit, tbit), e.g. 200Mbit", s)
}

// String prints the rate in the largest unit that keeps it exact, e.g. "200Mbit".
func (r Rate) String() string {
	if r == 0 {
		return "0bit"
	}
	for _, u := range []struct {
		name string
		mult Rate
	}{{"Tbit", Tbit}, {"Gbit", Gbit}, {"Mbit", Mbit}, {"Kbit", Kbit}} {
		if r%u.mult == 0 {
			return fmt.Sprintf("%d%s", r/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%dbit", uint64(r))
}

// BytesPerSecond is the rate as tc and the kernel take it.
func (r Rate) BytesPerSecond() uint64 { return uint64(r) / 8 }

// TBF sizes a tbf at r on a device whose largest packet is maxPacket bytes,
// following FAULTS.md: the bucket (burst) holds 10 ms at r and at least two
// maximal packets, so no packet is ever larger than the bucket and short
// probes do not see line rate; the queue (limit) holds 25 ms more, enough for
// TCP at sandbox RTTs without bufferbloat. Both are in bytes.
func (r Rate) TBF(maxPacket int) (burst, limit uint64) {
	bps := r.BytesPerSecond()
	burst = max(bps/100, 2*uint64(maxPacket))
	return burst, burst + bps*25/1000
}

// MarshalText implements encoding.TextMarshaler (state files, JSON).
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; "0bit" stays 0 (unshaped).
func (r *Rate) UnmarshalText(b []byte) error {
	if string(b) == "0bit" || len(b) == 0 {
		*r = 0
		return nil
	}
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
