package auth

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on identity fields.
const (
	MaxEmailLen = 254 // bytes; RFC 5321's limit on a forward path
	MaxLocalLen = 64  // bytes before the @, RFC 5321
	MaxNameLen  = 64  // display-name characters (runes)
)

// NormalizeEmail validates a bare email address and returns it trimmed and
// lower-cased, the form accounts are stored and compared in. Display names
// ("Ada <ada@example.org>") and comments are refused: the field must hold
// just the address. Errors are meant for the user.
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("email address is empty")
	}
	if len(s) > MaxEmailLen {
		return "", fmt.Errorf("email address is too long: %d characters, at most %d", len(s), MaxEmailLen)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return "", fmt.Errorf("%q is not an email address like name@example.org", s)
	}
	at := strings.LastIndexByte(s, '@')
	if at > MaxLocalLen {
		return "", fmt.Errorf("email address %q: the part before @ is %d characters, at most %d", s, at, MaxLocalLen)
	}
	if domain := s[at+1:]; strings.HasPrefix(domain, "[") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
		return "", fmt.Errorf("email address %q: domain %q is not a host name", s, domain)
	}
	return strings.ToLower(s), nil
}

// ValidateName checks a display name and returns it trimmed: 1 to 64
// characters, valid UTF-8, no control characters and no bidirectional
// overrides (which can make a name render as someone else's). Errors are
// meant for the user.
func ValidateName(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errors.New("name is not valid UTF-8 text")
	}
	s = strings.TrimSpace(s)
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0:
		return "", errors.New("name is empty")
	case n > MaxNameLen:
		return "", fmt.Errorf("name is too long: %d characters, at most %d", n, MaxNameLen)
	}
	for i, r := range s {
		if unicode.IsControl(r) || isBidiControl(r) {
			return "", fmt.Errorf("name contains a control character (%U) at byte %d", r, i)
		}
	}
	return s, nil
}

// isBidiControl reports the explicit directional formatting characters of
// Unicode's bidi algorithm (embeddings, overrides, isolates).
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}
