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

/* The process_info/2 items of a sample request. */
enum node_item {
	NODE_ITEM_STATUS,
	NODE_ITEM_REGISTERED_NAME,
	NODE_ITEM_CURRENT_STACKTRACE,
	NODE_ITEM_REDUCTIONS,
	NODE_ITEM_MEMORY,
	NODE_ITEM_MESSAGE_QUEUE_LEN,
	NODE_ITEM_TOTAL_HEAP_SIZE,
	NODE_ITEM_HEAP_SIZE,
	NODE_ITEM_STACK_SIZE,
	NODE_ITEM_GARBAGE_COLLECTION,
	NODE_ITEM_GARBAGE_COLLECTION_INFO,
	NODE_ITEM_LABEL,		/* OTP 27: FP_LABEL_ITEM */
	NODE_ITEM_INITIAL_CALL,		/* FP_ASK_FULL_IC */
	NODE_NITEMS
};

struct node_item_name {
	const char *name;
	size_t len;
};

extern const struct node_item_name node_item_names[NODE_NITEMS];

/* Which item an atom of a reply names, or -1. */
static inline int
node_item_of(const char *name, size_t n)
{
	for (int k = 0; k < NODE_NITEMS; k++) {
		if (node_item_names[k].len == n &&
		    memcmp(node_item_names[k].name, name, n) == 0)
			return k;
	}
	return -1;
}

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

/* A sample request as an rpc through rex (node_path_rex.sample). */
int
node_rex_sample(struct fp_node *node, const struct fp_pid *pids,
		const enum fp_ask *asks, size_t n, uint64_t *id);
