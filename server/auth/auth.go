// Package auth holds commlab's account security: argon2id password hashing
// and policy, email and display-name validation, CSRF tokens and their gin
// middleware, a per-client login rate limiter, and the server's secret key
// file. It keeps no state of its own beyond what callers hand it; accounts and
// sessions live in package store.
package auth
