//go:build linux

package hostns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/internal/testenv"
)

func TestRefusesForeignNames(t *testing.T) {
	for _, name := range []string{"default", "docker-1", "cl-../x", ""} {
		if _, _, err := Create(name); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
		if err := Delete(name); err == nil {
			t.Errorf("Delete(%q) succeeded", name)
		}
	}
}

// TestCreateDelete: a created namespace is bound under /run/netns, has the
// sysctls set (as ip netns exec shows them) and is gone after Delete.
func TestCreateDelete(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces")
	testenv.RequireTools(t, "ip")
	name := host.NetNSName("t"+host.NewID()[1:], "n1")
	h, ns, err := Create(name)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	ns.Close()
	t.Cleanup(func() { Delete(name) })
	out, err := exec.Command("ip", "netns", "exec", name, "sysctl", "-n", "net.ipv6.conf.all.disable_ipv6", "net.ipv4.ip_forward").CombinedOutput()
	if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != "1 0" {
		t.Errorf("sysctls in %s: %v %q, want disable_ipv6 1 and ip_forward 0", name, err, out)
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(host.NetNSDir, name)); !os.IsNotExist(err) {
		t.Errorf("%s still bound after Delete: %v", name, err)
	}
	if err := Delete(name); err != nil {
		t.Errorf("Delete of a missing namespace: %v", err)
	}
}
