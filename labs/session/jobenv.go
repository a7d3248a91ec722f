package session

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// JobEnvKeys are the variables a learner may set for the lab's job in their job env
// file: the bench's tuning and diagnostic knobs. Anything else (LD_PRELOAD, PATH,
// NCCL_COMM_ID, NCCL_DEBUG_FILE, which writes where it is told) is refused, so the
// file can tune the job but not escape it.
var JobEnvKeys = []string{
	"NCCL_ALGO", "NCCL_BUFFSIZE", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS",
	"NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_IB_RETRY_CNT", "NCCL_IB_TIMEOUT",
	"NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_NET", "NCCL_NSOCKS_PERTHREAD",
	"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_PROTO", "NCCL_SHM_DISABLE",
	"NCCL_SOCKET_IFNAME", "NCCL_SOCKET_NTHREADS",
}

// ParseJobEnv reads a learner's job env file (named name, for messages): KEY=VALUE
// lines, blank lines and # comments. Values are taken literally, with no shell
// expansion or quoting; one pair of surrounding quotes is refused rather than
// guessed at. It returns KEY=VALUE sorted by key (a later line wins), or every bad
// line as name:line: what is wrong, so the job log can show them all at once.
func ParseJobEnv(name string, data []byte) ([]string, error) {
	vars := map[string]string{}
	var errs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Sprintf("%s:%d: ", name, n)+fmt.Sprintf(format, a...))
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(strings.TrimPrefix(k, "export "))
		switch {
		case !ok:
			bad("want KEY=VALUE, got %q", line)
		case !slices.Contains(JobEnvKeys, k):
			bad("%s cannot be set here; allowed: %s", k, strings.Join(JobEnvKeys, " "))
		case strings.ContainsAny(v, "$`\"'\\ \t"):
			bad("%s: the value %q is taken literally (no quotes, spaces or $ expansion)", k, v)
		case v == "":
			bad("%s: empty value (delete the line to use the default)", k)
		default:
			vars[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}
