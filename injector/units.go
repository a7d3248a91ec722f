package injector

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Rate is a link rate in bits per second. Its text form is tc's (100mbit); a unit
// is required, because a bare number means bits in tc and bytes elsewhere.
type Rate uint64

var rateUnits = []struct {
	suffix string
	mult   float64
}{
	{"tibit", 1 << 40}, {"gibit", 1 << 30}, {"mibit", 1 << 20}, {"kibit", 1 << 10},
	{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
}

// UnmarshalText parses 100mbit, 1gbit, 2.5gbit, 512kibit (case-insensitive).
func (r *Rate) UnmarshalText(b []byte) error {
	s := strings.ToLower(strings.TrimSpace(string(b)))
	if strings.HasSuffix(s, "bps") || strings.HasSuffix(s, "b/s") {
		return fmt.Errorf("rate %q: write bits (kbit, mbit, gbit); tc reads %q as bytes per second", s, s)
	}
	for _, u := range rateUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return fmt.Errorf("rate %q: %q is not a non-negative number", s, num)
			}
			*r = Rate(math.Round(f * u.mult))
			return nil
		}
	}
	return fmt.Errorf("rate %q: want a number with a unit, e.g. 100mbit, 1gbit, 500kbit", s)
}

// MarshalText writes the shortest exact tc form.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r Rate) String() string {
	v := uint64(r)
	switch {
	case v != 0 && v%1e9 == 0:
		return fmt.Sprintf("%dgbit", v/1e9)
	case v != 0 && v%1e6 == 0:
		return fmt.Sprintf("%dmbit", v/1e6)
	case v != 0 && v%1e3 == 0:
		return fmt.Sprintf("%dkbit", v/1e3)
	}
	return fmt.Sprintf("%dbit", v)
}

// BytesPerSecond is the rate as the kernel's tc structures want it.
func (r Rate) BytesPerSecond() uint64 { return uint64(r) / 8 }

// Percent is a probability in steps of 0.01 % (10000 = 100 %), the granularity of
// nftables' numgen random mod 10000.
type Percent uint32

// UnmarshalText parses 1%, 0.5%, 0.01%. The % sign is required so 0.5 is never
// mistaken for 50 %.
func (p *Percent) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return fmt.Errorf("percentage %q: write it with a %% sign, e.g. 1%% or 0.1%%", s)
	}
	whole, frac, _ := strings.Cut(num, ".")
	if len(frac) > 2 {
		return fmt.Errorf("percentage %q: the finest step is 0.01%%", s)
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err1 := strconv.ParseUint(whole, 10, 32)
	f, err2 := strconv.ParseUint(frac, 10, 32)
	if err1 != nil || err2 != nil || w > 100 {
		return fmt.Errorf("percentage %q: want a number from 0.01%% to 100%%", s)
	}
	*p = Percent(w*100 + f)
	return nil
}

// MarshalText writes 1%, 0.5%, 0.01%.
func (p Percent) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p Percent) String() string {
	s := fmt.Sprintf("%d.%02d", p/100, p%100)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}

// Fraction is p as a number in [0, 1].
func (p Percent) Fraction() float64 { return float64(p) / 10000 }

// Size is a number of bytes. Text: 64MiB, 1GiB, 512KiB, 1MB (powers of 1000), or the
// k/m/g shorthand of mount(8) and cgroups (powers of 1024).
type Size uint64

var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
	{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1},
}

var reSizeNum = regexp.MustCompile(`^[0-9]{1,15}$`)

// UnmarshalText parses 64MiB, 1g, 4096b (a unit is required).
func (z *Size) UnmarshalText(b []byte) error {
	s := strings.ToLower(strings.TrimSpace(string(b)))
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			if !reSizeNum.MatchString(num) {
				return fmt.Errorf("size %q: want a whole number with a unit, e.g. 64MiB", s)
			}
			n, _ := strconv.ParseUint(num, 10, 64)
			*z = Size(n * u.mult)
			return nil
		}
	}
	return fmt.Errorf("size %q: want a whole number with a unit, e.g. 64MiB, 1GiB, 512KiB", s)
}

// MarshalText writes the largest exact binary unit.
func (z Size) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

func (z Size) String() string {
	v := uint64(z)
	for _, u := range []struct {
		s string
		m uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.m == 0 {
			return fmt.Sprintf("%d%s", v/u.m, u.s)
		}
	}
	return fmt.Sprintf("%dB", v)
}

// Duration is a time.Duration with a text form (10m, 1.5s, 500ms).
type Duration time.Duration

// UnmarshalText parses Go durations; a bare number is refused (seconds or ms?).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("duration %q: want e.g. 500ms, 10s, 5m", string(b))
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the Go form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d Duration) String() string { return time.Duration(d).String() }

// Direction says which way a network fault acts on a NIC.
type Direction string

// Directions. "ingress" and "egress" are accepted as spellings of in and out.
const (
	DirIn   Direction = "in"
	DirOut  Direction = "out"
	DirBoth Direction = "both"
)

// UnmarshalText parses in, out, both, ingress, egress.
func (d *Direction) UnmarshalText(b []byte) error {
	switch strings.ToLower(strings.TrimSpace(string(b))) {
	case "in", "ingress", "rx":
		*d = DirIn
	case "out", "egress", "tx":
		*d = DirOut
	case "both":
		*d = DirBoth
	case "": // the zero value; Validate refuses it where a direction is needed
		*d = ""
	default:
		return fmt.Errorf("direction %q: want in, out or both", string(b))
	}
	return nil
}

// In reports whether packets arriving at the NIC are affected.
func (d Direction) In() bool { return d == DirIn || d == DirBoth }

// Out reports whether packets leaving through the NIC are affected.
func (d Direction) Out() bool { return d == DirOut || d == DirBoth }

func (d Direction) valid() bool { return d == DirIn || d == DirOut || d == DirBoth }

// PortRange is one TCP/UDP port or an inclusive range (29500, 29500-29510).
type PortRange struct{ Lo, Hi uint16 }

// UnmarshalText parses 29500 or 29500-29510.
func (p *PortRange) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "0" { // the zero value's own text; Validate refuses it
		*p = PortRange{}
		return nil
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil || l == 0 || h < l {
		return fmt.Errorf("ports %q: want a port (1-65535) or a range lo-hi", s)
	}
	*p = PortRange{uint16(l), uint16(h)}
	return nil
}

// MarshalText writes 29500 or 29500-29510.
func (p PortRange) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p PortRange) String() string {
	if p.Lo == p.Hi {
		return strconv.Itoa(int(p.Lo))
	}
	return fmt.Sprintf("%d-%d", p.Lo, p.Hi)
}

// Names is a comma-separated list of names (nodes, for congestion senders).
type Names []string

// UnmarshalText splits on commas and spaces.
func (n *Names) UnmarshalText(b []byte) error {
	*n = strings.FieldsFunc(string(b), func(r rune) bool { return r == ',' || r == ' ' })
	return nil
}

// MarshalText joins with commas.
func (n Names) MarshalText() ([]byte, error) { return []byte(strings.Join(n, ",")), nil }

// EnvVars is a list of KEY=VALUE pairs, written space-separated in text.
// Values are restricted to characters that need no quoting anywhere.
type EnvVars []string

var (
	reEnvKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	reEnvVal = regexp.MustCompile(`^[A-Za-z0-9_.,:^=/+@%-]{0,256}$`)
)

// UnmarshalText parses "NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring" (spaces, newlines or ';').
func (e *EnvVars) UnmarshalText(b []byte) error {
	var out EnvVars
	for _, kv := range strings.FieldsFunc(string(b), func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == ';' }) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !reEnvKey.MatchString(k) {
			return fmt.Errorf("env %q: want KEY=VALUE with KEY made of letters, digits and '_'", kv)
		}
		if !reEnvVal.MatchString(v) {
			return fmt.Errorf("env %s: value %q may only hold letters, digits and _ . , : ^ = / + @ %% -", k, v)
		}
		out = append(out, k+"="+v)
	}
	*e = out
	return nil
}

// MarshalText joins with spaces.
func (e EnvVars) MarshalText() ([]byte, error) { return []byte(strings.Join(e, " ")), nil }

// CPUList is a cpuset list such as 0, 0-1 or 0,2.
type CPUList string

var reCPUList = regexp.MustCompile(`^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$`)

// UnmarshalText checks the syntax.
func (c *CPUList) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s != "" && !reCPUList.MatchString(s) {
		return fmt.Errorf("cpuset %q: want a CPU list such as 0, 0-1 or 0,2", s)
	}
	*c = CPUList(s)
	return nil
}

// MarshalText writes the list as given.
func (c CPUList) MarshalText() ([]byte, error) { return []byte(c), nil }

// cpus expands the list to CPU numbers.
func (c CPUList) cpus() []int {
	var out []int
	for _, part := range strings.Split(string(c), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		l, _ := strconv.Atoi(lo)
		h, _ := strconv.Atoi(hi)
		for i := l; i <= h && i-l < 4096; i++ {
			out = append(out, i)
		}
	}
	return out
}
