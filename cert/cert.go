// Package cert issues and verifies commlab certificates: small JSON documents
// signed with the installation's ed25519 key. A document verifies only in its
// exact canonical form, so changing any byte of it (even white space) makes it
// fail, and a signed revocation list lets a verifier without network access
// refuse revoked certificates too.
package cert

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Why a certificate fails verification. Every failure wraps exactly one of
// these, so callers can say the reason with errors.Is.
var (
	ErrMalformed    = errors.New("not a commlab certificate document")
	ErrNotCanonical = errors.New("document was altered: it is not in the form it was signed in")
	ErrWrongKey     = errors.New("signed with a different key than the one given")
	ErrBadSignature = errors.New("signature does not match the contents: the certificate was altered")
	ErrRevoked      = errors.New("certificate was revoked")
	ErrUnknown      = errors.New("no certificate with this id was issued here")
)

// Certificate is what a certificate states. Field order is the signed order.
type Certificate struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	ExamID string `json:"exam_id"`
	Exam   string `json:"exam"`
	Issued string `json:"issued"` // date, YYYY-MM-DD in UTC
	Band   string `json:"band"`   // score band, e.g. pass, merit, distinction
}

// Document is a signed certificate as it is stored, served and verified.
type Document struct {
	Certificate Certificate `json:"certificate"`
	Key         string      `json:"key"`       // KeyID of the signing key
	Signature   string      `json:"signature"` // base64 ed25519 signature of Certificate's canonical JSON
}

var idPattern = regexp.MustCompile(`^CL(-[A-Z2-7]{4}){4}$`)

// NewID returns a fresh certificate id, CL-XXXX-XXXX-XXXX-XXXX (80 random bits,
// base32, so it can be read out and typed).
func NewID() string {
	b := make([]byte, 10)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	s := base32.StdEncoding.EncodeToString(b)
	return "CL-" + s[0:4] + "-" + s[4:8] + "-" + s[8:12] + "-" + s[12:16]
}

// ValidID reports whether id has the form NewID gives.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Date is the form of Certificate.Issued.
func Date(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// KeyID names a public key: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:8])
}

func (c Certificate) check() error {
	switch {
	case !ValidID(c.ID):
		return fmt.Errorf("id %q: want CL-XXXX-XXXX-XXXX-XXXX", c.ID)
	case strings.TrimSpace(c.Name) == "":
		return errors.New("empty name")
	case c.ExamID == "" || c.Exam == "":
		return errors.New("no exam")
	case c.Band == "":
		return errors.New("no score band")
	}
	if _, err := time.Parse(time.DateOnly, c.Issued); err != nil {
		return fmt.Errorf("issued %q: want YYYY-MM-DD", c.Issued)
	}
	return nil
}

// canonical is the one encoding that is signed and that a document must have.
func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only strings inside
	}
	return b
}

// Sign signs c with key and returns the document, newline-terminated.
func Sign(key ed25519.PrivateKey, c Certificate) ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	d := Document{Certificate: c, Key: KeyID(pub), Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, canonical(c)))}
	return append(canonical(d), '\n'), nil
}

// Parse decodes a document and checks that it is in canonical form, without
// checking the signature.
func Parse(doc []byte) (*Document, error) {
	var d Document
	if err := strictDecode(doc, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// strictDecode decodes doc into v and requires doc to be v's canonical
// encoding (one trailing newline allowed), so no byte of it can change unseen.
func strictDecode(doc []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !bytes.Equal(bytes.TrimSuffix(doc, []byte("\n")), canonical(v)) {
		return ErrNotCanonical
	}
	return nil
}

// Verify checks doc against the public key and the revocation list (nil when
// there is none) and returns the certificate it states.
func Verify(doc []byte, pub ed25519.PublicKey, revoked *Revocations) (*Certificate, error) {
	d, err := Parse(doc)
	if err != nil {
		return nil, err
	}
	if d.Key != KeyID(pub) {
		return nil, fmt.Errorf("%w (document names key %s, the key given is %s)", ErrWrongKey, d.Key, KeyID(pub))
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(d.Signature)
	if err != nil || !ed25519.Verify(pub, canonical(d.Certificate), sig) {
		return nil, ErrBadSignature
	}
	if err := d.Certificate.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if r, ok := revoked.Find(d.Certificate.ID); ok {
		return &d.Certificate, fmt.Errorf("%w on %s: %s", ErrRevoked, r.At, r.Reason)
	}
	return &d.Certificate, nil
}
