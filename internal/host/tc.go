package host

// tc objects commlab owns. labs/netns shapes every link with a tbf root qdisc
// c1:; a fault replaces it with its own root qdisc c2: (and puts c1: back on
// revert) and marks its filters with priority 0xc1. Each side lists and deletes
// only objects carrying its own handle or priority, never anything else on a link.
const (
	// BaseQdiscMajor is the major handle of the lab's base tbf (tc prints c1:).
	BaseQdiscMajor = 0xc1
	// FaultQdiscMajor is the major handle of a fault's qdisc (tc prints c2:).
	FaultQdiscMajor = 0xc2
	// FaultFilterPrio is the priority (tc's pref) of every filter a fault adds.
	FaultFilterPrio = 0xc1
)

// Handles as the kernel takes them (major<<16 | minor); tc writes them "c1:".
const (
	BaseQdiscHandle  uint32 = BaseQdiscMajor << 16
	FaultQdiscHandle uint32 = FaultQdiscMajor << 16
)

// IsFaultQdisc reports whether a qdisc handle is a fault's.
func IsFaultQdisc(handle uint32) bool { return handle>>16 == FaultQdiscMajor }

// IsBaseQdisc reports whether a qdisc handle is the lab's base shaping.
func IsBaseQdisc(handle uint32) bool { return handle>>16 == BaseQdiscMajor }
