package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// CSRF token layout: "v1.<key id>.<nonce>.<mac>", all base64url.
// The version names the scheme; the key id (a hash prefix of the key) says
// which key signed, so after a rotation the previous key can still verify
// tokens in pages rendered before it. The random nonce makes every token
// different, which defeats compression side channels (BREACH) on pages that
// embed it; mac = HMAC-SHA256(key, label | nonce | session ID).
const (
	csrfVersion  = "v1"
	csrfLabel    = "commlab csrf v1\x00"
	csrfNonceLen = 16
	csrfKeyIDLen = 4
	// MinKeyLen is the shortest key NewCSRF accepts.
	MinKeyLen = 32
)

// CSRFHeader and CSRFField are where the middleware looks for the token.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf_token"
	// CSRFContextKey is the gin context key under which the middleware
	// leaves a fresh token for templates to embed.
	CSRFContextKey = "csrf_token"
)

// CSRFMessage is the error a rejected request gets.
const CSRFMessage = "CSRF token missing or invalid: reload the page"

// CSRF makes and checks synchronizer tokens bound to a session (or, before
// login, an anonymous ID kept in a cookie).
type CSRF struct {
	key      []byte
	keyID    string
	previous map[string][]byte // key ID -> retired key, still accepted
}

// NewCSRF returns a CSRF signer for key (at least MinKeyLen bytes, e.g. from
// LoadOrCreateKey). Tokens made with any of the previous keys stay valid,
// so keys can rotate without logging everyone's forms out.
func NewCSRF(key []byte, previous ...[]byte) (*CSRF, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("csrf key is %d bytes, want at least %d", len(key), MinKeyLen)
	}
	c := &CSRF{key: append([]byte(nil), key...), keyID: keyID(key), previous: map[string][]byte{}}
	for i, k := range previous {
		if len(k) < MinKeyLen {
			return nil, fmt.Errorf("previous csrf key %d is %d bytes, want at least %d", i, len(k), MinKeyLen)
		}
		if id := keyID(k); id != c.keyID {
			c.previous[id] = append([]byte(nil), k...)
		}
	}
	return c, nil
}

func keyID(key []byte) string {
	h := sha256.Sum256(append([]byte("commlab csrf key id\x00"), key...))
	return base64.RawURLEncoding.EncodeToString(h[:csrfKeyIDLen])
}

func csrfMAC(key, nonce []byte, sessionID string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(csrfLabel))
	m.Write(nonce)
	m.Write([]byte(sessionID))
	return m.Sum(nil)
}

// Token returns a new token for sessionID. Each call gives a different
// token; all of them stay valid for that session.
func (c *CSRF) Token(sessionID string) string {
	nonce := make([]byte, csrfNonceLen)
	rand.Read(nonce) // never fails (crypto/rand, Go 1.24+)
	b64 := base64.RawURLEncoding
	return csrfVersion + "." + c.keyID + "." + b64.EncodeToString(nonce) + "." + b64.EncodeToString(csrfMAC(c.key, nonce, sessionID))
}

// Valid reports whether token was made by Token for sessionID with the
// current or a previous key. An empty session ID is never valid: it would
// let one visitor's token work for every other visitor without a session.
func (c *CSRF) Valid(sessionID, token string) bool {
	if sessionID == "" {
		return false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != csrfVersion {
		return false
	}
	key := c.key
	if parts[1] != c.keyID {
		if key = c.previous[parts[1]]; key == nil {
			return false
		}
	}
	b64 := base64.RawURLEncoding.Strict()
	nonce, err := b64.DecodeString(parts[2])
	if err != nil || len(nonce) != csrfNonceLen {
		return false
	}
	mac, err := b64.DecodeString(parts[3])
	if err != nil {
		return false
	}
	return hmac.Equal(mac, csrfMAC(key, nonce, sessionID))
}

// errCSRF is what the middleware attaches to the gin context on rejection.
var errCSRF = errors.New(CSRFMessage)

// Middleware rejects POST, PUT, PATCH and DELETE requests whose X-CSRF-Token
// header or csrf_token form field does not hold a valid token for the
// session that sessionID returns, with 403 and CSRFMessage (JSON when the
// client asked for JSON or sent it). Every request, safe or not, that gets
// through finds a fresh token under CSRFContextKey for forms to embed.
func (c *CSRF) Middleware(sessionID func(*gin.Context) string) gin.HandlerFunc {
	return func(g *gin.Context) {
		sid := sessionID(g)
		switch g.Request.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			tok := g.GetHeader(CSRFHeader)
			if tok == "" {
				tok = g.PostForm(CSRFField)
			}
			if !c.Valid(sid, tok) {
				_ = g.Error(errCSRF)
				if wantsJSON(g) {
					g.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": CSRFMessage})
				} else {
					g.Data(http.StatusForbidden, "text/plain; charset=utf-8", []byte(CSRFMessage+"\n"))
					g.Abort()
				}
				return
			}
		}
		if sid != "" {
			g.Set(CSRFContextKey, c.Token(sid))
		}
		g.Next()
	}
}

func wantsJSON(g *gin.Context) bool {
	return strings.Contains(g.GetHeader("Accept"), "application/json") ||
		strings.HasPrefix(g.ContentType(), "application/json")
}
