package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// usageError is a mistake on the command line (an unknown command or
// flag, a bad flag value cobra rejects, a missing argument or required
// flag): its message is followed by the command's usage line and where
// its help is, not by the whole help.
type usageError struct {
	err error
	cmd *cobra.Command
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%v\nUsage: %s\nRun '%s --help' for the flags and examples.", e.err, e.cmd.UseLine(), e.cmd.CommandPath())
}

func (e *usageError) Unwrap() error { return e.err }

// usageErr gives err (nil: none) cmd's usage hint, once.
func usageErr(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return err
	}
	return &usageError{err: err, cmd: cmd}
}

// unknownCommand is the root command's Args: it takes no arguments, so a
// word that is not a command is a mistyped one, answered with the
// commands it is close to ("train valdiate": did you mean "validate"?).
// cobra suggests only when Args is nil, which would let the root accept
// anything.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if !cmd.DisableSuggestions {
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			q := make([]string, len(s))
			for i, n := range s {
				q[i] = fmt.Sprintf("%q", n)
			}
			msg += "; did you mean " + strings.Join(q, " or ") + "?"
		}
	}
	return errors.New(msg)
}

// withUsageHints makes every command of the tree under root answer a
// usage mistake with usageErr's hint: flag parsing errors (through the
// flag error function the subcommands inherit), argument errors (each
// command's Args, wrapped) and missing required flags (checked in PreRunE,
// which runs before cobra's own check).
func withUsageHints(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr(c, err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error { return usageErr(cmd, args(cmd, a)) }
		}
		if c.PreRunE == nil && c.PreRun == nil {
			c.PreRunE = func(cmd *cobra.Command, _ []string) error { return usageErr(cmd, cmd.ValidateRequiredFlags()) }
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
