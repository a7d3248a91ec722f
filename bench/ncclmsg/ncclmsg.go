// Package ncclmsg holds every NCCL log message that commlab bench prints, as
// NCCL prints it: the printf format and the source file and line (relative to
// src/, as NCCL's WARN lines show __FILE__) in a tagged release. The formats are
// 2.28.9's, the release on the team's H200, except the socket connect messages,
// which follow the release the emulation claims (Release).
// nccl/testdata/nccl-formats.txt lists the same formats read from the tags;
// a test keeps the two equal.
package ncclmsg

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// Msg is one NCCL log message.
type Msg struct {
	Tag    string // the release tag the format is read from, e.g. v2.28.9-1
	Src    string // file:line under src/, e.g. transport/net_ib.cc:826
	Format string // NCCL's printf format, verbatim
}

// Sprintf formats the message with Go's fmt, after dropping C's length modifiers.
func (m Msg) Sprintf(args ...any) string { return fmt.Sprintf(goFormat(m.Format), args...) }

var cVerb = regexp.MustCompile(`%([-+ #0]*[0-9*]*)(ll|l|h|z)?([diuxXsp%])`)

// goFormat turns a C format into Go's: %lld, %ld, %u to %d, %lx to %x, %p to %#x.
func goFormat(c string) string {
	return cVerb.ReplaceAllStringFunc(c, func(v string) string {
		m := cVerb.FindStringSubmatch(v)
		switch m[3] {
		case "u", "i":
			return "%" + m[1] + "d"
		case "p":
			return "%#x"
		}
		return "%" + m[1] + m[3]
	})
}

// Regexp matches a line printed with m's format (any argument values).
func (m Msg) Regexp() *regexp.Regexp {
	var b strings.Builder
	rest := m.Format
	for {
		loc := cVerb.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		v := cVerb.FindStringSubmatch(rest[loc[0]:loc[1]])
		switch v[3] {
		case "d", "i", "u":
			b.WriteString(`-?\d+`)
		case "x", "X", "p":
			b.WriteString(`(0x)?[0-9a-fA-F]+`)
		case "%":
			b.WriteString("%")
		default:
			b.WriteString(`.*`)
		}
		rest = rest[loc[1]:]
	}
	return regexp.MustCompile("^" + b.String() + "$")
}

const tag = "v2.28.9-1"

func m(src, format string) Msg { return Msg{Tag: tag, Src: src, Format: format} }

// The messages of NCCL 2.28.9 the emulation prints (INFO unless noted).
var (
	// Line prefixes after "host:pid:tid ".
	WarnPrefix = m("debug.cc:360", "[%d] %s:%d NCCL WARN ")
	InfoPrefix = m("debug.cc:363", "[%d] NCCL INFO ")

	Bootstrap     = m("bootstrap.cc:121", "Bootstrap: Using%s") // " <if>:<ip><port>"; no space before the colon since 2.24
	VersionBanner = m("init.cc:603", "NCCL version %s")         // VERSION_STRING; suffix "+cuda<major>.<minor>", here "+commlab-emulation"
	IBNoDevice    = m("transport/net_ib.cc:826", "NET/IB : No device found.")
	IBUsing       = m("transport/net_ib.cc:839", "NET/IB : Using%s %s; OOB %s:%s") // printed with an empty device list too
	PluginFailed  = m("plugin/net.cc:225", "Failed to initialize NET plugin %s")
	PluginInit    = m("plugin/net.cc:187", "Initialized NET plugin %s")
	PluginAssign  = m("plugin/net.cc:244", "Assigned NET plugin %s to comm")
	SocketUsing   = m("transport/net_socket.cc:76", "NET/Socket : Using%s") // " [0]<if>:<ip><port>" per device
	UsingNetwork  = m("init.cc:428", "Using network %s")
	InitStart     = m("init.cc:1574", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START")
	InitComplete  = m("init.cc:1598", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE")
	Destroy       = m("init.cc:333", "comm %p rank %d nranks %d cudaDev %d busId %lx - %s COMPLETE")
	RingPrefix    = m("graph/rings.cc:47", "Channel %02d/%02d :") // then " %*d" per rank (rings.cc:15)
	Trees         = m("init.cc:1226", "Trees%s")                  // " [c] d0/d1/d2->rank->up" per channel
	P2PChunksize  = m("init.cc:730", "P2P Chunksize set to %d")
	ConnRings     = m("transport/generic.cc:37", "Connected all rings, use ring PXN %d GDR %d")
	ConnTrees     = m("transport/generic.cc:56", "Connected all trees")
	ViaP2P        = m("transport/p2p.cc:393", "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s") // CUMEM (cuMem is on by default)
	ViaSHM        = m("transport/shm.cc:128", "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s")       // no /connIndex
	ViaNetSend    = m("transport/net.cc:313", "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s")
	ViaNetRecv    = m("transport/net.cc:359", "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s%s")

	// "set by environment" lines: the generic one of NCCL_PARAM variables ends
	// with a period; those NCCL reads by hand have none.
	EnvParam      = m("misc/param.cc:89", "%s set by environment to %lld.")
	EnvIfname     = m("misc/socket.cc:364", "NCCL_SOCKET_IFNAME set by environment to %s")
	EnvProto      = m("graph/tuning.cc:421", "NCCL_PROTO set by environment to %s")
	EnvAlgo       = m("graph/tuning.cc:426", "NCCL_ALGO set by environment to %s")
	EnvP2PDisable = m("graph/paths.cc:225", "%s set by environment to %d") // only for 1; subsystem ALL
	EnvP2PLevel   = m("graph/paths.cc:247", "%s set by environment to %s") // level name; subsystem ALL
	EnvCommID     = m("init.cc:2019", "NCCL_COMM_ID set by environment to %s")
	EnvIBHCA      = m("transport/net_ib.cc:702", "NCCL_IB_HCA set to %s") // no "by environment"; subsystem NET|ENV

	// WARN: /dev/shm too small for a segment.
	ShmExtend = m("misc/shmutils.cc:87", "Error: failed to extend %s to %ld bytes, error: %s (%d)")

	// WARN: a failed work completion (this form only in 2.28.7-2.28.9; 2.29
	// prints status=IBV_WC_RETRY_EXC_ERR(12) opcode=... and remoteGids differently).
	IBCompletion = m("transport/net_ib.cc:2543", "NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) reqSize=%d vendor_err=%u req_type=%s%s%s%s%s hca %s")
)

// Warning is an error NCCL reports in a WARN line of its own.
type Warning struct {
	Src  string // NCCL's file:line
	Text string
	Err  error
}

func (w *Warning) Error() string   { return w.Text }
func (w *Warning) Unwrap() error   { return w.Err }
func (w *Warning) NCCLSrc() string { return w.Src }

// Warning formats m as the WARN of an error err.
func (m Msg) Warning(err error, args ...any) *Warning {
	return &Warning{Src: m.Src, Text: m.Sprintf(args...), Err: err}
}

// Strerror is glibc's strerror text of e (Go's, capitalised: "Connection refused").
func Strerror(e syscall.Errno) string {
	if e == 0 {
		return "Success"
	}
	s := e.Error()
	return strings.ToUpper(s[:1]) + s[1:]
}

// All lists every message above, for the format test.
func All() []Msg {
	all := []Msg{WarnPrefix, InfoPrefix, Bootstrap, VersionBanner, IBNoDevice, IBUsing, PluginFailed, PluginInit, PluginAssign, SocketUsing,
		UsingNetwork, InitStart, InitComplete, Destroy, RingPrefix, Trees, P2PChunksize, ConnRings, ConnTrees,
		ViaP2P, ViaSHM, ViaNetSend, ViaNetRecv, EnvParam, EnvIfname, EnvProto, EnvAlgo, EnvP2PDisable, EnvP2PLevel,
		EnvCommID, EnvIBHCA, ShmExtend, IBCompletion}
	for _, r := range Releases {
		s := r.Socket()
		all = append(all, s.Retry, s.Exceeded, s.Failed)
		if s.NoPollout.Format != "" {
			all = append(all, s.NoPollout)
		}
	}
	return all
}

// Release is an NCCL release whose connect behaviour the emulation follows.
type Release struct{ Major, Minor, Patch int }

func (r Release) String() string { return fmt.Sprintf("%d.%d.%d", r.Major, r.Minor, r.Patch) }
func (r Release) tag() string    { return "v" + r.String() + "-1" }

// Releases are those the emulation can claim: the newest patch of 2.24 to 2.28.
var Releases = []Release{{2, 24, 3}, {2, 25, 1}, {2, 26, 6}, {2, 27, 7}, {2, 28, 9}}

// Default is the release claimed unless COMMLAB_BENCH_NCCL_VERSION says otherwise.
var Default = Release{2, 28, 9}

// ParseRelease reads "2.26" or "2.26.6" (any patch of a known minor release
// maps to the newest patch listed).
func ParseRelease(s string) (Release, error) {
	p := strings.Split(strings.TrimSpace(s), ".")
	if len(p) == 2 || len(p) == 3 {
		maj, e1 := strconv.Atoi(p[0])
		min, e2 := strconv.Atoi(p[1])
		if e1 == nil && e2 == nil {
			for _, r := range Releases {
				if r.Major == maj && r.Minor == min {
					return r, nil
				}
			}
		}
	}
	return Release{}, fmt.Errorf("%q: want an NCCL release from 2.24 to 2.28, e.g. 2.26 or 2.28.9", s)
}

// RetriesOnTimeout reports whether a connect that timed out or found no route
// to the host is retried: from 2.27 (NCCL issue #1618). Before, the kernel's
// error wakes poll() before the socket is closed, poll returns POLLERR without
// POLLOUT, and NCCL gives up at once with ncclSystemError.
func (r Release) RetriesOnTimeout() bool { return r.Minor >= 27 }

// SocketMsgs are the connect messages of misc/socket.cc in one release.
type SocketMsgs struct {
	Retry     Msg // INFO: a retryable error, with the sleep before the next attempt
	Exceeded  Msg // WARN: retries used up (ncclRemoteError)
	Failed    Msg // WARN: an error that is not retried (ncclSystemError)
	NoPollout Msg // WARN (2.24-2.26): poll() without POLLOUT (ncclSystemError)
	// RetrySubsys is the Retry line's subsystem mask: ALL before 2.27, NET|INIT after.
	RetrySubsys string
	// NamesPeer: from 2.27 the Retry and Exceeded lines name the peer
	// ("connect to <ip><port> returned ...").
	NamesPeer bool
}

// Socket returns r's connect messages.
func (r Release) Socket() SocketMsgs {
	at := func(line int, format string) Msg {
		return Msg{Tag: r.tag(), Src: "misc/socket.cc:" + strconv.Itoa(line), Format: format}
	}
	if r.Minor >= 27 {
		l := map[int][3]int{27: {578, 583, 592}, 28: {582, 587, 596}}[r.Minor]
		return SocketMsgs{
			Exceeded:    at(l[0], "%s: connect to %s returned %s, exceeded error retry count after %d attempts"),
			Retry:       at(l[1], "%s: connect to %s returned %s, retrying (%d/%ld) after sleep for %u msec"),
			Failed:      at(l[2], "%s: connect to %s failed : %s"),
			RetrySubsys: "NET|INIT",
			NamesPeer:   true,
		}
	}
	l := map[int][4]int{24: {543, 547, 555, 582}, 25: {543, 547, 555, 582}, 26: {544, 548, 556, 583}}[r.Minor]
	return SocketMsgs{
		Exceeded:    at(l[0], "%s: connect returned %s, exceeded error retry count (%d)"),
		Retry:       at(l[1], "%s: connect returned %s, retrying (%d/%ld) after sleep for %u msec"),
		Failed:      at(l[2], "%s: Connect to %s failed : %s"),
		NoPollout:   at(l[3], "socketPollConnect poll() returned %d%s"),
		RetrySubsys: "ALL",
	}
}
