package cert

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func testKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	k, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "cert.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sample() Certificate {
	return Certificate{ID: NewID(), Name: "张三", ExamID: "m12", Exam: "commlab 认证：多卡通信故障诊断（模块 1–2）", Issued: Date(time.Now()), Band: "merit"}
}

func TestKeyCreatedOnceWithMode0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "cert.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode = %v, want 0600", st.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Error("second load gave a different key")
	}
	pub, err := ParsePublicKeyPEM(PublicKeyPEM(k1.Public().(ed25519.PublicKey)))
	if err != nil || !pub.Equal(k1.Public()) {
		t.Errorf("public key PEM round trip: %v", err)
	}
}

func TestVerify(t *testing.T) {
	key := testKey(t)
	pub := key.Public().(ed25519.PublicKey)
	other := testKey(t).Public().(ed25519.PublicKey)
	c := sample()
	doc, err := Sign(key, c)
	if err != nil {
		t.Fatal(err)
	}
	revoked := &Revocations{Revoked: []Revocation{{ID: c.ID, At: "2026-12-03T19:00:00Z", Reason: "exam voided: shared answers"}}}
	tests := []struct {
		name    string
		doc     []byte
		pub     ed25519.PublicKey
		revoked *Revocations
		want    error
	}{
		{"valid", doc, pub, nil, nil},
		{"valid without final newline", bytes.TrimSuffix(doc, []byte("\n")), pub, &Revocations{}, nil},
		{"revoked", doc, pub, revoked, ErrRevoked},
		{"other key", doc, other, nil, ErrWrongKey},
		{"name changed", bytes.Replace(doc, []byte("张三"), []byte("李四"), 1), pub, nil, ErrBadSignature},
		{"band changed", bytes.Replace(doc, []byte(`"merit"`), []byte(`"distinction"`), 1), pub, nil, ErrBadSignature},
		{"extra space", bytes.Replace(doc, []byte(`,"key"`), []byte(`, "key"`), 1), pub, nil, ErrNotCanonical},
		{"not json", []byte("hello"), pub, nil, ErrMalformed},
		{"unknown field", bytes.Replace(doc, []byte(`"key"`), []byte(`"x":1,"key"`), 1), pub, nil, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Verify(tt.doc, tt.pub, tt.revoked)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify error = %v, want %v", err, tt.want)
			}
			if err == nil && *got != c {
				t.Errorf("certificate = %+v, want %+v", *got, c)
			}
		})
	}
}

// Every single-byte change anywhere in a document must fail verification.
func TestEveryByteMatters(t *testing.T) {
	key := testKey(t)
	pub := key.Public().(ed25519.PublicKey)
	doc, err := Sign(key, sample())
	if err != nil {
		t.Fatal(err)
	}
	for i := range doc {
		for _, flip := range []byte{0x01, 0x20} {
			bad := bytes.Clone(doc)
			bad[i] ^= flip
			if _, err := Verify(bad, pub, nil); err == nil {
				t.Fatalf("byte %d (%q) xor %#x: verified", i, doc[i], flip)
			}
		}
	}
}

func TestSignRejectsIncomplete(t *testing.T) {
	key := testKey(t)
	for _, mut := range []func(*Certificate){
		func(c *Certificate) { c.ID = "x" },
		func(c *Certificate) { c.Name = " " },
		func(c *Certificate) { c.Issued = "03/12/2026" },
		func(c *Certificate) { c.Band = "" },
	} {
		c := sample()
		mut(&c)
		if _, err := Sign(key, c); err == nil {
			t.Errorf("Sign(%+v) succeeded", c)
		}
	}
}

func TestRevocations(t *testing.T) {
	key := testKey(t)
	pub := key.Public().(ed25519.PublicKey)
	l := Revocations{Issued: "2026-12-03T19:00:00Z", Revoked: []Revocation{{ID: NewID(), At: "2026-12-03T18:00:00Z", Reason: "voided"}}}
	doc := SignRevocations(key, l)
	got, err := ParseRevocations(doc, pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Find(l.Revoked[0].ID); !ok {
		t.Error("revoked id not found")
	}
	// Dropping an entry from the list breaks its signature.
	bad := bytes.Replace(doc, []byte(l.Revoked[0].ID), []byte(NewID()), 1)
	if _, err := ParseRevocations(bad, pub); !errors.Is(err, ErrBadSignature) {
		t.Errorf("altered list: err = %v, want ErrBadSignature", err)
	}
	if _, err := ParseRevocations(doc, testKey(t).Public().(ed25519.PublicKey)); !errors.Is(err, ErrWrongKey) {
		t.Errorf("other key: err = %v, want ErrWrongKey", err)
	}
}
