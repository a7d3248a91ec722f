//go:build linux

package netns

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/commlab/commlab/labs/cgroup"
)

// Where things live on the host. Everything commlab creates carries its name:
// namespaces cl-<id>-<node> and cl-<id>-fab, cgroups commlab/<id>, run-time
// files under /run/commlab/labs (gone with a reboot, like the namespaces).
const (
	netnsDir = "/run/netns"
	runDir   = "/run/commlab/labs"
	slotDir  = runDir + "/slots"
	// Prefix starts every namespace and run-time directory a sandbox owns.
	Prefix = "cl-"
	// fabricNode names the namespace holding a sandbox's switches.
	fabricNode = "fab"
	// stateSubdir is where state files live under the data directory.
	stateSubdir = "sandboxes"
)

// reID: sandbox ids have no '-', so "cl-<id>-<node>" splits without ambiguity.
var reID = regexp.MustCompile(`^[a-z0-9]{1,12}$`)

// ValidID checks a sandbox id: 1 to 12 lowercase letters or digits.
func ValidID(id string) error {
	if !reID.MatchString(id) {
		return fmt.Errorf("sandbox id %q: want 1 to 12 lowercase letters or digits", id)
	}
	return nil
}

// NewID returns a random sandbox id of 8 characters.
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	// Start with a letter so ids never look like numbers in logs.
	b[0] = alphabet[int(b[0])%26]
	return string(b)
}

// NetNSName is the namespace of a sandbox's node: cl-<id>-<node>.
func NetNSName(id, node string) string { return Prefix + id + "-" + node }

// NetNSPath is the file of that namespace.
func NetNSPath(id, node string) string { return filepath.Join(netnsDir, NetNSName(id, node)) }

// FabricNetNSName is the namespace that holds a sandbox's switches.
func FabricNetNSName(id string) string { return NetNSName(id, fabricNode) }

// CgroupPath is a sandbox's cgroup relative to each hierarchy root.
func CgroupPath(id string) string { return cgroup.Root + "/" + id }

// NodeCgroupPath is the cgroup of a node's processes, inside the sandbox's.
func NodeCgroupPath(id, node string) string { return CgroupPath(id) + "/" + node }

// NFTable is the name of the sandbox's nftables table (bridge family, in the
// fabric namespace).
func NFTable(id string) string { return Prefix + id }

// sandboxRunDir holds a sandbox's learner home and tmp (a size-limited tmpfs).
func sandboxRunDir(id string) string { return filepath.Join(runDir, Prefix+id) }

// statePath is a sandbox's state file under dataDir.
func statePath(dataDir, id string) string {
	return filepath.Join(dataDir, stateSubdir, id+".json")
}

// fabricPort names the fabric-side end of node number n's NIC (1-based n):
// "p3-rdma0". Topology validation keeps it within 15 characters.
func fabricPort(n int, nic string) string { return fmt.Sprintf("p%d-%s", n, nic) }

// bridgeName names a switch's bridge inside the fabric namespace.
func bridgeName(sw string) string { return "br-" + sw }

// idFromObject extracts the sandbox id from a namespace or directory name
// "cl-<id>" or "cl-<id>-<rest>"; ok is false for names commlab does not own.
func idFromObject(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, "-")
	if ValidID(id) != nil {
		return "", false
	}
	return id, true
}
