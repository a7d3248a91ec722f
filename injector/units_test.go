package injector

import (
	"testing"
	"time"
)

func TestRateText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
		out  string
		err  bool
	}{
		{"100mbit", 100e6, "100mbit", false},
		{"1Gbit", 1e9, "1gbit", false},
		{"2.5gbit", 2.5e9, "2500mbit", false},
		{"512kibit", 512 * 1024, "524288bit", false},
		{"8kbit", 8000, "8kbit", false},
		{"100", 0, "", true},
		{"100mbps", 0, "", true},
		{"-1mbit", 0, "", true},
		{"fastmbit", 0, "", true},
	} {
		var r Rate
		err := r.UnmarshalText([]byte(tc.in))
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && (r != tc.want || r.String() != tc.out) {
			t.Errorf("%q = %d (%s), want %d (%s)", tc.in, uint64(r), r, uint64(tc.want), tc.out)
		}
	}
}

func TestPercentText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Percent
		out  string
		err  bool
	}{
		{"1%", 100, "1%", false},
		{"0.1%", 10, "0.1%", false},
		{"0.01%", 1, "0.01%", false},
		{"12.34%", 1234, "12.34%", false},
		{"100%", 10000, "100%", false},
		{"0%", 0, "0%", false}, // syntax fine; each kind's Validate refuses it
		{"0.5", 0, "", true},
		{"0.005%", 0, "", true},
		{"101%", 0, "", true},
		{"-1%", 0, "", true},
	} {
		var p Percent
		err := p.UnmarshalText([]byte(tc.in))
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && (p != tc.want || p.String() != tc.out) {
			t.Errorf("%q = %d (%s), want %d (%s)", tc.in, p, p, tc.want, tc.out)
		}
	}
}

func TestSizeText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
		out  string
		err  bool
	}{
		{"64MiB", 64 << 20, "64MiB", false},
		{"1g", 1 << 30, "1GiB", false},
		{"1MB", 1e6, "1000000B", false},
		{"4096b", 4096, "4KiB", false},
		{"1.5GiB", 0, "", true},
		{"64", 0, "", true},
	} {
		var z Size
		err := z.UnmarshalText([]byte(tc.in))
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && (z != tc.want || z.String() != tc.out) {
			t.Errorf("%q = %d (%s), want %d (%s)", tc.in, uint64(z), z, uint64(tc.want), tc.out)
		}
	}
}

func TestOtherText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("0.5ms")); err != nil || time.Duration(d) != 500*time.Microsecond {
		t.Errorf("0.5ms = %v %v", d, err) // Chaos Mesh once dropped 0.5ms silently
	}
	if err := d.UnmarshalText([]byte("10")); err == nil {
		t.Error("a bare number was accepted as a duration")
	}
	var dir Direction
	for in, want := range map[string]Direction{"in": DirIn, "egress": DirOut, "BOTH": DirBoth} {
		if err := dir.UnmarshalText([]byte(in)); err != nil || dir != want {
			t.Errorf("direction %q = %q %v", in, dir, err)
		}
	}
	if err := dir.UnmarshalText([]byte("sideways")); err == nil {
		t.Error("direction sideways accepted")
	}
	var p PortRange
	if err := p.UnmarshalText([]byte("29500-29510")); err != nil || p != (PortRange{29500, 29510}) || p.String() != "29500-29510" {
		t.Errorf("ports = %v %v", p, err)
	}
	for _, bad := range []string{"0-1", "70000", "10-5", "a-b"} {
		if err := p.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("ports %q accepted", bad)
		}
	}
	var e EnvVars
	if err := e.UnmarshalText([]byte("NCCL_P2P_DISABLE=1  NCCL_SOCKET_IFNAME=^docker,lo")); err != nil || len(e) != 2 {
		t.Errorf("env = %v %v", e, err)
	}
	for _, bad := range []string{"1A=b", "A", "A=$(x)", "A=`x`", "A=a b'"} {
		if err := e.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("env %q accepted", bad)
		}
	}
	var c CPUList
	if err := c.UnmarshalText([]byte("0-2,5")); err != nil || len(c.cpus()) != 4 {
		t.Errorf("cpuset = %v %v", c.cpus(), err)
	}
	if err := c.UnmarshalText([]byte("0;1")); err == nil {
		t.Error("cpuset 0;1 accepted")
	}
}
