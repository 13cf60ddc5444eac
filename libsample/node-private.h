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

/* The same for one term at *pos that need not end the buffer: 0 and *pos
 * past it, or -EBADMSG. */
int
node_term_skip(const char *buf, size_t len, size_t *pos);

/*
 * Recognise a reply to one of our requests: 1 (reply filled), 0 (a
 * well-formed message that is not ours), -EBADMSG (malformed). Every
 * message is checked (node_term_check) except the result of a request
 * sent unchecked, which is left to its decoder (reply->checked false).
 */
int
node_parse_reply(const char *buf, size_t len, struct fp_reply *reply);

/* 0 if the result of @reply is checked or passes the check now. Every
 * decoder that hands a reply to ei calls this first. */
int
node_reply_check(const struct fp_reply *reply);
