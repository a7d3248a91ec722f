package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// versionString is the version the banner and the table header give: the
// release emulated, with a suffix (where NCCL puts "+cuda13.0") so that nobody
// mistakes the output for real NCCL.
func versionString(r ncclmsg.Release) string { return r.String() + "+commlab-emulation" }

// ncclLog writes NCCL-style debug lines: "host:pid:tid [dev] NCCL INFO ...".
type ncclLog struct {
	mu      sync.Mutex
	w       io.Writer
	close   func() error
	level   int // 0 none, 1 version, 2 warn, 3 info, 4 trace
	subsys  map[string]bool
	host    string
	pid     int
	dev     int
	version string
}

func newLog(env Env, host string, dev int, stdout io.Writer) (*ncclLog, error) {
	l := &ncclLog{w: stdout, host: host, pid: os.Getpid(), dev: dev, subsys: env.DebugSubsys, version: versionString(env.Release)}
	switch env.Debug {
	case "VERSION":
		l.level = 1
	case "WARN", "ABORT":
		l.level = 2
	case "INFO":
		l.level = 3
	case "TRACE":
		l.level = 4
	}
	if l.subsys == nil {
		l.subsys = map[string]bool{"INIT": true, "BOOTSTRAP": true, "ENV": true}
	}
	if env.DebugFile != "" && l.level > 0 {
		name := strings.NewReplacer("%h", host, "%p", strconv.Itoa(l.pid), "%%", "%").Replace(env.DebugFile)
		f, err := os.Create(name)
		if err != nil {
			return nil, fmt.Errorf("NCCL_DEBUG_FILE=%q: %w", env.DebugFile, err)
		}
		l.w, l.close = f, f.Close
	}
	return l, nil
}

func (l *ncclLog) Close() {
	if l.close != nil {
		l.close()
	}
}

// prefix is what NCCL prints before the level's part: "host:pid:tid".
func (l *ncclLog) prefix() string {
	return fmt.Sprintf("%s:%d:%d", l.host, l.pid, gettid())
}

// Info prints when NCCL_DEBUG=INFO and one of subs ("INIT|NET") is enabled;
// subs "ALL" (NCCL_ALL) prints whatever the mask.
func (l *ncclLog) Info(subs string, format string, args ...any) {
	if l.level < 3 {
		return
	}
	if !l.subsys["ALL"] && subs != "ALL" {
		ok := false
		for _, s := range strings.Split(subs, "|") {
			ok = ok || l.subsys[s]
		}
		if !ok {
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %s%s\n", l.prefix(), ncclmsg.InfoPrefix.Sprintf(l.dev), fmt.Sprintf(format, args...))
}

// Warn prints when NCCL_DEBUG is WARN or more; where is the NCCL source
// file:line of the message (ncclmsg.Msg.Src).
func (l *ncclLog) Warn(where string, format string, args ...any) {
	if l.level < 2 {
		return
	}
	file, line, _ := strings.Cut(where, ":")
	n, _ := strconv.Atoi(line)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %s%s\n", l.prefix(), ncclmsg.WarnPrefix.Sprintf(l.dev, file, n), fmt.Sprintf(format, args...))
}

// Version prints the banner (NCCL_DEBUG=VERSION or more).
func (l *ncclLog) Version() {
	if l.level == 1 {
		l.mu.Lock()
		fmt.Fprintf(l.w, "%s\n", ncclmsg.VersionBanner.Sprintf(l.version))
		l.mu.Unlock()
		return
	}
	l.Info("ALL", "%s", ncclmsg.VersionBanner.Sprintf(l.version)) // init.cc:608, NCCL_ALL
}
