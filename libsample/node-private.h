/*
 * flame_profd — internals shared by the libsample files that talk to ei.
 */
#pragma once

#include <ei.h>

#include "fp/node.h"

/* Send an rpc of mod:fun(args...) with args an encoded list. */
int
node_rpc_send(struct fp_node *node, const char *mod, const char *fun,
	      const ei_x_buff *args, uint64_t *id);

/* Decode a pid sent by the node into its local numbers. */
int
node_decode_pid(const char *buf, int *index, struct fp_pid *pid);

/* Decode an atom as UTF-8 into dst (at least MAXATOMLEN_UTF8 bytes). */
int
node_decode_atom(const char *buf, int *index, char *dst);

/* Skip any term. */
int
node_skip_term(const char *buf, int *index);

/* Decode an integer term (small, int or fitting bignum) into *value. */
int
node_decode_int(const char *buf, int *index, int64_t *value);

/*
 * Walk the term at buf[start..len) without trusting its lengths: 0 if it
 * is one well-formed term that ends exactly at len (funs, compressed
 * terms and nesting deeper than 256 are refused), -EBADMSG otherwise.
 */
int
node_term_check(const char *buf, size_t len, size_t start);

/* Recognise a reply to one of our requests in a checked message. */
int
node_parse_reply(const char *buf, struct fp_reply *reply);
