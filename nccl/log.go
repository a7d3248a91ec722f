package nccl

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Log is what an NCCL_DEBUG=INFO/WARN log (with PyTorch's messages mixed in)
// says about a job.
type Log struct {
	Lines      int               `json:"lines"`
	Version    string            `json:"version,omitempty"` // 2.28.3+cuda13.0
	CUDADriver int               `json:"cuda_driver,omitempty"`
	Hosts      []string          `json:"hosts,omitempty"`
	Ranks      []Rank            `json:"ranks"`
	NNodes     int               `json:"nnodes,omitempty"`
	Bootstrap  []string          `json:"bootstrap,omitempty"`  // eth0:10.0.0.1<0>
	SocketIfs  []string          `json:"socket_ifs,omitempty"` // [0]eth0:10.0.0.1<0>
	IBDevs     []string          `json:"ib_devs,omitempty"`    // [0]mlx5_0:1/IB
	Network    string            `json:"network,omitempty"`    // Socket, IB
	Env        map[string]string `json:"env,omitempty"`        // NCCL_* "set by environment"
	Rings      []Ring            `json:"rings,omitempty"`
	Trees      []string          `json:"trees,omitempty"`
	Channels   *ChannelCounts    `json:"channels,omitempty"`
	Transports []Transport       `json:"transports,omitempty"`
	Algos      []AlgoChoice      `json:"algos,omitempty"`
	Notes      []Event           `json:"notes,omitempty"` // INFO lines worth a learner's eye
	Warnings   []Event           `json:"warnings,omitempty"`
	Errors     []Event           `json:"errors,omitempty"`
	// Codes counts the ncclResult_t codes seen (in "-> N" return traces and
	// PyTorch errors).
	Codes    map[Result]int    `json:"codes,omitempty"`
	Timeouts []WatchdogTimeout `json:"timeouts,omitempty"`
	// LastError is the text PyTorch prints after "Last error:".
	LastError []string `json:"last_error,omitempty"`
}

// Rank is one rank of a communicator, from its "Init START/COMPLETE" line.
type Rank struct {
	// Comm is the communicator's address in that process; CommID is the id
	// every rank of one communicator shares ("" before NCCL 2.19).
	Comm     string `json:"comm"`
	CommID   string `json:"comm_id,omitempty"`
	Rank     int    `json:"rank"`
	NRanks   int    `json:"nranks"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	CUDADev  int    `json:"cuda_dev"`
	NVMLDev  int    `json:"nvml_dev"`
	BusID    string `json:"bus_id"`
	Complete bool   `json:"complete"`
}

// Group names the communicator a rank belongs to: its commId, or its
// address when the log has no commId.
func (r Rank) Group() string {
	if r.CommID != "" {
		return r.CommID
	}
	return r.Comm
}

// PCIBusID turns NCCL's busId ("18000", "60": domain<<20 | bus<<12 |
// device<<4 | function, in hex) into a PCI address, 0000:18:00.0.
func (r Rank) PCIBusID() string {
	v, err := strconv.ParseUint(r.BusID, 16, 64)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v>>20, (v>>12)&0xff, (v>>4)&0xff, v&0xf)
}

// Ring is one channel's ring order, as rank 0 prints it.
type Ring struct {
	Channel int   `json:"channel"`
	Of      int   `json:"of"`
	Order   []int `json:"order"`
}

// ChannelCounts come from the "N coll channels, ..." line.
type ChannelCounts struct {
	Coll, CollNet, NVLS, P2P, P2PPerPeer int
}

// Transport is one connection NCCL set up: "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC".
type Transport struct {
	Channel int    `json:"channel"`
	Conn    int    `json:"conn"`
	From    int    `json:"from"`
	To      int    `json:"to"`
	Dir     string `json:"dir,omitempty"` // send, receive, or "" for intra-node
	Via     string `json:"via"`           // P2P/IPC, SHM/direct/direct, NET/IB/0/GDRDMA, NET/Socket/0
	Host    string `json:"host"`
}

// Kind is the transport family: P2P, SHM, NET/IB, NET/Socket, CollNet, NVLS...
func (t Transport) Kind() string {
	parts := strings.Split(t.Via, "/")
	if parts[0] == "NET" && len(parts) > 1 {
		return "NET/" + parts[1]
	}
	return strings.Fields(parts[0])[0]
}

// AlgoChoice is one tuning decision (NCCL_DEBUG_SUBSYS=TUNING).
type AlgoChoice struct {
	Coll  string `json:"coll"`
	Bytes int64  `json:"bytes"`
	Algo  string `json:"algo"`
	Proto string `json:"proto"`
}

// Event is a line that needs attention.
type Event struct {
	Line    int    `json:"line"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Dev     int    `json:"dev"`
	Source  string `json:"source,omitempty"` // file:line in NCCL, or "pytorch"
	Text    string `json:"text"`
	Meaning string `json:"meaning,omitempty"`
	Check   string `json:"check,omitempty"`
}

// WatchdogTimeout is a PyTorch watchdog timeout.
type WatchdogTimeout struct {
	Line      int    `json:"line"`
	Rank      int    `json:"rank"`
	SeqNum    int64  `json:"seq"`
	Op        string `json:"op"`
	NumelIn   int64  `json:"numel_in"`
	NumelOut  int64  `json:"numel_out"`
	TimeoutMs int64  `json:"timeout_ms"`
	RanMs     int64  `json:"ran_ms"`
}

var (
	versionRe   = regexp.MustCompile(`NCCL version (\d+\.\d+\.\d+\S*)`)
	cudaDrvRe   = regexp.MustCompile(`^cudaDriverVersion (\d+)`)
	bootstrapRe = regexp.MustCompile(`^Bootstrap ?: Using (.+)$`)
	socketRe    = regexp.MustCompile(`^NET/Socket ?: Using (.+)$`)
	ibRe        = regexp.MustCompile(`^NET/IB ?: Using (.+)$`)
	networkRe   = regexp.MustCompile(`^Using network (\S+)`)
	nnodesRe    = regexp.MustCompile(`rank \d+ nRanks \d+ nNodes (\d+)`)
	treesRe     = regexp.MustCompile(`^Trees (.+)$`)
	channelsRe  = regexp.MustCompile(`^(\d+) coll channels, (\d+) collnet channels, (\d+) nvls channels, (\d+) p2p channels, (\d+) p2p channels per peer`)
	envRe       = regexp.MustCompile(`^(NCCL_\w+) set by environment to (.*)$`)
	retRe       = regexp.MustCompile(`^(\S+:\d+) -> (\d+)`)
	tuningRe    = regexp.MustCompile(`^(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)`)

	watchdogRe  = regexp.MustCompile(`\[Rank (\d+)\]\s+Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?.*?Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds`)
	ncclErrInRe = regexp.MustCompile(`NCCL error in: ([^,]+), (.+?)(?:, NCCL version (\S+))?$`)
	codeNameRe  = regexp.MustCompile(`\bnccl(UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError|InProgress|Timeout)\b`)
)

// Algorithms and protocols as NCCL's tuning lines name them: by index up to 2.23
// (nccl/src/include/device.h), by ncclAlgoToString/ncclProtoToString's names from
// 2.24 (src/collectives.cc). Both read as NCCL_ALGO/NCCL_PROTO spell them.
var (
	algoNames  = []string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}
	protoNames = []string{"LL", "LL128", "Simple"}
	algoByName = map[string]string{"TREE": "Tree", "RING": "Ring", "COLLNET_DIRECT": "CollNetDirect",
		"COLLNET_CHAIN": "CollNetChain", "NVLS": "NVLS", "NVLS_TREE": "NVLSTree", "PAT": "PAT"}
	protoByName = map[string]string{"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}
)

// tuningName reads an algorithm or protocol field of a tuning line: an index or a name.
func tuningName(field string, byIndex []string, byName map[string]string) string {
	if i, err := strconv.Atoi(field); err == nil {
		if i >= 0 && i < len(byIndex) {
			return byIndex[i]
		}
		return field
	}
	if n, ok := byName[field]; ok {
		return n
	}
	return field
}

// Parse reads an NCCL log. Every line is looked at once; lines it does not
// know are skipped, so any job output can be fed to it.
func Parse(r io.Reader) (*Log, error) {
	l := &Log{Env: map[string]string{}, Codes: map[Result]int{}}
	p := parser{log: l, ranks: map[string]int{}, hosts: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 256*1024), 4*1024*1024)
	for sc.Scan() {
		l.Lines++
		b := sc.Bytes()
		// Most lines of a job's output say nothing about NCCL: skip them
		// without making a string.
		if !p.lastError && !bytes.Contains(b, []byte("NCCL")) && !bytes.Contains(b, []byte("nccl")) &&
			!bytes.Contains(b, []byte("Watchdog")) && !bytes.Contains(b, []byte("Last error")) {
			continue
		}
		p.line(l.Lines, string(b))
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("read NCCL log at line %d: %w", l.Lines+1, err)
	}
	sort.SliceStable(l.Ranks, func(i, j int) bool {
		if l.Ranks[i].Group() != l.Ranks[j].Group() {
			return l.Ranks[i].Group() < l.Ranks[j].Group()
		}
		return l.Ranks[i].Rank < l.Ranks[j].Rank
	})
	return l, nil
}

type parser struct {
	log       *Log
	ranks     map[string]int // comm/rank -> index in log.Ranks
	hosts     map[string]bool
	lastError bool // the previous line was PyTorch's "Last error:"
	seenRing  map[int]bool
}

func (p *parser) line(n int, s string) {
	l := p.log
	if p.lastError {
		p.lastError = false
		if t := strings.TrimSpace(s); t != "" {
			l.LastError = append(l.LastError, t)
			p.warnOrError(&l.Errors, Event{Line: n, Source: "pytorch (Last error)", Text: t})
		}
	}
	if !strings.Contains(s, "NCCL") && !strings.Contains(s, "nccl") && !strings.Contains(s, "Watchdog") && !strings.Contains(s, "Last error") {
		return
	}
	if d, ok := splitDebugLine(s); ok {
		if !p.hosts[d.host] {
			p.hosts[d.host] = true
			l.Hosts = append(l.Hosts, d.host)
		}
		switch d.level {
		case "INFO":
			p.info(n, d.host, d.pid, d.dev, d.msg)
		case "WARN":
			p.warnOrError(&l.Warnings, Event{Line: n, Host: d.host, PID: d.pid, Dev: d.dev, Source: d.source, Text: strings.TrimSpace(d.msg)})
		}
		return
	}
	if m := versionRe.FindStringSubmatch(s); m != nil && l.Version == "" && !strings.Contains(s, "NCCL error") {
		l.Version = m[1]
		return
	}
	p.pytorch(n, s)
}

// debugLine is one line of NCCL's debug output:
//
//	host:pid:tid [dev] NCCL INFO msg
//	host:pid:tid [dev] file.cc:123 (func) NCCL WARN msg
//
// possibly after a timestamp ("[2026-12-03 08:00:00] ", on WARN lines of
// recent releases) or a launcher's prefix ("[rank0]:", "stdout: ").
type debugLine struct {
	host       string
	pid, dev   int
	source     string // file:line, WARN lines only
	level, msg string
}

// splitDebugLine parses the prefix by hand: a regular expression that has to
// find it anywhere in the line costs a hundred times more.
func splitDebugLine(s string) (debugLine, bool) {
	var d debugLine
	i := strings.Index(s, " NCCL ")
	if i < 0 {
		return d, false
	}
	rest := s[i+len(" NCCL "):]
	d.level, d.msg, _ = strings.Cut(rest, " ")
	switch d.level {
	case "INFO", "WARN", "TRACE", "ABORT", "CALL":
	default:
		return d, false
	}
	head := s[:i]
	// The device bracket: the last " [digits]" in the head.
	open := -1
	for j := strings.LastIndex(head, " ["); j >= 0; j = strings.LastIndex(head[:j], " [") {
		k := strings.IndexByte(head[j:], ']')
		if k < 0 {
			continue
		}
		if v, err := strconv.Atoi(head[j+2 : j+k]); err == nil {
			d.dev = v
			open = j
			d.source = strings.TrimSpace(head[j+k+1:])
			break
		}
	}
	if open < 0 {
		return d, false
	}
	if p := strings.Index(d.source, " ("); p >= 0 {
		d.source = d.source[:p]
	}
	who := head[:open]
	if sp := strings.LastIndexAny(who, " \t"); sp >= 0 {
		who = who[sp+1:]
	}
	parts := strings.Split(who, ":")
	if len(parts) < 3 {
		return d, false
	}
	d.host = parts[len(parts)-3]
	if b := strings.LastIndexByte(d.host, ']'); b >= 0 {
		d.host = d.host[b+1:]
	}
	var err error
	if d.pid, err = strconv.Atoi(parts[len(parts)-2]); err != nil || d.host == "" {
		return d, false
	}
	if _, err := strconv.Atoi(parts[len(parts)-1]); err != nil {
		return d, false
	}
	return d, true
}

func (p *parser) info(n int, host string, pid, dev int, msg string) {
	l := p.log
	switch {
	case strings.HasPrefix(msg, "Channel ") || strings.HasPrefix(msg, "Ring "):
		p.channelLine(host, msg)
	case strings.Contains(msg, "Init START") || strings.Contains(msg, "Init COMPLETE"):
		p.initLine(host, pid, msg)
	case strings.HasPrefix(msg, "NCCL version"):
		if m := versionRe.FindStringSubmatch(msg); m != nil {
			l.Version = m[1]
		}
	default:
		p.infoOther(n, host, pid, dev, msg)
	}
}

// channelLine reads "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0"
// (a connection; older releases print "Channel 00 :" or "Ring 00 :") and
// "Channel 00/02 :    0   1   2   3" (rank 0's ring order). Split by hand:
// these lines are most of an INFO log.
func (p *parser) channelLine(host, msg string) {
	l := p.log
	f := strings.Fields(msg)
	if len(f) < 4 || f[2] != ":" {
		return
	}
	chStr, subStr, hasSub := strings.Cut(f[1], "/")
	ch, err := strconv.Atoi(chStr)
	if err != nil {
		return
	}
	sub := 0
	if hasSub {
		if sub, err = strconv.Atoi(subStr); err != nil {
			return
		}
	}
	if via := strings.Index(msg, " via "); via >= 0 {
		// f[3] "0[0]" or "0", f[4] "->", f[5] "1[1]", then "[send]"/"[receive]" or "via".
		if len(f) < 7 || f[4] != "->" {
			return
		}
		from, err1 := strconv.Atoi(rankOf(f[3]))
		to, err2 := strconv.Atoi(rankOf(f[5]))
		if err1 != nil || err2 != nil {
			return
		}
		t := Transport{Channel: ch, Conn: sub, From: from, To: to, Via: strings.TrimSpace(msg[via+len(" via "):]), Host: host}
		if f[6] == "[send]" || f[6] == "[receive]" {
			t.Dir = strings.Trim(f[6], "[]")
		}
		l.Transports = append(l.Transports, t)
		return
	}
	if f[0] != "Channel" || !hasSub || strings.Contains(msg, "->") {
		return
	}
	var order []int
	for _, x := range f[3:] {
		v, err := strconv.Atoi(x)
		if err != nil {
			return
		}
		order = append(order, v)
	}
	if p.seenRing == nil {
		p.seenRing = map[int]bool{}
	}
	if p.seenRing[ch] {
		return
	}
	p.seenRing[ch] = true
	l.Rings = append(l.Rings, Ring{Channel: ch, Of: sub, Order: order})
}

func rankOf(s string) string {
	if i := strings.IndexByte(s, '['); i >= 0 {
		return s[:i]
	}
	return s
}

// initLine reads "comm 0x... rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000
// commId 0x... - Init START" (and COMPLETE).
func (p *parser) initLine(host string, pid int, msg string) {
	l := p.log
	f := strings.Fields(msg)
	vals := map[string]string{}
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "comm", "rank", "nranks", "cudaDev", "nvmlDev", "busId", "commId":
			if _, seen := vals[f[i]]; !seen {
				vals[f[i]] = f[i+1]
			}
		}
	}
	comm, ok1 := vals["comm"]
	rank, err1 := strconv.Atoi(vals["rank"])
	nranks, err2 := strconv.Atoi(vals["nranks"])
	if !ok1 || err1 != nil || err2 != nil {
		return
	}
	group := comm
	if id := vals["commId"]; id != "" {
		group = id
	}
	key := group + "/" + vals["rank"]
	i, ok := p.ranks[key]
	if !ok {
		r := Rank{Comm: comm, CommID: vals["commId"], Rank: rank, NRanks: nranks, Host: host, PID: pid, BusID: vals["busId"], NVMLDev: -1}
		r.CUDADev, _ = strconv.Atoi(vals["cudaDev"])
		if v, err := strconv.Atoi(vals["nvmlDev"]); err == nil {
			r.NVMLDev = v
		}
		l.Ranks = append(l.Ranks, r)
		i = len(l.Ranks) - 1
		p.ranks[key] = i
	}
	if strings.Contains(msg, "Init COMPLETE") {
		l.Ranks[i].Complete = true
	}
}

// infoForm is one kind of INFO line: a literal every such line contains,
// checked before the regular expression, and what to record.
type infoForm struct {
	lit string
	re  *regexp.Regexp
	do  func(l *Log, m []string, ev Event)
}

var infoForms = []infoForm{
	{" -> ", retRe, func(l *Log, m []string, ev Event) {
		code, _ := strconv.Atoi(m[2])
		r := Result(code)
		l.Codes[r]++
		// Keep the first trace of each code: it is where the error started.
		if l.Codes[r] == 1 {
			ev.Source = m[1]
			ev.Text = fmt.Sprintf("%s (%d) returned at %s", r.Name(), code, m[1])
			ev.Meaning, ev.Check = r.Meaning(), r.Check()
			l.Errors = append(l.Errors, ev)
		}
	}},
	{"set by environment", envRe, func(l *Log, m []string, _ Event) {
		// NCCL 2.28 ends the line with a period: "... set by environment to 0."
		l.Env[m[1]] = strings.TrimSuffix(strings.TrimSpace(m[2]), ".")
	}},
	{"coll channels", channelsRe, func(l *Log, m []string, _ Event) {
		c := &ChannelCounts{}
		c.Coll, _ = strconv.Atoi(m[1])
		c.CollNet, _ = strconv.Atoi(m[2])
		c.NVLS, _ = strconv.Atoi(m[3])
		c.P2P, _ = strconv.Atoi(m[4])
		c.P2PPerPeer, _ = strconv.Atoi(m[5])
		l.Channels = c
	}},
	{"Trees", treesRe, func(l *Log, m []string, _ Event) { l.Trees = append(l.Trees, m[1]) }},
	{"Bootstrap", bootstrapRe, func(l *Log, m []string, _ Event) {
		l.Bootstrap = appendUnique(l.Bootstrap, strings.TrimSpace(m[1]))
	}},
	{"NET/Socket", socketRe, func(l *Log, m []string, _ Event) {
		for _, f := range strings.Fields(m[1]) {
			l.SocketIfs = appendUnique(l.SocketIfs, f)
		}
	}},
	{"NET/IB", ibRe, func(l *Log, m []string, _ Event) {
		// "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:..." — with no
		// device NCCL prints only the "[RO]" (relaxed ordering) flag.
		for _, f := range strings.Fields(strings.SplitN(m[1], ";", 2)[0]) {
			if len(f) > 1 && f[0] == '[' && f[1] >= '0' && f[1] <= '9' {
				l.IBDevs = appendUnique(l.IBDevs, f)
			}
		}
	}},
	{"Using network", networkRe, func(l *Log, m []string, _ Event) { l.Network = m[1] }},
	{"cudaDriverVersion", cudaDrvRe, func(l *Log, m []string, _ Event) { l.CUDADriver, _ = strconv.Atoi(m[1]) }},
	{"nNodes", nnodesRe, func(l *Log, m []string, _ Event) { l.NNodes, _ = strconv.Atoi(m[1]) }},
	{" Bytes -> Algo ", tuningRe, func(l *Log, m []string, _ Event) {
		b, _ := strconv.ParseInt(m[2], 10, 64)
		l.Algos = append(l.Algos, AlgoChoice{Coll: m[1], Bytes: b, Algo: tuningName(m[3], algoNames, algoByName), Proto: tuningName(m[4], protoNames, protoByName)})
	}},
}

func (p *parser) infoOther(n int, host string, pid, dev int, msg string) {
	ev := Event{Line: n, Host: host, PID: pid, Dev: dev}
	for _, f := range infoForms {
		if !strings.Contains(msg, f.lit) {
			continue
		}
		if m := f.re.FindStringSubmatch(msg); m != nil {
			f.do(p.log, m, ev)
			return
		}
	}
	if k, ok := matchKnown(infoNotes, msg); ok {
		text := strings.TrimSpace(msg)
		for _, n := range p.log.Notes {
			if n.Text == text {
				return // one note per message, not per rank
			}
		}
		ev.Text, ev.Meaning, ev.Check = text, k.meaning, k.check
		p.log.Notes = append(p.log.Notes, ev)
	}
}

func appendUnique(xs []string, s string) []string {
	for _, x := range xs {
		if x == s {
			return xs
		}
	}
	return append(xs, s)
}

// pytorch reads PyTorch's (c10d) lines about NCCL.
func (p *parser) pytorch(n int, s string) {
	l := p.log
	if !strings.Contains(s, "Watchdog caught") {
		// not a timeout
	} else if m := watchdogRe.FindStringSubmatch(s); m != nil {
		t := WatchdogTimeout{Line: n}
		t.Rank, _ = strconv.Atoi(m[1])
		t.SeqNum, _ = strconv.ParseInt(m[2], 10, 64)
		t.Op = m[3]
		t.NumelIn, _ = strconv.ParseInt(m[4], 10, 64)
		t.NumelOut, _ = strconv.ParseInt(m[5], 10, 64)
		t.TimeoutMs, _ = strconv.ParseInt(m[6], 10, 64)
		t.RanMs, _ = strconv.ParseInt(m[7], 10, 64)
		l.Timeouts = append(l.Timeouts, t)
		return
	}
	if strings.Contains(s, "Last error:") {
		rest := strings.TrimSpace(s[strings.Index(s, "Last error:")+len("Last error:"):])
		if rest != "" {
			l.LastError = append(l.LastError, rest)
			p.warnOrError(&l.Errors, Event{Line: n, Source: "pytorch (Last error)", Text: rest})
		} else {
			p.lastError = true
		}
		return
	}
	if !strings.Contains(s, "NCCL error in:") {
		// not PyTorch's NCCL error line
	} else if m := ncclErrInRe.FindStringSubmatch(s); m != nil {
		ev := Event{Line: n, Source: "pytorch " + strings.TrimSpace(m[1]), Text: strings.TrimSpace(s)}
		if r, ok := resultFromText(m[2]); ok {
			l.Codes[r]++
			ev.Meaning, ev.Check = r.Name()+": "+r.Meaning(), r.Check()
		}
		if m[3] != "" && l.Version == "" {
			l.Version = m[3]
		}
		l.Errors = append(l.Errors, ev)
		return
	}
	if !strings.Contains(s, "nccl") {
		// no code name on this line
	} else if m := codeNameRe.FindStringSubmatch(s); m != nil {
		// "ncclInvalidUsage: This usually reflects invalid usage of NCCL
		// library." and similar: PyTorch's explanation of the code.
		if r, ok := resultFromText("nccl" + m[1]); ok {
			l.Errors = append(l.Errors, Event{Line: n, Source: "pytorch", Text: strings.TrimSpace(s), Meaning: r.Name() + ": " + r.Meaning(), Check: r.Check()})
		}
		return
	}
	if k, ok := matchKnown(pytorchMessages, s); ok {
		l.Errors = append(l.Errors, Event{Line: n, Source: "pytorch", Text: strings.TrimSpace(s), Meaning: k.meaning, Check: k.check})
	}
}

// warnOrError adds an event with the explanation of the first known pattern it matches.
func (p *parser) warnOrError(dst *[]Event, ev Event) {
	if k, ok := matchKnown(warnings, ev.Text); ok {
		ev.Meaning, ev.Check = k.meaning, k.check
	}
	*dst = append(*dst, ev)
}

// PeerTransport sums up how one rank reaches another.
type PeerTransport struct {
	From, To int
	Via      []string // distinct transports, in order of appearance
	Channels []int
	Hosts    []string
}

// Peers groups the transports by (from, to) pair, ordered by ranks.
func (l *Log) Peers() []PeerTransport {
	idx := map[[2]int]int{}
	var out []PeerTransport
	for _, t := range l.Transports {
		k := [2]int{t.From, t.To}
		i, ok := idx[k]
		if !ok {
			out = append(out, PeerTransport{From: t.From, To: t.To})
			i = len(out) - 1
			idx[k] = i
		}
		pt := &out[i]
		pt.Via = appendUnique(pt.Via, t.Via)
		pt.Hosts = appendUnique(pt.Hosts, t.Host)
		found := false
		for _, c := range pt.Channels {
			found = found || c == t.Channel
		}
		if !found {
			pt.Channels = append(pt.Channels, t.Channel)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

// TransportKinds lists the transport families used (P2P, SHM, NET/IB, ...).
func (l *Log) TransportKinds() []string {
	var out []string
	for _, t := range l.Transports {
		out = appendUnique(out, t.Kind())
	}
	sort.Strings(out)
	return out
}

// Failed says whether the log shows an error or a timeout.
func (l *Log) Failed() bool {
	return len(l.Errors) > 0 || len(l.Timeouts) > 0 || len(l.Warnings) > 0
}
