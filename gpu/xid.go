package gpu

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// xidLineRe matches the driver's kernel-log line, e.g.
// "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus".
var xidLineRe = regexp.MustCompile(`NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): (\d+),?\s*(.*)`)

// ScanKernelXids finds the driver's Xid lines in kernel log text (dmesg,
// journalctl -k, /dev/kmsg records).
func ScanKernelXids(r io.Reader) ([]XidEvent, error) {
	var out []XidEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m := xidLineRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		x, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, XidEvent{BusID: m[1], Xid: x, Source: "kernel log", Text: m[3]})
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("scan kernel log: %w", err)
	}
	return out, nil
}
