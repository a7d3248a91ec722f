package injector

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/labs/cgroup"
)

// Sentinel errors; test them with errors.Is.
var (
	// ErrInvalid marks bad input: an unknown kind, a parameter out of range, a bad name.
	// Nothing was applied and nothing was journaled.
	ErrInvalid = errors.New("invalid fault")
	// ErrUnsupported marks a fault this host cannot apply (e.g. corrupt via=netem without sch_netem).
	ErrUnsupported = errors.New("not supported on this host")
	// ErrHardwareOff marks a hardware kind applied without Options.AllowHardware.
	ErrHardwareOff = errors.New("hardware faults are off")
	// ErrNotFound marks an unknown fault id or an object missing from the target.
	ErrNotFound = errors.New("not found")
	// ErrConflict marks a fault that would touch what an active fault already owns.
	ErrConflict = errors.New("conflicts with an active fault")
)

var (
	reIfName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)
	reFaultID = regexp.MustCompile(`^f[0-9a-f]{8}$`)
	reFile    = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
)

// invalid returns an ErrInvalid error naming what and where.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func checkName(what, v string, re *regexp.Regexp, want string) error {
	if !re.MatchString(v) {
		return invalid("%s %q: want %s", what, v, want)
	}
	return nil
}

// ValidSandbox checks a sandbox id by the one rule labs/netns creates them with.
func ValidSandbox(s string) error { return hostRule(host.ValidID(s)) }

// ValidNode checks a node name by the one rule topologies are checked with.
func ValidNode(s string) error { return hostRule(host.ValidNode(s)) }

// hostRule marks a naming error from internal/host as bad input.
func hostRule(err error) error {
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// ValidNIC checks an interface name (syntax only; Apply also checks it exists in the target).
func ValidNIC(s string) error {
	if s == "lo" {
		return invalid("nic %q: the loopback device is not a NIC", s)
	}
	return checkName("nic", s, reIfName, "an interface name of 1-15 letters, digits, '_', '.', '-'")
}

// ValidFaultID checks a fault id as printed by Apply (f + 8 hex digits).
func ValidFaultID(s string) error {
	return checkName("fault id", s, reFaultID, "f followed by 8 hex digits, as printed by inject")
}

func validNetNS(s string) error { return hostRule(host.ValidOwnedNetNS(s)) }

func validFile(what, s string) error {
	if strings.Contains(s, "..") {
		return invalid("%s %q: '..' is not allowed", what, s)
	}
	return checkName(what, s, reFile, "lowercase letters, digits, '_', '.', '-' (at most 64)")
}

// validCgroup checks a cgroup path relative to a hierarchy root: it must lie under commlab/.
func validCgroup(p string) error { return hostRule(cgroup.CheckPath(p)) }
