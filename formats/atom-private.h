/*
 * flame_profd — what the writer and the reader share about Erlang atoms.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Is word[0..len) an Erlang reserved word (so written quoted)? */
bool
fp_atom_is_reserved(const char *word, size_t len);
