//go:build linux

package hostns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

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
// sysctls set (as ip netns exec shows them), belongs to our user namespace or
// (CreateConfined) to one of its own that maps every id to itself, and is gone
// after Delete.
func TestCreateDelete(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces")
	testenv.RequireTools(t, "ip")
	for _, tc := range []struct {
		name     string
		create   func(string) (*netlink.Handle, vnetns.NsHandle, error)
		confined bool
	}{
		{"Create", Create, false},
		{"CreateConfined", CreateConfined, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testCreateDelete(t, tc.create, tc.confined) })
	}
}

func testCreateDelete(t *testing.T, create func(string) (*netlink.Handle, vnetns.NsHandle, error), confined bool) {
	name := host.NetNSName("t"+host.NewID()[1:], "n1")
	h, ns, err := create(name)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	ns.Close()
	t.Cleanup(func() { Delete(name) })
	path := filepath.Join(host.NetNSDir, name)
	u, err := OwnerUserNS(path)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	own, _ := os.Readlink("/proc/self/ns/user")
	owner, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", u.Fd()))
	if (owner != own) != confined {
		t.Errorf("%s is owned by user namespace %s, ours is %s; want a namespace of its own: %v", name, owner, own, confined)
	}
	if confined {
		// The owner's uid and gid maps, as a process in it reads them.
		c := exec.Command("nsenter", "--user=/proc/self/fd/3", "--preserve-credentials", "cat", "/proc/self/uid_map", "/proc/self/gid_map")
		c.ExtraFiles = []*os.File{u}
		out, err := c.CombinedOutput()
		if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != "0 0 4294967295 0 0 4294967295" {
			t.Errorf("id maps of %s's user namespace: %v %q, want every id mapped to itself", name, err, out)
		}
	}
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
