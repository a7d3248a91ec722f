//go:build linux

package netns

import (
	"fmt"
	"path/filepath"

	"github.com/commlab/commlab/internal/host"
)

// Naming lives in internal/host, shared with the injector; these are the names
// this package's code and callers use.
const (
	netnsDir   = host.NetNSDir
	runDir     = host.LabsRunDir
	slotDir    = runDir + "/slots"
	Prefix     = host.Prefix
	fabricNode = host.FabricNode
	// stateSubdir is where state files live under the data directory.
	stateSubdir = "sandboxes"
)

var (
	// ValidID checks a sandbox id (see host.ValidID).
	ValidID = host.ValidID
	// NewID returns a random sandbox id.
	NewID = host.NewID
	// NetNSName is the namespace of a sandbox's node: cl-<id>-<node>.
	NetNSName = host.NetNSName
	// NetNSPath is the file of that namespace.
	NetNSPath = host.NetNSPath
	// FabricNetNSName is the namespace that holds a sandbox's switches.
	FabricNetNSName = host.FabricNetNSName
	// CgroupPath is a sandbox's cgroup relative to each hierarchy root.
	CgroupPath = host.SandboxCgroup
	// NodeCgroupPath is the cgroup of a node's processes, inside the sandbox's.
	NodeCgroupPath = host.NodeCgroup
	// NFTable names the sandbox's nftables table (bridge family, fabric namespace).
	NFTable = host.FabricTable
	// idFromObject extracts the sandbox id from "cl-<id>" or "cl-<id>-<rest>".
	idFromObject = host.SandboxOf
)

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
