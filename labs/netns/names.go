package netns

import (
	"path/filepath"

	// Named so: the package's tests have a helper host().
	clhost "github.com/commlab/commlab/internal/host"
)

// Naming lives in internal/host, shared with the injector; these are the names
// this package's code and callers use.
const (
	netnsDir   = clhost.NetNSDir
	runDir     = clhost.LabsRunDir
	slotDir    = runDir + "/slots"
	Prefix     = clhost.Prefix
	fabricNode = clhost.FabricNode
	// stateSubdir is where state files live under the data directory.
	stateSubdir = "sandboxes"
)

var (
	// ValidID checks a sandbox id (rule in internal/host).
	ValidID = clhost.ValidID
	// NewID returns a random sandbox id.
	NewID = clhost.NewID
	// NetNSName is the namespace of a sandbox's node: cl-<id>-<node>.
	NetNSName = clhost.NetNSName
	// NetNSPath is the file of that namespace.
	NetNSPath = clhost.NetNSPath
	// FabricNetNSName is the namespace that holds a sandbox's switches.
	FabricNetNSName = clhost.FabricNetNSName
	// CgroupPath is a sandbox's cgroup relative to each hierarchy root.
	CgroupPath = clhost.SandboxCgroup
	// NodeCgroupPath is the cgroup of a node's processes, inside the sandbox's.
	NodeCgroupPath = clhost.NodeCgroup
	// NFTable names the sandbox's nftables table (bridge family, fabric namespace).
	NFTable = clhost.FabricTable
	// idFromObject extracts the sandbox id from "cl-<id>" or "cl-<id>-<rest>".
	idFromObject = clhost.SandboxOf
)

// sandboxRunDir holds a sandbox's learner home and tmp (a size-limited tmpfs).
func sandboxRunDir(id string) string { return filepath.Join(runDir, Prefix+id) }

// statePath is a sandbox's state file under dataDir.
func statePath(dataDir, id string) string {
	return filepath.Join(dataDir, stateSubdir, id+".json")
}
