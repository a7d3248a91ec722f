//go:build linux

package injector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kernelConfig returns the value of a CONFIG_ option from /proc/config.gz, or "".
func kernelConfig(t *testing.T, opt string) string {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		t.Skip("no /proc/config.gz to compare the probe with")
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(z)
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := strings.CutPrefix(string(line), opt+"="); ok {
			return v
		}
	}
	return "n"
}

// TestProbe: the probe's answers agree with the kernel's build configuration,
// and it leaves no scratch namespace behind.
func TestProbe(t *testing.T) {
	needRoot(t)
	f := probe(context.Background())
	for _, c := range []struct {
		opt string
		got bool
	}{
		{"CONFIG_NET_SCH_TBF", f.TBF}, {"CONFIG_NET_SCH_HTB", f.HTB}, {"CONFIG_NET_SCH_NETEM", f.Netem},
		{"CONFIG_IFB", f.IFB}, {"CONFIG_NF_TABLES_NETDEV", f.Nftables},
		{"CONFIG_VETH", f.Veth}, {"CONFIG_BRIDGE", f.Bridge}, {"CONFIG_NF_TABLES_BRIDGE", f.NftBridge},
	} {
		switch kernelConfig(t, c.opt) {
		case "y":
			if !c.got {
				t.Errorf("%s=y but the probe says absent (notes %v)", c.opt, f.Notes)
			}
		case "n":
			if c.got {
				t.Errorf("%s is not set but the probe says present", c.opt)
			}
		}
	}
	if err := f.Has(NeedNetem); f.Netem != (err == nil) || (err != nil && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sch_netem"))) {
		t.Errorf("Has(netem) = %v with Netem %v", err, f.Netem)
	}
	if m, _ := filepath.Glob(filepath.Join(netnsDir, fmt.Sprintf("cl-probe-%d-*", os.Getpid()))); len(m) > 0 {
		t.Errorf("probe namespaces left: %v", m)
	}
}

// staleProbes lists probe namespaces whose process is gone.
func staleProbes() []string {
	var out []string
	m, _ := filepath.Glob(filepath.Join(netnsDir, "cl-probe-*"))
	for _, p := range m {
		var pid int
		var start uint64
		if _, err := fmt.Sscanf(filepath.Base(p), "cl-probe-%d-%d", &pid, &start); err == nil && !(Proc{PID: pid, Start: start}).alive() {
			out = append(out, p)
		}
	}
	return out
}
