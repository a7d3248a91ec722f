package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/commlab/commlab/injector"
)

// Config is the `cluster` section of the server's configuration file.
type Config struct {
	// Partition, Account, QoS and Reservation go to sbatch as given; empty ones
	// are left to the site's defaults. An instructor's reservation (scontrol
	// create reservation) makes a workshop's labs start at once.
	Partition   string `yaml:"partition"`
	Account     string `yaml:"account"`
	QoS         string `yaml:"qos"`
	Reservation string `yaml:"reservation"`
	// GRES is the GPU GRES name (default "gpu": --gres=gpu:N).
	GRES string `yaml:"gres"`
	// LabNICs are the node NICs that carry labs' traffic between Slurm nodes:
	// each lab node's NICs are macvlan children of them (the topology's switch
	// k on LabNICs[k mod len]), in the job's namespaces; the NICs themselves
	// are never configured. Without them a lab's nodes are not linked, and a
	// workload across nodes is refused.
	LabNICs []string `yaml:"lab_nics"`
	// AgentURL is where agents on the compute nodes reach the server's /agent
	// websocket, e.g. wss://login1:8443/agent.
	AgentURL string `yaml:"agent_url"`
	// TLS, with agent_url wss://..., serves the agents' link over TLS. A
	// wss:// agent_url without it is a TLS proxy's, trusted by the nodes'
	// system roots.
	TLS *TLSConfig `yaml:"tls"`
	// AgentListen is the address the server listens on for agents (default:
	// agent_url's port on every address).
	AgentListen string `yaml:"agent_listen"`
	// Agent is the commlab binary's path on the compute nodes (default: the
	// server's own path, for a shared file system).
	Agent string `yaml:"agent"`
	// Grace is added to a lab's TTL for the job's time limit (default 2 min), so
	// that the server ends the lab before Slurm kills it.
	Grace time.Duration `yaml:"grace"`
}

// LoadConfig reads the `cluster` section of a YAML file; a file without one
// gives a nil Config (the local backend).
func LoadConfig(file string) (*Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	// Other sections belong to others; inside this one an unknown key is a typo.
	path, err := yaml.PathString("$.cluster")
	if err != nil {
		return nil, err
	}
	node, err := path.ReadNode(bytes.NewReader(b))
	if errors.Is(err, yaml.ErrNotFoundNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s", file, yaml.FormatError(err, false, true))
	}
	var c Config
	if err := yaml.NodeToValue(node, &c, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%s: cluster: %s", file, yaml.FormatError(err, false, true))
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: cluster: %w", file, err)
	}
	return &c, nil
}

// Listen is where the server listens for agents: agent_listen, or agent_url's
// port on every address.
func (c *Config) Listen() string {
	if c.AgentListen != "" {
		return c.AgentListen
	}
	u, _ := url.Parse(c.AgentURL) // Validate has parsed it
	return ":" + u.Port()
}

// slurmName is what sbatch accepts for partition, account, QoS and reservation
// names here; anything else would be parsed as more options.
var slurmName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Validate checks names that reach sbatch and the agent URL.
func (c *Config) Validate() error {
	for _, f := range []struct{ key, val string }{
		{"partition", c.Partition}, {"account", c.Account}, {"qos", c.QoS}, {"reservation", c.Reservation}, {"gres", c.GRES},
	} {
		if f.val != "" && !slurmName.MatchString(f.val) {
			return fmt.Errorf("%s %q: want letters, digits, '_', '.' or '-'", f.key, f.val)
		}
	}
	for i, nic := range c.LabNICs {
		if injector.ValidNIC(nic) != nil {
			return fmt.Errorf("lab_nics: %q: want an interface name of 1-15 letters, digits, '_', '.' or '-', not lo", nic)
		}
		if slices.Contains(c.LabNICs[:i], nic) {
			return fmt.Errorf("lab_nics: %s listed twice", nic)
		}
	}
	if c.AgentURL == "" {
		return fmt.Errorf("agent_url is required (where compute nodes reach this server's /agent, e.g. ws://login1:8080/agent)")
	}
	u, err := url.Parse(c.AgentURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("agent_url %q: want ws://HOST:PORT/PATH or wss://...", c.AgentURL)
	}
	if u.Scheme == "ws" && c.TLS != nil {
		return fmt.Errorf("tls is set: agent_url %q must be wss://", c.AgentURL)
	}
	if c.AgentListen == "" && u.Port() == "" {
		return fmt.Errorf("agent_url %q has no port: give one, or agent_listen", c.AgentURL)
	}
	if c.Grace < 0 {
		return fmt.Errorf("grace %s: want 0 or more", c.Grace)
	}
	return nil
}
