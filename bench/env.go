package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// Env is the NCCL-like configuration a rank reads from its environment. Every
// variable honoured is listed in bench/README.md.
type Env struct {
	Debug        string          // NCCL_DEBUG: "", VERSION, WARN, INFO, TRACE
	DebugFile    string          // NCCL_DEBUG_FILE (%h host, %p pid)
	DebugSubsys  map[string]bool // NCCL_DEBUG_SUBSYS; nil: INIT, BOOTSTRAP, ENV
	SocketIfname string          // NCCL_SOCKET_IFNAME
	IBHCA        string          // NCCL_IB_HCA
	IBDisable    bool            // NCCL_IB_DISABLE
	P2PDisable   bool            // NCCL_P2P_DISABLE
	P2PLevel     string          // NCCL_P2P_LEVEL (LOC disables P2P)
	SHMDisable   bool            // NCCL_SHM_DISABLE
	Net          string          // NCCL_NET: "", "IB", "Socket"
	Algo         string          // NCCL_ALGO resolved: "ring" or "tree"
	AlgoSet      string          // NCCL_ALGO as given
	MinChannels  int             // NCCL_MIN_NCHANNELS
	MaxChannels  int             // NCCL_MAX_NCHANNELS
	NSocks       int             // NCCL_NSOCKS_PERTHREAD
	NThreads     int             // NCCL_SOCKET_NTHREADS
	IBTimeout    int             // NCCL_IB_TIMEOUT (exponent)
	IBRetryCnt   int             // NCCL_IB_RETRY_CNT
	BuffSize     int             // NCCL_BUFFSIZE
	CommID       string          // NCCL_COMM_ID (ip:port of the bootstrap root)
	Set          []envLine       // what NCCL prints for the variables it reads that were set

	Release ncclmsg.Release // COMMLAB_BENCH_NCCL_VERSION: the NCCL release whose behaviour is emulated (2.28.9)

	Timeout  time.Duration // COMMLAB_BENCH_TIMEOUT: bootstrap, setup and per-operation watchdog
	RocePort int           // COMMLAB_BENCH_ROCE_PORT (4791)
	ShmDir   string        // COMMLAB_BENCH_SHM_DIR (/dev/shm)
}

// IBAckTimeout is the RoCE emulation's ack timeout: 4.096 µs × 2^NCCL_IB_TIMEOUT, as on IB.
func (e Env) IBAckTimeout() time.Duration {
	return time.Duration(4096 * (int64(1) << e.IBTimeout))
}

// Channels is the number of channels (rings and trees) used.
func (e Env) Channels() int {
	n := 2
	if e.MinChannels > n {
		n = e.MinChannels
	}
	if e.MaxChannels > 0 && e.MaxChannels < n {
		n = e.MaxChannels
	}
	return n
}

// ParseEnv reads the configuration through getenv and rejects bad values with
// the variable's name.
func ParseEnv(getenv func(string) string) (Env, error) {
	e := Env{
		Debug:        strings.ToUpper(getenv("NCCL_DEBUG")),
		DebugFile:    getenv("NCCL_DEBUG_FILE"),
		SocketIfname: getenv("NCCL_SOCKET_IFNAME"),
		IBHCA:        getenv("NCCL_IB_HCA"),
		P2PLevel:     strings.ToUpper(getenv("NCCL_P2P_LEVEL")),
		CommID:       getenv("NCCL_COMM_ID"),
		ShmDir:       getenv("COMMLAB_BENCH_SHM_DIR"),
	}
	if e.ShmDir == "" {
		e.ShmDir = "/dev/shm"
	}
	e.Set = envLines(getenv)
	e.Release = ncclmsg.Default
	if v := getenv("COMMLAB_BENCH_NCCL_VERSION"); v != "" {
		r, err := ncclmsg.ParseRelease(v)
		if err != nil {
			return e, fmt.Errorf("COMMLAB_BENCH_NCCL_VERSION=%w", err)
		}
		e.Release = r
	}
	switch e.Debug {
	case "", "VERSION", "WARN", "INFO", "TRACE", "ABORT":
	default:
		return e, fmt.Errorf("NCCL_DEBUG=%q: want VERSION, WARN, INFO or TRACE", e.Debug)
	}
	if s := getenv("NCCL_DEBUG_SUBSYS"); s != "" {
		e.DebugSubsys = map[string]bool{}
		for _, p := range strings.Split(strings.ToUpper(s), ",") {
			e.DebugSubsys[strings.TrimSpace(p)] = true
		}
	}
	var err error
	flag := func(name string, dst *bool) {
		if err != nil {
			return
		}
		v := getenv(name)
		if v == "" {
			return
		}
		n64, perr := strconv.ParseInt(v, 0, 64) // strtoll(v, NULL, 0), as NCCL_PARAM
		n := int(n64)
		if perr != nil {
			err = fmt.Errorf("%s=%q: want 0 or 1", name, v)
			return
		}
		*dst = n != 0
	}
	num := func(name string, dst *int, def, lo, hi int) {
		*dst = def
		if err != nil {
			return
		}
		v := getenv(name)
		if v == "" {
			return
		}
		n64, perr := strconv.ParseInt(v, 0, 64) // strtoll(v, NULL, 0), as NCCL_PARAM
		n := int(n64)
		if perr != nil || n < lo || n > hi {
			err = fmt.Errorf("%s=%q: want an integer from %d to %d", name, v, lo, hi)
			return
		}
		*dst = n
	}
	flag("NCCL_IB_DISABLE", &e.IBDisable)
	flag("NCCL_P2P_DISABLE", &e.P2PDisable)
	flag("NCCL_SHM_DISABLE", &e.SHMDisable)
	num("NCCL_MIN_NCHANNELS", &e.MinChannels, 0, 0, 32)
	num("NCCL_MAX_NCHANNELS", &e.MaxChannels, 0, 0, 32)
	num("NCCL_NSOCKS_PERTHREAD", &e.NSocks, 1, 1, 64)
	num("NCCL_SOCKET_NTHREADS", &e.NThreads, 1, 1, 16)
	num("NCCL_IB_TIMEOUT", &e.IBTimeout, 18, 1, 31)
	num("NCCL_IB_RETRY_CNT", &e.IBRetryCnt, 7, 0, 7)
	num("NCCL_BUFFSIZE", &e.BuffSize, 4<<20, 64<<10, 1<<30)
	num("COMMLAB_BENCH_ROCE_PORT", &e.RocePort, 4791, 1, 65535)
	var tsec int
	num("COMMLAB_BENCH_TIMEOUT", &tsec, 60, 1, 3600)
	if err != nil {
		return e, err
	}
	e.Timeout = time.Duration(tsec) * time.Second
	if e.NSocks*e.NThreads > 64 {
		return e, fmt.Errorf("NCCL_SOCKET_NTHREADS=%d × NCCL_NSOCKS_PERTHREAD=%d = %d sockets per peer: NCCL allows at most 64", e.NThreads, e.NSocks, e.NSocks*e.NThreads)
	}
	switch n := strings.ToLower(getenv("NCCL_NET")); n {
	case "":
	case "ib":
		e.Net = "IB"
	case "socket":
		e.Net = "Socket"
	default:
		return e, fmt.Errorf("NCCL_NET=%q: want IB or Socket", getenv("NCCL_NET"))
	}
	e.AlgoSet = getenv("NCCL_ALGO")
	if e.Algo, err = parseAlgo(e.AlgoSet); err != nil {
		return e, err
	}
	if l := e.P2PLevel; l != "" {
		switch l {
		case "LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5":
		default:
			return e, fmt.Errorf("NCCL_P2P_LEVEL=%q: want LOC, NVL, PIX, PXB, PHB or SYS", l)
		}
	}
	return e, nil
}

// envLine is one line NCCL prints about a variable set in the environment.
type envLine struct {
	subs string // debug subsystems
	text string
}

// envLines are the lines NCCL 2.28.9 prints for the variables the emulation
// reads, each in the format of the place NCCL reads it: NCCL_PARAM variables
// print their value as an integer followed by a period; the others print the
// string as given, without a period; NCCL_IB_HCA prints "set to"; NCCL_NET
// prints nothing.
func envLines(getenv func(string) string) []envLine {
	var out []envLine
	param := func(name string) {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 0, 64) // strtoll(str, NULL, 0)
			if err != nil {
				return // NCCL prints "Invalid value ..." and ParseEnv rejects it
			}
			out = append(out, envLine{"ENV", ncclmsg.EnvParam.Sprintf(name, n)})
		}
	}
	str := func(name string, m ncclmsg.Msg, subs string) {
		if v := getenv(name); v != "" {
			out = append(out, envLine{subs, m.Sprintf(v)})
		}
	}
	str("NCCL_SOCKET_IFNAME", ncclmsg.EnvIfname, "ENV")
	str("NCCL_COMM_ID", ncclmsg.EnvCommID, "ENV")
	str("NCCL_IB_HCA", ncclmsg.EnvIBHCA, "NET|ENV")
	param("NCCL_IB_DISABLE")
	// NCCL reads NCCL_P2P_LEVEL only when NCCL_P2P_DISABLE is not 1; both lines
	// use the subsystem mask ALL.
	if n, _ := strconv.ParseInt(getenv("NCCL_P2P_DISABLE"), 0, 64); n == 1 {
		out = append(out, envLine{"ALL", ncclmsg.EnvP2PDisable.Sprintf("NCCL_P2P_DISABLE", 1)})
	} else if l, ok := p2pLevelName(strings.ToUpper(getenv("NCCL_P2P_LEVEL"))); ok {
		out = append(out, envLine{"ALL", ncclmsg.EnvP2PLevel.Sprintf("NCCL_P2P_LEVEL", l)})
	}
	param("NCCL_SHM_DISABLE")
	str("NCCL_PROTO", ncclmsg.EnvProto, "ENV")
	str("NCCL_ALGO", ncclmsg.EnvAlgo, "ENV")
	for _, name := range []string{"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NSOCKS_PERTHREAD",
		"NCCL_SOCKET_NTHREADS", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_BUFFSIZE"} {
		param(name)
	}
	return out
}

// p2pLevelName is the level NCCL prints for NCCL_P2P_LEVEL: a name as given,
// or an old number mapped (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and more SYS).
func p2pLevelName(v string) (string, bool) {
	switch v {
	case "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS":
		return v, true
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return []string{"LOC", "PIX", "PXB", "PHB", "SYS"}[min(n, 4)], true
	}
	return "", false
}

// parseAlgo resolves NCCL_ALGO ("Ring", "Tree", "Ring,Tree", "^Tree", ...) to the
// algorithm used; the emulation picks ring when both are allowed.
func parseAlgo(v string) (string, error) {
	if v == "" {
		return "ring", nil
	}
	s := strings.ToLower(strings.TrimSpace(v))
	exclude := strings.HasPrefix(s, "^")
	s = strings.TrimPrefix(s, "^")
	allowed := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "ring", "tree":
			allowed[p] = true
		case "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat":
			// Known to NCCL, absent here: excluded below unless nothing else is left.
		default:
			return "", fmt.Errorf("NCCL_ALGO=%q: unknown algorithm %q (want Ring or Tree)", v, p)
		}
	}
	if exclude {
		switch {
		case !allowed["ring"]:
			return "ring", nil
		case !allowed["tree"]:
			return "tree", nil
		}
		return "", fmt.Errorf("NCCL_ALGO=%q excludes both Ring and Tree", v)
	}
	switch {
	case allowed["ring"]:
		return "ring", nil
	case allowed["tree"]:
		return "tree", nil
	}
	return "", fmt.Errorf("NCCL_ALGO=%q: the emulation has only Ring and Tree", v)
}
