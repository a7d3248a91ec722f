package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Version is the NCCL release whose log wording the emulation mirrors; the
// suffix makes sure nobody mistakes the output for real NCCL.
const Version = "2.21.5+commlab-emulation"

// ncclLog writes NCCL-style debug lines: "host:pid:tid [dev] NCCL INFO ...".
type ncclLog struct {
	mu     sync.Mutex
	w      io.Writer
	close  func() error
	level  int // 0 none, 1 version, 2 warn, 3 info, 4 trace
	subsys map[string]bool
	host   string
	pid    int
	dev    int
}

func newLog(env Env, host string, dev int, stdout io.Writer) (*ncclLog, error) {
	l := &ncclLog{w: stdout, host: host, pid: os.Getpid(), dev: dev, subsys: env.DebugSubsys}
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

func (l *ncclLog) prefix() string {
	return fmt.Sprintf("%s:%d:%d [%d]", l.host, l.pid, syscall.Gettid(), l.dev)
}

// Info prints when NCCL_DEBUG=INFO and one of subs is enabled.
func (l *ncclLog) Info(subs string, format string, args ...any) {
	if l.level < 3 {
		return
	}
	if !l.subsys["ALL"] {
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
	fmt.Fprintf(l.w, "%s NCCL INFO %s\n", l.prefix(), fmt.Sprintf(format, args...))
}

// Warn prints when NCCL_DEBUG is WARN or more.
func (l *ncclLog) Warn(where string, format string, args ...any) {
	if l.level < 2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %s NCCL WARN %s\n", l.prefix(), where, fmt.Sprintf(format, args...))
}

// Version prints the banner (NCCL_DEBUG=VERSION or more).
func (l *ncclLog) Version() {
	if l.level == 1 {
		l.mu.Lock()
		fmt.Fprintf(l.w, "NCCL version %s\n", Version)
		l.mu.Unlock()
		return
	}
	l.Info("INIT", "NCCL version %s", Version)
}
