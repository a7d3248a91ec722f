package host

// nftables tables commlab owns; nothing else in a ruleset is ever changed.
//
//   - FabricTable: one bridge-family table per sandbox in its fabric namespace
//     (labs/netns), filtering what crosses the switches.
//   - FaultTable: one table per sandbox in each node namespace (injector), of the
//     family a fault needs; each fault adds chains named after its fault id and
//     removes only those.

// FabricTable names a sandbox's table in its fabric namespace: cl-<id>.
func FabricTable(id string) string { return Prefix + id }

// FaultTablePrefix starts the name of every table that holds faults' chains.
const FaultTablePrefix = "commlab-"

// FaultTable names the table that holds a sandbox's faults in a node namespace:
// commlab-<id>.
func FaultTable(id string) string { return FaultTablePrefix + id }
