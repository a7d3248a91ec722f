package record

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
)

// The lab shell prints OSC 6973 markers (terminals ignore unknown OSC sequences):
//
//	ESC ] 6973 ; E ; <base64 command line> BEL   the command about to run (from bash history)
//	ESC ] 6973 ; C BEL                            its output starts
//	ESC ] 6973 ; D ; <exit status> BEL            the prompt is back: the command ended
//
// ShellRC makes them readonly, so a learner cannot switch them off in that shell; a marker
// printed while a command's output is open cannot come from the shell itself and marks
// the command as tampered (someone printed fake markers).
const oscPrefix = "\x1b]6973;"

// ShellRC is the bash rc file of a lab shell: prompt naming the node, markers around
// every command, history kept in memory only.
func ShellRC(user, node string) string {
	return `# commlab lab shell
HISTFILE=
HISTCONTROL=
HISTTIMEFORMAT=
PS1='\[\e[1;32m\]` + user + `@` + node + `\[\e[0m\]:\w\$ '
__cl_pre() {
  local c
  c=$(history 1 | sed -e 's/^ *[0-9]*[*]* *//')
  printf '\033]6973;E;%s\007\033]6973;C\007' "$(printf '%s' "$c" | base64 -w0)"
}
__cl_post() { printf '\033]6973;D;%s\007' "$?"; }
PS0='$(__cl_pre)'
PROMPT_COMMAND=__cl_post
readonly PS0 PROMPT_COMMAND
readonly -f __cl_pre __cl_post
`
}

// Command is one command the learner ran and what it printed.
type Command struct {
	Seq      int    // 1-based, in the order run
	Line     string // the command line as bash ran it
	Output   string // what it printed, with terminal control sequences removed
	Exit     int    // exit status; -1 if the shell never came back
	Start    float64
	End      float64
	Tampered bool // fake markers were printed inside its output
}

var markerRe = regexp.MustCompile("\x1b\\]6973;([ECD])(?:;([^\x07\x1b]*))?(?:\x07|\x1b\\\\)")

// Commands splits the recording's output into the commands run in it.
func (c *Cast) Commands() []Command {
	var out []Command
	var cur *Command
	open := false // between C and D: output belongs to cur
	var buf strings.Builder
	var pendingLine string
	havePending := false
	finish := func(exit int, t float64) {
		if cur == nil {
			return
		}
		cur.Output = Clean(buf.String())
		cur.Exit, cur.End = exit, t
		out = append(out, *cur)
		cur, open = nil, false
		buf.Reset()
	}
	for _, e := range c.Events {
		if e.Code != "o" {
			continue
		}
		data := e.Data
		for len(data) > 0 {
			loc := markerRe.FindStringSubmatchIndex(data)
			if loc == nil {
				if open {
					buf.WriteString(data)
				}
				break
			}
			if open {
				buf.WriteString(data[:loc[0]])
			}
			kind := data[loc[2]:loc[3]]
			arg := ""
			if loc[4] >= 0 {
				arg = data[loc[4]:loc[5]]
			}
			data = data[loc[1]:]
			switch kind {
			case "E":
				if open {
					cur.Tampered = true
					continue
				}
				b, err := base64.StdEncoding.DecodeString(arg)
				pendingLine, havePending = string(b), err == nil
			case "C":
				if open {
					cur.Tampered = true
					continue
				}
				if havePending {
					cur = &Command{Seq: len(out) + 1, Line: strings.TrimSpace(pendingLine), Start: e.Time}
					open, havePending = true, false
				}
			case "D":
				if open {
					// D is printed by PROMPT_COMMAND when the prompt returns; a D whose status
					// does not parse was not printed by the shell.
					code, err := strconv.Atoi(arg)
					if err != nil {
						cur.Tampered = true
						continue
					}
					finish(code, e.Time)
				}
				havePending = false
			}
		}
	}
	if cur != nil {
		finish(-1, cur.Start)
	}
	return out
}

var (
	oscRe  = regexp.MustCompile("\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)")
	csiRe  = regexp.MustCompile("\x1b\\[[0-?]*[ -/]*[@-~]")
	escRe  = regexp.MustCompile("\x1b[@-Z\\\\-_]")
	ctrlRe = regexp.MustCompile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
)

// Clean removes terminal control sequences and carriage returns, leaving the text a
// person sees, one line per line.
func Clean(s string) string {
	s = oscRe.ReplaceAllString(s, "")
	s = csiRe.ReplaceAllString(s, "")
	s = escRe.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	// A lone CR returns to the line start: keep what was written last.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = ctrlRe.ReplaceAllString(strings.TrimRight(l, "\r"), "")
	}
	return strings.Join(lines, "\n")
}
