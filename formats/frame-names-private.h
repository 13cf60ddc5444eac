/*
 * flame_profd — frame names in their two written forms (docs/FORMAT.md,
 * "Frame names"), shared by the writer and the reader (private to
 * formats/).
 *
 * The Erlang form is module:function/arity with atoms quoted and escaped
 * as Erlang quotes them. The Elixir form, for modules named Elixir.Alias,
 * is what Elixir's Exception.format_mfa/3 prints (Alias.function/arity,
 * "anonymous fn/A in Alias.function/arity"), with the escapes every frame
 * name needs to stay one frame in Flamescope and the folded-stack tools.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util-buf.h"

/* Is word[0..len) an Erlang reserved word (so written quoted)? */
bool
fp_atom_is_reserved(const char *word, size_t len);

/* The Erlang form of an atom: bare, or quoted with \xHH escapes. */
void
fp_name_put_atom(struct fp_text *t, const char *atom, size_t len);

/*
 * A registered name: in the Elixir form (@elixir) an atom that names an
 * Elixir module is written as its alias (Elixir.Foo.Bar as Foo.Bar),
 * everything else as fp_name_put_atom() writes it.
 */
void
fp_name_put_process(struct fp_text *t, const char *atom, size_t len,
		    bool elixir);

/*
 * module:function/arity in the Erlang form, or with @elixir, for a module
 * named Elixir.Alias, in the Elixir form. Atoms are raw bytes (not
 * escaped), with their lengths.
 */
void
fp_name_put_mfa(struct fp_text *t, const char *module, size_t mlen,
		const char *function, size_t flen, uint64_t arity, bool elixir);

/* A written MFA as the scanner found it: spans of the written text. */
struct fp_name_mfa {
	bool elixir;		/* written in the Elixir form */
	const char *module;	/* Erlang: the atom as written; Elixir: the alias */
	size_t mlen;
	const char *function;	/* as written (bare or quoted); for an
				 * anonymous fn, its parent function */
	size_t flen;
	uint64_t arity;		/* for an anonymous fn: the parent's */
	bool anonymous;		/* Elixir form "anonymous fn/A in ..." */
	uint64_t fn_arity;	/* A */
};

/*
 * The end of the written atom (Erlang form) starting at @p, or NULL if
 * there is none there. Never reads at or past @end.
 */
const char *
fp_name_scan_atom(const char *p, const char *end);

/* The end of a written registered name (atom or alias), or NULL. */
const char *
fp_name_scan_process(const char *p, const char *end);

/* The end of a written MFA of either form (without :LINE), or NULL. */
const char *
fp_name_scan_mfa(const char *p, const char *end, struct fp_name_mfa *mfa);

/*
 * Whether the MFA scanned from a file must be rewritten to be in the
 * form asked for: an Elixir-form name for the Erlang form, an Erlang-form
 * name of a module Elixir.* for the Elixir form.
 */
bool
fp_name_mfa_other_form(const struct fp_name_mfa *mfa, bool elixir);

/* Append the scanned MFA in the form asked for. */
void
fp_name_convert_mfa(struct fp_text *t, const struct fp_name_mfa *mfa,
		    bool elixir);

/* Append the registered name written at [p, end) in the form asked for. */
void
fp_name_convert_process(struct fp_text *t, const char *p, const char *end,
			bool elixir);
