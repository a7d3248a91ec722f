package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/server/auth"
	"github.com/commlab/commlab/server/store"
)

func newUserCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "List accounts and change their roles (learner, instructor, admin)",
	}
	open := func(cmd *cobra.Command) (store.DB, error) { return g.openStore(cmd.Context()) }
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every account with its role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			users, err := st.ListUsers(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tEMAIL\tNAME\tROLE\tCREATED")
			for _, u := range users {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", u.ID, u.Email, u.Name, u.Role, u.CreatedAt.Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "role EMAIL ROLE",
		Short: "Set an account's role (learner, instructor or admin) and end its sessions",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			role := store.Role(args[1])
			if !role.Valid() {
				return fmt.Errorf("role %q: want learner, instructor or admin", args[1])
			}
			email, err := auth.NormalizeEmail(args[0])
			if err != nil {
				return err
			}
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := cmd.Context()
			u, err := st.UserByEmail(ctx, email)
			if err != nil {
				return fmt.Errorf("account %s: %w", email, err)
			}
			if err := st.SetRole(ctx, u.ID, role); err != nil {
				return err
			}
			// Log the account out everywhere, so nothing started under the old role lingers.
			if _, err := st.DeleteUserSessions(ctx, u.ID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is now %s\n", email, role)
			return nil
		},
	})
	return cmd
}
