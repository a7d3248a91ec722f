//go:build linux

package bench

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/injector"
)

// wrongRE reads the out-of-place and in-place #wrong of each table row.
var wrongRE = regexp.MustCompile(`(?m)^\s+\d+\s+\d+\s+float\s+\w+\s+-?\d+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)\s*$`)

// TestNetnsCorruptWrong: with the injector's corrupt fault (tc BPF, checksums
// fixed) on one node's NIC, `-c 1` counts wrong elements as nccl-tests does,
// on both transports, and a clean run counts none.
func TestNetnsCorruptWrong(t *testing.T) {
	l := newTestLab(t)
	if err := injector.TCBPF(); err != nil {
		t.Skipf("no tc BPF here: %v", err)
	}
	in := testInjector(t, "corrupt")
	o := netnsOpts(16<<20, 1, "n1:1,n2:1")
	o.Check = 1
	wrong := func(t *testing.T, env ...string) int {
		// Like nccl-tests, a run with wrong elements fails ("Test NCCL failure ...
		// N wrong elements"). A flip can also land in the bootstrap's messages
		// before any table row (as on a real bad link), or exhaust the emulated RoCE's
		// retries (IBV_WC_RETRY_EXC_ERR): then run again, up to five times.
		// A run that hangs on a flip waits for the watchdog: 10 s is still over 100 times
		// a healthy operation here (9-60 ms). At the harness's 30 s (testLab.bench's,
		// overridden here: the last value counts), two hung runs made this test 80 s.
		env = append([]string{"COMMLAB_BENCH_TIMEOUT=10"}, env...)
		var out string
		for try := 1; ; try++ {
			o, errOut, err := l.bench(t, o, env...)
			out = o
			if err == nil || strings.Contains(errOut, " wrong elements") {
				break
			}
			if try == 5 {
				t.Fatalf("bench failed %d times: %v\n%s\n%s", try, err, errOut, out)
			}
			t.Logf("run %d failed before the check: %v\n%s", try, err, errOut)
		}
		m := wrongRE.FindAllStringSubmatch(out, -1)
		if len(m) == 0 {
			t.Fatalf("no table row with #wrong in:\n%s", out)
		}
		n := 0
		for _, r := range m {
			for _, s := range r[1:] {
				v, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("#wrong %q is not a count in:\n%s", s, out)
				}
				n += v
			}
		}
		t.Logf("#wrong %d:\n%s", n, out)
		return n
	}
	for _, tc := range []struct {
		name   string
		env    []string
		params map[string]string
	}{
		// TCP leaves veth in 64 KiB GSO super-packets, each one draw of the share.
		{"socket", []string{"NCCL_IB_DISABLE=1"}, map[string]string{"nic": "rdma0", "percent": "2%", "proto": "tcp"}},
		{"roce-emulation", nil, map[string]string{"nic": "rdma0", "percent": "2%", "proto": "udp", "port": "4791"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := wrong(t, tc.env...); n != 0 {
				t.Fatalf("clean run: #wrong %d, want 0", n)
			}
			f, err := in.Registry().Parse("corrupt", tc.params)
			if err != nil {
				t.Fatal(err)
			}
			e, err := in.Apply(t.Context(), injector.Target{Sandbox: l.ID, Node: "n2"}, f, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Revert(t.Context(), e.ID)
			if n := wrong(t, tc.env...); n == 0 {
				t.Errorf("%s of packets corrupted: #wrong 0, want > 0", tc.params["percent"])
			}
		})
	}
}
