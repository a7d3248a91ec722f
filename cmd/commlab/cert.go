package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/cert"
)

// certKeyFile is the certificate signing key in the data directory.
const certKeyFile = "cert.key"

func loadCertKey(g *globals) (ed25519.PrivateKey, error) {
	return cert.LoadOrCreateKey(filepath.Join(g.dataDir, certKeyFile))
}

func newCertCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Verify, list and revoke exam certificates"}

	var keyFile, revFile string
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Verify a certificate document offline with the issuer's public key",
		Long: `verify checks FILE (the JSON document from /verify/<id>/certificate.json) against
the issuer's public key (/cert/key.pem) and, with --revocations, the issuer's signed
revocation list (/cert/revocations.json). It needs no network. It prints the
certificate and exits 0 only if the document is unaltered, signed by that key and
not revoked; otherwise it says why and exits 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return errors.New("--key: the issuer's public key (PEM, from /cert/key.pem) is required")
			}
			b, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			pub, err := cert.ParsePublicKeyPEM(b)
			if err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			var revoked *cert.Revocations
			if revFile != "" {
				rb, err := os.ReadFile(revFile)
				if err != nil {
					return err
				}
				if revoked, err = cert.ParseRevocations(rb, pub); err != nil {
					return fmt.Errorf("%s: %w", revFile, err)
				}
			}
			doc, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c, err := cert.Verify(doc, pub, revoked)
			if err != nil {
				return fmt.Errorf("%s: NOT VALID: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: valid, signed by ed25519 key %s", args[0], cert.KeyID(pub))
			if revoked == nil {
				fmt.Fprint(out, " (revocation not checked: pass --revocations)")
			} else {
				fmt.Fprintf(out, ", not revoked as of %s", revoked.Issued)
			}
			fmt.Fprintf(out, "\nid:     %s\nname:   %s\nexam:   %s (%s)\nissued: %s\nband:   %s\n", c.ID, c.Name, c.Exam, c.ExamID, c.Issued, c.Band)
			return nil
		},
	}
	verify.Flags().StringVar(&keyFile, "key", "", "issuer's public key, PEM (from /cert/key.pem)")
	verify.Flags().StringVar(&revFile, "revocations", "", "issuer's signed revocation list (from /cert/revocations.json)")

	key := &cobra.Command{
		Use:   "key",
		Short: "Print this installation's public certificate key (PEM), creating the key pair on first use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := loadCertKey(g)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(cert.PublicKeyPEM(k.Public().(ed25519.PublicKey)))
			return err
		},
	}

	var reason string
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a certificate issued by this installation, with a reason",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.RevokeCertificate(cmd.Context(), args[0], 0, reason); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s: %s\n", args[0], reason)
			return nil
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why (kept and shown on every verification)")
	cmd.AddCommand(verify, key, revoke)
	return cmd
}
