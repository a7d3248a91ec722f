package labs

import (
	"fmt"
	"path/filepath"
)

// What a learner's shell on a lab node reads at start-up, the same on every
// backend: the env-force fault hides variables in the node's profile.d, and
// the learner finds them where a login shell on a cluster node does.

// LearnerProfile is the learner's ~/.bash_profile on a lab node: a login shell
// reads it after /etc/profile. It restores the sbin directories (Debian's
// profile drops them for non-root users, but ip, tc and ethtool live there)
// and names the node in the prompt (the hostname is the node's name).
const LearnerProfile = `# commlab learner profile
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PS1='learner@\h:\w\$ '
[ -r ~/.bashrc ] && . ~/.bashrc
`

// ShellRC is the rc file (bash --rcfile) of a learner's interactive shell on
// a lab node: what a login shell reads, /etc/profile (which sources the
// node's profile.d, see [ProfileD]) and [LearnerProfile], then rc.
func ShellRC(rc string) string {
	return "# commlab shell rc\n[ -r /etc/profile ] && . /etc/profile\n" + LearnerProfile + "\n" + rc + "\n"
}

// OnPath is rc code that puts dir (commlab's: commlab bench in a node shell)
// on the shell's PATH, after the profile's.
func OnPath(dir string) string { return fmt.Sprintf("export PATH=\"$PATH:%s\"\n", dir) }

// ProfileD is where a lab node's profile scripts are and where its learner
// sees them, read-only: the profile.d of the node's etc directory
// (injector.Target.NodeEtc, where env-force writes), over /etc/profile.d.
func ProfileD(nodeEtc string) [2]string {
	return [2]string{filepath.Join(nodeEtc, "profile.d"), "/etc/profile.d"}
}
