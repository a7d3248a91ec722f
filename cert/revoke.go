package cert

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
)

// Revocation withdraws one certificate.
type Revocation struct {
	ID     string `json:"id"`
	At     string `json:"at"` // RFC 3339, UTC
	Reason string `json:"reason"`
}

// Revocations is the signed list of every revoked certificate, published so
// that offline verification refuses them too.
type Revocations struct {
	Issued  string       `json:"issued"` // RFC 3339, UTC: the list is complete as of then
	Revoked []Revocation `json:"revoked"`
}

type revocationDoc struct {
	List      Revocations `json:"list"`
	Key       string      `json:"key"`
	Signature string      `json:"signature"`
}

// Find returns the revocation of id; a nil list revokes nothing.
func (l *Revocations) Find(id string) (Revocation, bool) {
	if l == nil {
		return Revocation{}, false
	}
	for _, r := range l.Revoked {
		if r.ID == id {
			return r, true
		}
	}
	return Revocation{}, false
}

// SignRevocations signs the list.
func SignRevocations(key ed25519.PrivateKey, l Revocations) []byte {
	if l.Revoked == nil {
		l.Revoked = []Revocation{}
	}
	pub := key.Public().(ed25519.PublicKey)
	d := revocationDoc{List: l, Key: KeyID(pub), Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, canonical(l)))}
	return append(canonical(d), '\n')
}

// ParseRevocations verifies a signed revocation list against pub.
func ParseRevocations(doc []byte, pub ed25519.PublicKey) (*Revocations, error) {
	var d revocationDoc
	if err := strictDecode(doc, &d); err != nil {
		return nil, fmt.Errorf("revocation list: %w", err)
	}
	if d.Key != KeyID(pub) {
		return nil, fmt.Errorf("revocation list: %w", ErrWrongKey)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(d.Signature)
	if err != nil || !ed25519.Verify(pub, canonical(d.List), sig) {
		return nil, fmt.Errorf("revocation list: %w", ErrBadSignature)
	}
	return &d.List, nil
}
