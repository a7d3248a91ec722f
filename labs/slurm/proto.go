package slurm

import "time"

// Operations of a [Frame].
const (
	opHello  = "hello"  // agent → server, first frame: which node it is
	opExec   = "exec"   // run Argv in the node's sandbox
	opApply  = "apply"  // apply a fault (Kind, Params, TTL) on the node
	opRevert = "revert" // revert the fault Fault
	opReply  = "reply"  // agent → server: the answer to request ID
	opShell  = "shell"  // start a learner shell (RC, Rows, Cols) on Stream
	opRank   = "rank"   // run one rank of commlab bench (Env; UniqueID) on Stream
)

// Control messages on a stream's websocket (text frames; binary frames carry
// the bytes of the terminal or the command's output).
const (
	ctlResize = "resize" // server → agent: Rows, Cols
	ctlExit   = "exit"   // agent → server, last: Exit, or Err when it could not run
	ctlFd3    = "fd3"    // agent → server: Output, what a rank wrote on fd 3 (its unique id)
)

// Frame is one websocket message between the server and an agent. Requests go
// from the server to the agent; each gets one reply with the same ID.
type Frame struct {
	ID uint64 `json:"id,omitempty"`
	Op string `json:"op"`

	// hello
	Node    string `json:"node,omitempty"`    // the scenario's node name
	Sandbox string `json:"sandbox,omitempty"` // the node's sandbox id (j<job id>)
	Host    string `json:"host,omitempty"`    // the Slurm node it runs on

	// exec
	Argv []string `json:"argv,omitempty"`
	// apply
	Kind   string            `json:"kind,omitempty"`
	Params map[string]string `json:"params,omitempty"`
	TTL    time.Duration     `json:"ttl,omitempty"`
	// revert, and apply's reply
	Fault string `json:"fault,omitempty"`

	// shell and rank: the agent dials /agent?lab=...&stream=Stream and carries
	// the process's bytes there before it replies with the process's Pid.
	Stream string   `json:"stream,omitempty"`
	RC     string   `json:"rc,omitempty"` // the shell's bash rc file
	Rows   uint16   `json:"rows,omitempty"`
	Cols   uint16   `json:"cols,omitempty"`
	Env    []string `json:"env,omitempty"` // added to the rank's environment
	// UniqueID gives the rank a pipe on fd 3, where rank 0 writes the unique
	// id; what it writes comes back as ctlFd3 messages.
	UniqueID bool `json:"unique_id,omitempty"`
	Pid      int  `json:"pid,omitempty"`

	// reply: Output is the command's output (exec) or the fault's equivalent
	// command (apply); Err is set when the request failed.
	Output string `json:"output,omitempty"`
	Exit   int    `json:"exit,omitempty"`
	Err    string `json:"err,omitempty"`
}

// Environment variables that hand the agent its lab. The token travels only
// here, never in argv (which ps shows to every user of the node).
const (
	EnvURL   = "COMMLAB_AGENT_URL"
	EnvToken = "COMMLAB_AGENT_TOKEN"
	EnvLab   = "COMMLAB_LAB"
	EnvNodes = "COMMLAB_NODES" // the scenario's node names, comma-separated, in Slurm node order
	// EnvTopology is the scenario's topology (a built-in name, or a file the
	// nodes can read): the node's NICs and their addresses.
	EnvTopology = "COMMLAB_TOPOLOGY"
	// EnvAddrIndex is the lab's address slice (topology.Plan's index), which
	// no other lab of the server holds at the same time: labs sharing the
	// site's lab NICs never share addresses.
	EnvAddrIndex = "COMMLAB_ADDR_INDEX"
	// EnvLabNICs is cluster.lab_nics, comma-separated: the node NICs whose
	// macvlan children are the lab node's NICs (empty: unlinked veths).
	EnvLabNICs = "COMMLAB_LAB_NICS"
)

// tokenHeader carries the lab's token on the websocket upgrade request.
const tokenHeader = "Authorization"

// maxFrame bounds one frame (a command's output is cut to maxOutput before).
const (
	maxFrame  = 2 << 20
	maxOutput = 1 << 20
)
