package slurm

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLSConfig is the `cluster.tls` section, with agent_url wss://...: the
// agents reach the server over TLS and verify its certificate against CA, or,
// without one, against the certificate's pinned SHA-256 fingerprint, handed to
// them in the job's environment (never in argv). With CA alone, a proxy in
// front of the agent listener terminates TLS.
type TLSConfig struct {
	// Cert and Key are the agent listener's PEM certificate (chain) and key,
	// read by the server.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// CA is a PEM file, readable at this path on the compute nodes, with the
	// CA that signed the server's certificate; the agents then check the
	// name in agent_url too.
	CA string `yaml:"ca"`
}

// Environment variables that tell the agent how to trust the server.
const (
	EnvCA  = "COMMLAB_AGENT_CA"  // a PEM CA file on the node
	EnvPin = "COMMLAB_AGENT_PIN" // the server certificate's SHA-256, hex
)

// listener loads the server's certificate and returns the agent listener's
// TLS configuration (nil where a proxy terminates TLS) and the environment
// that tells the agents how to verify the server.
func (t *TLSConfig) listener() (*tls.Config, map[string]string, error) {
	switch {
	case t.Cert == "" && t.Key == "" && t.CA != "":
		return nil, map[string]string{EnvCA: t.CA}, nil
	case t.Cert == "" || t.Key == "":
		return nil, nil, errors.New("tls: give cert and key (this server terminates TLS), or ca alone (a proxy in front of it does)")
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: cert %s, key %s: %w", t.Cert, t.Key, err)
	}
	env := map[string]string{EnvPin: Fingerprint(cert.Certificate[0])}
	if t.CA != "" {
		env = map[string]string{EnvCA: t.CA}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, env, nil
}

// Fingerprint is a certificate's SHA-256 in hex, as EnvPin wants it (what
// `openssl x509 -noout -fingerprint -sha256` prints, without the colons).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// agentTLS is the agent's client configuration from its environment: the CA
// file, or the pinned fingerprint; nil (the system's roots) with neither.
func agentTLS(ca, pin string) (*tls.Config, error) {
	switch {
	case ca != "" && pin != "":
		return nil, fmt.Errorf("%s and %s are both set: give one", EnvCA, EnvPin)
	case ca != "":
		b, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", EnvCA, ca)
		}
		return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
	case pin != "":
		want, err := hex.DecodeString(strings.ReplaceAll(pin, ":", ""))
		if err != nil || len(want) != sha256.Size {
			return nil, fmt.Errorf("%s %q: want the server certificate's SHA-256 in hex", EnvPin, pin)
		}
		return &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The pin replaces the chain and name checks: only that certificate passes.
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 {
					return errors.New("the server sent no certificate")
				}
				got := sha256.Sum256(raw[0])
				if subtle.ConstantTimeCompare(got[:], want) != 1 {
					return errPin{got}
				}
				return nil
			},
		}, nil
	}
	return nil, nil
}

// ErrUntrusted marks a dial that failed because the server's certificate did
// not pass the agent's checks: a misconfiguration that redialling cannot fix.
var ErrUntrusted = errors.New("the agent does not trust the server's certificate")

// errPin is a certificate that is not the pinned one.
type errPin struct{ got [sha256.Size]byte }

func (e errPin) Error() string {
	return fmt.Sprintf("its SHA-256 %x is not the one pinned in %s", e.got, EnvPin)
}

// dialError says what a certificate failure means for the agent's trust
// settings, marked ErrUntrusted; other errors pass unchanged.
func (a *Agent) dialError(err error) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var pin errPin
	switch {
	case errors.As(err, &unknown) && a.CA != "":
		return fmt.Errorf("%w: it is not signed by the CA in %s=%s: %w", ErrUntrusted, EnvCA, a.CA, err)
	case errors.As(err, &unknown) && a.TLS == nil:
		return fmt.Errorf("%w: it is not signed by a CA this node trusts (neither %s nor %s is set): %w", ErrUntrusted, EnvCA, EnvPin, err)
	case errors.As(err, &host):
		return fmt.Errorf("%w: it does not name the host of %s: %w", ErrUntrusted, EnvURL, err)
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &pin):
		return fmt.Errorf("%w: %w", ErrUntrusted, err)
	}
	return err
}
