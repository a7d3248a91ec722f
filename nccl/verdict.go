package nccl

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Verdict is what the explainer concludes from a paste: one symptom class,
// the likely causes ranked with why, the commands that confirm them, and the
// input lines that support it. Its JSON form is the documented interface
// (nccl/VERDICT.md); Model says which version of it this is.
type Verdict struct {
	Model       string        `json:"model"`
	Symptom     SymptomInfo   `json:"symptom"`
	Also        []string      `json:"also,omitempty"` // other symptoms the input shows, most specific first
	Causes      []RankedCause `json:"causes"`
	Next        []string      `json:"next"`
	Evidence    []Evidence    `json:"evidence"`
	NCCLVersion string        `json:"nccl_version,omitempty"`
	Needs       []string      `json:"needs,omitempty"` // what to add to the input for a firmer verdict
	Input       InputInfo     `json:"input"`
	// Log is the structured reading of NCCL's own lines (ranks, transports,
	// codes, timeouts) that labs and the grader use as evidence.
	Log *Log `json:"log"`
}

// RankedCause is one likely cause, most likely first.
type RankedCause struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	TitleZH string   `json:"title_zh"`
	Why     string   `json:"why"`
	Check   []string `json:"check"`
}

// Evidence is one input line that supports the verdict.
type Evidence struct {
	Line     int    `json:"line"`
	Symptom  string `json:"symptom"`
	Says     string `json:"says"`
	Text     string `json:"text"`
	Versions string `json:"versions,omitempty"` // the releases that print the line in this form
}

// InputInfo says what was read, and what was not.
type InputInfo struct {
	Bytes     int64  `json:"bytes"`
	Lines     int    `json:"lines"`
	Truncated bool   `json:"truncated,omitempty"` // longer than the limit: only the start was read
	Binary    string `json:"binary,omitempty"`    // why the input was not read as text
}

// Limits on what Diagnose reads: a paste is text, and a single line longer
// than maxLine is not a log line anyone wrote.
const (
	DefaultMaxInput = 64 << 20
	maxLine         = 16 << 10
	maxEvidence     = 24
)

// DiagnoseReader reads at most max bytes (DefaultMaxInput when max <= 0) and
// diagnoses them. Only a read error is an error: any content gets a verdict.
func DiagnoseReader(r io.Reader, max int64) (*Verdict, error) {
	if max <= 0 {
		max = DefaultMaxInput
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read input at byte %d: %w", len(data), err)
	}
	truncated := int64(len(data)) > max
	if truncated {
		data = data[:max]
	}
	v := Diagnose(data)
	v.Input.Truncated = truncated
	return v, nil
}

// Diagnose reads a paste: NCCL_DEBUG output with or without its prefix,
// PyTorch errors, nccl-tests output, kernel and tool output, in any mix and
// order.
func Diagnose(data []byte) *Verdict {
	v := &Verdict{Model: VerdictModel, Input: InputInfo{Bytes: int64(len(data))}}
	if why := notText(data); why != "" {
		v.Input.Binary = why
		v.Log = &Log{Env: map[string]string{}, Codes: map[Result]int{}}
		v.finish(nil, nil)
		return v
	}
	lines := splitLines(data)
	v.Input.Lines = len(lines)
	// Parse never fails on memory input with bounded lines.
	v.Log, _ = Parse(strings.NewReader(strings.Join(lines, "\n")))
	v.NCCLVersion = v.Log.Version
	s := scan(lines)
	s.structure(v.Log)
	v.finish(&s, lines)
	return v
}

// hit is a line that matched a signal, with the causes it points to.
type hit struct {
	line     int
	symptom  string
	says     string
	text     string
	versions string
	causes   []string
}

type scanState struct {
	hits []hit
	// nccl-tests output
	testHeader, testRows, wrongRows int
	wrongLine                       int
	// gdb/py-spy frames of a hang
	initFrame, collFrame int
	initSeen             int // lines that show communicator init under way
	// suspectIf is an interface NCCL said it uses that rarely reaches
	// other nodes (lo, docker0, veth...).
	suspectIf string
}

var (
	testHeaderRe = regexp.MustCompile(`#\s+size\s+count\s+type`)
	testRowRe    = regexp.MustCompile(`^\s*\d+\s+\d+\s+(float|half|double|bfloat16|int8|uint8|int32|uint32|int64|uint64|fp8\w*|f8\w*|float8\w*)\s`)
	prevXidRe    = regexp.MustCompile(`previous Xid (\d+)`)
	warnStampRe  = regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] .*NCCL WARN`)
	usingIfRe    = regexp.MustCompile(`Using (?:interface )?(?:\[\d+\])?((?:lo|docker|veth|virbr|ip6tnl|tunl)\w*):`)
)

func scan(lines []string) scanState {
	var s scanState
	for i, line := range lines {
		n := i + 1
		low := strings.ToLower(line)
		if strings.Contains(line, "Xid") {
			if m := xidRe.FindStringSubmatch(line); m != nil {
				xid := atoiOr(m[1], 0)
				if p := prevXidRe.FindStringSubmatch(line); p != nil {
					xid = atoiOr(p[1], xid)
				}
				sym, says, causes := xidSymptom(xid)
				s.add(hit{n, sym, says, line, "", causes})
				continue
			}
		}
		if testHeaderRe.MatchString(line) {
			s.testHeader = n
			continue
		}
		if s.testHeader > 0 && testRowRe.MatchString(line) {
			s.testRows++
			if testRowWrong(line) {
				s.wrongRows++
				if s.wrongLine == 0 {
					s.wrongLine = n
				}
			}
			continue
		}
		if strings.Contains(low, "out of bounds values") && !strings.Contains(low, ": 0 ok") {
			if f := strings.Fields(low); len(f) > 0 && strings.Contains(low, "failed") {
				s.wrongRows++
				s.wrongLine = n
			}
		}
		switch {
		case strings.Contains(line, "bootstrapRecv") || strings.Contains(line, "bootstrapNetAccept") || strings.Contains(line, "ncclCommInitRankSync") || strings.Contains(line, "bootstrapAllGather"):
			s.initFrame = n
		case strings.Contains(line, "ncclKernel") || strings.Contains(line, "cudaStreamSynchronize") && strings.Contains(line, "#"):
			s.collFrame = n
		}
		if strings.Contains(line, "Init START") || strings.Contains(line, "Bootstrap : Using") || strings.Contains(line, "Bootstrap: Using") || strings.Contains(line, "NET/IB : Using") || strings.Contains(line, "Using network") {
			s.initSeen = n
		}
		if s.suspectIf == "" && strings.Contains(line, "Using") {
			if m := usingIfRe.FindStringSubmatch(line); m != nil {
				s.suspectIf = m[1]
			}
		}
		for _, sg := range signals {
			if !containsAny(low, sg.any) || (sg.re != nil && !sg.re.MatchString(low)) {
				continue
			}
			h := hit{n, sg.symptom, sg.says, line, sg.versions, sg.causes}
			if sg.symptom == "ib-completion" {
				status, name, versions, causes := ibCompletion(line)
				h.versions, h.causes = versions, causes
				if status >= 0 {
					h.says = fmt.Sprintf("RDMA completion with status %d", status)
					if name != "" {
						h.says += " (" + name + ")"
					}
				}
			}
			if h.versions == "" && warnStampRe.MatchString(line) {
				h.versions = "NCCL 2.26+ (WARN lines start with a timestamp, NCCL_DEBUG_TIMESTAMP_FORMAT)"
			}
			s.add(h)
			break
		}
	}
	return s
}

func (s *scanState) add(h hit) { s.hits = append(s.hits, h) }

// testRowWrong reads the #wrong columns of an nccl-tests row: the 4th field
// from the end (out-of-place) and the last (in-place). Older releases print
// a float max error there instead, which is not a count.
func testRowWrong(line string) bool {
	f := strings.Fields(line)
	if len(f) < 9 {
		return false
	}
	for _, x := range []string{f[len(f)-5], f[len(f)-1]} {
		if n, err := strconv.ParseInt(x, 10, 64); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// structure adds the symptoms that only the shape of the input shows: a
// results table, where init stopped, where a hang's stack is.
func (s *scanState) structure(l *Log) {
	if s.wrongRows > 0 {
		s.add(hit{s.wrongLine, "wrong-results", "nccl-tests found wrong values (#wrong > 0 or out-of-bounds values)", "", "", []string{"p2p-corruption", "gpu-hardware"}})
	}
	complete := 0
	for _, r := range l.Ranks {
		if r.Complete {
			complete++
		}
	}
	switch {
	case s.initFrame > 0:
		s.add(hit{s.initFrame, "init-hang", "the stack is inside communicator init (bootstrap)", "", "", []string{"wrong-interface", "firewall"}})
	case s.collFrame > 0:
		s.add(hit{s.collFrame, "collective-hang", "the stack is inside a collective", "", "", []string{"rank-desync"}})
	case s.testHeader > 0 && s.testRows == 0:
		s.add(hit{s.testHeader, "collective-hang", "nccl-tests printed its table header but no result row: the first collective never finished", "", "", []string{"firewall", "wrong-interface"}})
	case len(l.Ranks) > complete || (s.initSeen > 0 && complete == 0 && s.testRows == 0):
		line := s.initSeen
		if len(l.Ranks) > 0 && line == 0 {
			line = 1
		}
		s.add(hit{line, "init-hang", "communicator init started but no Init COMPLETE follows (a hang, or the excerpt stops early)", "", "", []string{"wrong-interface", "firewall", "peer-not-started"}})
	case s.testRows > 0 || complete > 0:
		s.add(hit{max(s.testHeader, 1), "healthy", "init completed / results printed without errors", "", "", nil})
	}
}

func (v *Verdict) finish(s *scanState, lines []string) {
	var hits []hit
	suspect := ""
	if s != nil {
		hits, suspect = s.hits, s.suspectIf
	}
	// The verdict is the most specific symptom seen; structural guesses
	// (init-hang, healthy) yield to any line that names a failure.
	best := len(Symptoms) - 1
	seen := map[string]bool{}
	for _, h := range hits {
		_, i := symptomInfo(h.symptom)
		if i >= 0 && i < best {
			best = i
		}
		seen[h.symptom] = true
	}
	if seen["healthy"] && len(seen) > 1 {
		delete(seen, "healthy")
		if Symptoms[best].ID == "healthy" {
			best = len(Symptoms) - 1
		}
	}
	v.Symptom = Symptoms[best]
	for _, sy := range Symptoms {
		if seen[sy.ID] && sy.ID != v.Symptom.ID {
			v.Also = append(v.Also, sy.ID)
		}
	}
	v.rankCauses(hits, suspect)
	v.evidence(hits)
	v.needs()
}

// rankCauses scores each cause: the symptom's usual order gives a base, each
// line that points at a cause adds more (lines of the verdict's own symptom
// count most), and context in the log (an interface NCCL chose, the
// variables set, ranks on different collectives) adds the rest.
func (v *Verdict) rankCauses(hits []hit, suspectIf string) {
	score := map[string]int{}
	why := map[string]string{}
	for i, c := range v.Symptom.causes {
		score[c] += len(v.Symptom.causes) - i
	}
	for _, h := range hits {
		w := 2
		if h.symptom == v.Symptom.ID {
			w = 10
		}
		for i, c := range h.causes {
			if _, known := score[c]; !known && h.symptom != v.Symptom.ID {
				continue // another symptom's cause does not widen this verdict
			}
			score[c] += w - i
			if why[c] == "" && h.symptom == v.Symptom.ID {
				why[c] = fmt.Sprintf("line %d: %s", h.line, h.says)
			}
		}
	}
	if l := v.Log; l != nil {
		if _, set := l.Env["NCCL_SOCKET_IFNAME"]; set && score["ifname-mismatch"] > 0 {
			score["ifname-mismatch"] += 5
			why["ifname-mismatch"] = "NCCL_SOCKET_IFNAME is set (" + l.Env["NCCL_SOCKET_IFNAME"] + ")"
		}
		if seqs := distinctSeqs(l.Timeouts); seqs > 1 {
			score["rank-desync"] += 6
			why["rank-desync"] = fmt.Sprintf("ranks timed out on %d different SeqNums: some ranks are behind", seqs)
		}
		if l.Network == "Socket" && score["rdma-unavailable"] > 0 {
			score["rdma-unavailable"] += 2
		}
	}
	if _, ok := score["wrong-interface"]; ok && suspectIf != "" {
		score["wrong-interface"] += 15
		why["wrong-interface"] = "NCCL uses " + suspectIf + ", which usually does not reach other nodes"
	}
	ids := make([]string, 0, len(score))
	for c, n := range score {
		if n > 0 {
			ids = append(ids, c)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if score[ids[i]] != score[ids[j]] {
			return score[ids[i]] > score[ids[j]]
		}
		return ids[i] < ids[j]
	})
	if len(ids) > 4 {
		ids = ids[:4]
	}
	v.Causes = []RankedCause{}
	v.Next = []string{}
	for _, id := range ids {
		c := Causes[id]
		w := c.Why
		if why[id] != "" {
			w = why[id] + "; " + c.Why
		}
		v.Causes = append(v.Causes, RankedCause{ID: id, Title: c.Title, TitleZH: c.TitleZH, Why: w, Check: c.Check})
	}
	for i, c := range v.Causes {
		if i >= 2 {
			break
		}
		for _, cmd := range c.Check {
			v.Next = appendUnique(v.Next, cmd)
		}
	}
}

func (v *Verdict) evidence(hits []hit) {
	v.Evidence = []Evidence{}
	// The verdict's own lines first, then the rest in input order.
	sorted := append([]hit(nil), hits...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return (sorted[i].symptom == v.Symptom.ID) && (sorted[j].symptom != v.Symptom.ID)
	})
	seen := map[string]bool{}
	for _, h := range sorted {
		key := h.symptom + "\x00" + normalise(h.text)
		if seen[key] {
			continue
		}
		seen[key] = true
		v.Evidence = append(v.Evidence, Evidence{Line: h.line, Symptom: h.symptom, Says: h.says, Text: clip(strings.TrimSpace(h.text), 400), Versions: h.versions})
		if len(v.Evidence) == maxEvidence {
			break
		}
	}
}

// needs says what would make the verdict firmer.
func (v *Verdict) needs() {
	switch {
	case v.Input.Binary != "":
		v.Needs = []string{"the text of the log, not " + v.Input.Binary}
	case v.Symptom.ID == "unrecognised":
		v.Needs = []string{
			"the job's output with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log keeps one file per process)",
			"the first error of every rank, PyTorch's traceback included (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
			"kernel messages from the nodes: dmesg -T | grep -E 'NVRM|Xid|AER|mlx5'",
		}
	case v.Symptom.ID == "unexplained-error":
		v.Needs = []string{"the WARN line that says which call failed: rerun with NCCL_DEBUG=WARN (or INFO with NCCL_DEBUG_SUBSYS=INIT,NET)"}
	case v.Symptom.ID == "init-hang" || v.Symptom.ID == "collective-hang":
		v.Needs = []string{"every rank's log to the end (NCCL_DEBUG=INFO), and a stack of a stuck rank: py-spy dump --native --pid PID"}
	case v.Symptom.ID == "watchdog-timeout" && (v.Log == nil || len(v.Log.Warnings) == 0):
		v.Needs = []string{"the NCCL WARN lines before the timeout (NCCL_DEBUG=WARN) and the timeout lines of all ranks, to see which one is behind"}
	}
}

// notText says why data is not a text log, or "".
func notText(data []byte) string {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		return "gzip-compressed data (gunzip it first)"
	}
	head := data
	if len(head) > 64<<10 {
		head = head[:64<<10]
	}
	bad := bytes.Count(head, []byte{0})
	for i := 0; i < len(head); {
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 && len(head)-i >= utf8.UTFMax {
			bad++
		} else if r < 0x20 && r != '\n' && r != '\r' && r != '\t' && r != 0x1b && r != 0 {
			bad++
		}
		i += size
	}
	if len(head) > 0 && bad*10 > len(head) {
		return fmt.Sprintf("binary data (%d of the first %d bytes are not text)", bad, len(head))
	}
	return ""
}

// splitLines splits on \n, \r\n or \r, drops ANSI colour codes and NULs,
// and clips each line to maxLine.
func splitLines(data []byte) []string {
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	text = strings.ReplaceAll(text, "\x00", "")
	text = ansiRe.ReplaceAllString(text, "")
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = clip(l, maxLine)
	}
	return lines
}

var ansiRe = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// normalise drops the parts of a line that differ between ranks, so the
// same message from eight ranks is one piece of evidence.
var digitsRe = regexp.MustCompile(`\d+`)

func normalise(s string) string {
	if i := strings.Index(s, " NCCL "); i >= 0 {
		s = s[i:]
	}
	return digitsRe.ReplaceAllString(s, "#")
}

func distinctSeqs(ts []WatchdogTimeout) int {
	seen := map[int64]bool{}
	for _, t := range ts {
		seen[t.SeqNum] = true
	}
	return len(seen)
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }
