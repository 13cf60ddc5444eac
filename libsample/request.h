/*
 * flame_profd — what we ask the node, and the names its answers carry.
 *
 * Private to libsample. The items a sample asks process_info/2 for and
 * the dictionary keys it reads are named here once: request.c writes them
 * into requests, the sample decoder (sample.c) reads replies by them.
 */
#pragma once

#include <ei.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "fp/node.h"

/*
 * The process_info/2 items of a sample request, named once: the enum, the
 * table of names and the lookup below are all made from this list.
 */
#define NODE_ITEMS(X)							\
	X(STATUS, "status")						\
	X(REGISTERED_NAME, "registered_name")				\
	X(CURRENT_STACKTRACE, "current_stacktrace")			\
	X(REDUCTIONS, "reductions")					\
	X(MEMORY, "memory")						\
	X(MESSAGE_QUEUE_LEN, "message_queue_len")			\
	X(TOTAL_HEAP_SIZE, "total_heap_size")				\
	X(HEAP_SIZE, "heap_size")					\
	X(STACK_SIZE, "stack_size")					\
	X(GARBAGE_COLLECTION, "garbage_collection")			\
	X(GARBAGE_COLLECTION_INFO, "garbage_collection_info")		\
	X(LABEL, "label")			/* OTP 27: FP_LABEL_ITEM */	\
	X(INITIAL_CALL, "initial_call")		/* FP_ASK_FULL_IC */

#define NODE_ITEM_ENUM(id, name) NODE_ITEM_##id,
enum node_item {
	NODE_ITEMS(NODE_ITEM_ENUM)
	NODE_NITEMS
};
#undef NODE_ITEM_ENUM

struct node_item_name {
	const char *name;
	size_t len;
};

extern const struct node_item_name node_item_names[NODE_NITEMS];

/* Which item an atom of a reply names, or -1: compares against the
 * literals, which the compiler turns into a few loads, as it is asked for
 * every item of every sample. */
#define NODE_ITEM_MATCH(id, str)					\
	if (n == sizeof(str) - 1 && memcmp(name, str, sizeof(str) - 1) == 0) \
		return NODE_ITEM_##id;
static inline int
node_item_of(const char *name, size_t n)
{
	NODE_ITEMS(NODE_ITEM_MATCH)
	return -1;
}
#undef NODE_ITEM_MATCH

/* The dictionary keys a request reads as {dictionary, Key}. */
#define NODE_KEY_LABEL "$process_label"		/* FP_LABEL_DICT */
#define NODE_KEY_CALLERS "$callers"
#define NODE_KEY_LOGGER "$logger_metadata$"
#define NODE_KEY_INITIAL_CALL "$initial_call"

/* {dictionary, Key} */
void
node_encode_dict_key(ei_x_buff *x, const char *key);

/* The items the node's features and fp_node_set_extras() add to the
 * signalled list, into node->extra_items: once per connect, after the
 * probes (node->dict_keys, node->label_source). */
void
node_encode_extra_items(struct fp_node *node);

/* A pid of the target from its local numbers. */
void
node_encode_local_pid(struct fp_node *node, ei_x_buff *x, struct fp_pid pid);

/* A list of such pids. */
void
node_encode_pid_list(struct fp_node *node, ei_x_buff *x,
		     const struct fp_pid *pids, size_t n);

/* {Instant, Signalled, Probe}: the item lists a sample asks, for a
 * sampler on the node that builds a request's lists itself (helper.c). */
void
node_encode_item_sets(const struct fp_node *node, ei_x_buff *x);

/* The two lists a sample request zips: its pids (twice each, probed ones
 * once) and the item list of each. */
void
node_encode_sample_pids(struct fp_node *node, ei_x_buff *x,
			const struct fp_pid *pids, const enum fp_ask *asks,
			size_t n);

void
node_encode_sample_items(const struct fp_node *node, ei_x_buff *x,
			 const enum fp_ask *asks, size_t n);

/* Parse the initial-call expression fp_node_initial_call_request() sends
 * (node->ic_exprs): once per connect, after the probes. As node_call(). */
int
node_initial_calls_prepare(struct fp_node *node, unsigned timeout_ms);

/* A sample request as an rpc through rex (node_path_rex.sample). */
int
node_rex_sample(struct fp_node *node, const struct fp_pid *pids,
		const enum fp_ask *asks, size_t n, uint64_t *id);
