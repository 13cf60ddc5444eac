/*
 * flame_profd — how samples are asked for: the request paths as peers.
 *
 * fp_node_set_request_path() picks one (fp/node.h): rex (request.c, every
 * sample an rpc), eval (path-eval.c, long-lived samplers erl_eval runs)
 * or helper (helper.c, the loaded module sampling on its own timer). The
 * connection calls the one in use through this interface only, so no
 * path calls back into the file that calls it. Every member but sample
 * may be NULL.
 */
#pragma once

#include <ei.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/node.h"

struct node_path {
	/* After the connect's probes: start what the path runs on the
	 * node. 0, -ENOEXEC when the node will not run it (the connect
	 * falls back to rex), or as node_call(). */
	int (*start)(struct fp_node *node, unsigned timeout_ms);
	/* At disconnect, before the socket closes: best effort, and nothing
	 * onto a stream a give-up cut (node->broken). Leaves the path's
	 * state as new. */
	void (*stop)(struct fp_node *node);
	/* An exit signal from @from: true when it ends the connection. */
	bool (*exited)(struct fp_node *node, const erlang_pid *from);
	/* A reply to @id arrived. */
	void (*replied)(struct fp_node *node, uint64_t id);
	/* fp_node_sample_request() */
	int (*sample)(struct fp_node *node, const struct fp_pid *pids,
		      const enum fp_ask *asks, size_t n, uint64_t *id);
};

extern const struct node_path node_path_rex;	/* request.c */
extern const struct node_path node_path_eval;	/* path-eval.c */
extern const struct node_path node_path_helper;	/* helper.c */

/* helper.c: the module's compiled code (helper-beam.c, generated) */
extern const unsigned char fp_helper_beam[];
extern const size_t fp_helper_beam_len;

/*
 * Rename module @from to @to (as long) in a .beam image, in place: the
 * module's atom, the first of the atom table. 0, or -EINVAL when the
 * image is no BEAM file or its module is not @from.
 */
int
node_beam_rename(unsigned char *beam, size_t len, const char *from,
		 const char *to);
