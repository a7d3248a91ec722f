package main

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/cert"
)

// commlab cert verify: offline, with the public key and the revocation list.
func TestCertVerifyOffline(t *testing.T) {
	data := t.TempDir()
	pemOut, err := run(t, "--data", data, "cert", "key")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(data, certKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	key, err := cert.LoadOrCreateKey(filepath.Join(data, certKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyPath := write("key.pem", []byte(pemOut))
	c := cert.Certificate{ID: cert.NewID(), Name: "王五", ExamID: "m12", Exam: "commlab 认证", Issued: cert.Date(time.Now()), Band: "pass"}
	doc, err := cert.Sign(key, c)
	if err != nil {
		t.Fatal(err)
	}
	good := write("good.json", doc)
	flipped := bytes.Clone(doc)
	flipped[len(flipped)/2] ^= 1
	bad := write("bad.json", flipped)
	none := write("none.json", cert.SignRevocations(key, cert.Revocations{Issued: "2026-12-03T19:00:00Z"}))
	rev := write("rev.json", cert.SignRevocations(key, cert.Revocations{Issued: "2026-12-03T19:00:00Z", Revoked: []cert.Revocation{{ID: c.ID, At: "2026-12-03T18:00:00Z", Reason: "voided"}}}))
	other, _, _ := ed25519.GenerateKey(nil)
	otherKey := write("other.pem", cert.PublicKeyPEM(other))

	tests := []struct {
		name string
		args []string
		want string // in the output or the error
		ok   bool
	}{
		{"valid", []string{good, "--key", keyPath, "--revocations", none}, "valid, signed by ed25519 key " + cert.KeyID(key.Public().(ed25519.PublicKey)), true},
		{"valid, revocation unchecked", []string{good, "--key", keyPath}, "revocation not checked", true},
		{"one byte changed", []string{bad, "--key", keyPath}, "NOT VALID", false},
		{"revoked", []string{good, "--key", keyPath, "--revocations", rev}, "revoked on 2026-12-03T18:00:00Z: voided", false},
		{"other key", []string{good, "--key", otherKey}, "different key", false},
		{"no key", []string{good}, "--key", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, append([]string{"cert", "verify"}, tt.args...)...)
			got := out
			if err != nil {
				got += err.Error()
			}
			if (err == nil) != tt.ok || !strings.Contains(got, tt.want) {
				t.Errorf("err %v, output %q; want ok=%v and %q", err, out, tt.ok, tt.want)
			}
		})
	}
}
