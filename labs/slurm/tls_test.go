package slurm

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a self-signed CA made for one test, its PEM in File.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, File: filepath.Join(t.TempDir(), name+".pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// server issues a certificate for 127.0.0.1 and returns its cert and key files.
func (ca *testCA) server(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "login1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "agent.crt"), filepath.Join(dir, "agent.key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAgentTLS: an agent reaches a TLS agent listener when it trusts the CA
// that signed the server's certificate, or the certificate's pinned
// fingerprint; a wrong CA, a wrong pin or no trust at all is refused with an
// error that says which.
func TestAgentTLS(t *testing.T) {
	ca, other := newTestCA(t, "commlab-test-ca"), newTestCA(t, "someone-else")
	certFile, keyFile := ca.server(t)
	conf, env, err := (&TLSConfig{Cert: certFile, Key: keyFile, CA: ca.File}).listener()
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != 1 || env[EnvCA] != ca.File {
		t.Fatalf("agent environment with a CA: %v", env)
	}
	_, pinned, err := (&TLSConfig{Cert: certFile, Key: keyFile}).listener()
	if err != nil {
		t.Fatal(err)
	}
	pin := pinned[EnvPin]
	if len(pinned) != 1 || len(pin) != 64 {
		t.Fatalf("agent environment without a CA: %v", pinned)
	}
	hub := NewHub(slog.New(slog.DiscardHandler))
	srv := httptest.NewUnstartedServer(hub)
	srv.TLS = conf
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/agent"

	wrongPin := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		env  map[string]string
		err  string // "" connects
	}{
		{"the CA", map[string]string{EnvCA: ca.File}, ""},
		{"the pinned certificate", map[string]string{EnvPin: pin}, ""},
		{"the pin with colons, upper case", map[string]string{EnvPin: colons(strings.ToUpper(pin))}, ""},
		{"another CA", map[string]string{EnvCA: other.File}, "the agent does not trust the server's certificate: it is not signed by the CA in " + EnvCA + "=" + other.File},
		{"another pin", map[string]string{EnvPin: wrongPin}, "is not the one pinned in " + EnvPin},
		{"the system's roots", nil, "not signed by a CA this node trusts (neither " + EnvCA + " nor " + EnvPin + " is set)"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lab := "tls" + string(rune('a'+i))
			tok, err := hub.Register(lab, []string{"node1"})
			if err != nil {
				t.Fatal(err)
			}
			defer hub.Forget(lab)
			e := map[string]string{EnvURL: url, EnvToken: tok, EnvLab: lab, EnvNodes: "node1", "SLURM_JOB_ID": "7", "SLURM_NODEID": "0"}
			for k, v := range tt.env {
				e[k] = v
			}
			a, err := AgentFromEnv(func(k string) string { return e[k] })
			if err != nil {
				t.Fatal(err)
			}
			a.Log = slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- a.serve(ctx) }()
			select {
			case <-waitConnected(ctx, hub, lab):
				if tt.err != "" {
					t.Fatalf("connected, want %q", tt.err)
				}
			case err := <-served:
				if tt.err == "" || err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("agent: %v, want %q", err, tt.err)
				}
				if !errors.Is(err, ErrUntrusted) {
					t.Errorf("error %q is not ErrUntrusted: the agent would redial forever", err)
				}
				if !strings.Contains(err.Error(), "dial "+url) {
					t.Errorf("error %q does not name the server", err)
				}
				t.Logf("refused: %v", err)
			case <-ctx.Done():
				t.Fatal("neither connected nor refused")
			}
		})
	}
}

func colons(hex string) string {
	var parts []string
	for i := 0; i < len(hex); i += 2 {
		parts = append(parts, hex[i:i+2])
	}
	return strings.Join(parts, ":")
}

// waitConnected is closed once node1 of lab is connected to hub.
func waitConnected(ctx context.Context, hub *Hub, lab string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for {
			changed := hub.Changed(lab)
			if _, ok := hub.Connected(lab)["node1"]; ok {
				close(done)
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return done
}

func TestAgentTLSEnv(t *testing.T) {
	ca := newTestCA(t, "ca")
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ ca, pin, err string }{
		{ca.File, strings.Repeat("0", 64), "give one"},
		{"/nonexistent/ca.pem", "", EnvCA + ": open /nonexistent/ca.pem"},
		{empty, "", "no PEM certificate"},
		{"", "abcd", "want the server certificate's SHA-256"},
		{"", "zz" + strings.Repeat("0", 62), "want the server certificate's SHA-256"},
	}
	for _, tt := range tests {
		if _, err := agentTLS(tt.ca, tt.pin); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("agentTLS(%q, %q) = %v, want %q", tt.ca, tt.pin, err, tt.err)
		}
	}
	for _, tt := range []struct {
		c   TLSConfig
		err string
	}{
		{TLSConfig{Cert: "/nonexistent.crt", Key: "/nonexistent.key"}, "/nonexistent.crt"},
		{TLSConfig{Cert: "/etc/commlab/agent.crt", CA: ca.File}, "give cert and key"},
		{TLSConfig{}, "give cert and key"},
	} {
		if _, _, err := tt.c.listener(); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("listener for %+v: %v, want %q", tt.c, err, tt.err)
		}
	}
	// A proxy terminates TLS: the server listens in the clear, the agents get the CA.
	if conf, env, err := (&TLSConfig{CA: ca.File}).listener(); err != nil || conf != nil || env[EnvCA] != ca.File {
		t.Errorf("listener for a proxy's CA: %v, %v, %v", conf, env, err)
	}
}
