/*
 * flame_profd — call tree for flame graphs: stacks merged by frame name,
 * root first, with sample counts and weights per node.
 *
 * A tree holds two sets of counts (0 and 1) over the same nodes, so that
 * a differential flame graph can compare BEFORE (set 0) with AFTER (set
 * 1) frame by frame. Single graphs use set 0.
 *
 * Weights are magnitudes (never negative): signed metrics are split or
 * folded by the caller before they get here (see flame_prof(1), --sign).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fp_flame_tree;

enum fp_flame_kind {
	FP_FLAME_FRAME = 0,	/* an Erlang function */
	FP_FLAME_GROUP,		/* a synthetic frame: status, sign, process */
};

/**
 * A node of the tree, read-only for users. Children are sorted by name
 * (byte order) after fp_flame_tree_finish().
 */
struct fp_flame_node {
	const char *name;		/* owned by the tree */
	const char *file;		/* FILE of the first sample, or NULL */
	struct fp_flame_node *parent;
	struct fp_flame_node *child;	/* first child */
	struct fp_flame_node *next;	/* next sibling */
	uint32_t depth;			/* root 0 */
	enum fp_flame_kind kind;
	uint64_t samples[2];		/* through this node */
	uint64_t weight[2];
	uint64_t self_samples[2];	/* ending at this node */
	uint64_t self_weight[2];
};

/** Caller owns the result; free with fp_flame_tree_destroy(). */
struct fp_flame_tree *
fp_flame_tree_new(void);

/** NULL is a no-op. */
void
fp_flame_tree_destroy(struct fp_flame_tree *tree);

/**
 * Add one stack to @set (0 or 1). @names is root first; the first
 * @ngroups of them are synthetic group frames. @files may be NULL, else
 * parallel to @names (NULL entries allowed). The strings are copied.
 */
void
fp_flame_tree_add(struct fp_flame_tree *tree, int set,
		  const char *const *names, const char *const *files,
		  size_t n, size_t ngroups, uint64_t weight);

/**
 * Whether a weight sum left the 64-bit range: it is then held at
 * UINT64_MAX instead of wrapping, and the caller warns.
 */
bool
fp_flame_tree_saturated(const struct fp_flame_tree *tree);

/** Sort every child list by name. Call once after the last add. */
void
fp_flame_tree_finish(struct fp_flame_tree *tree);

/** The root (name ""), owned by the tree. Its counts are the totals. */
const struct fp_flame_node *
fp_flame_tree_root(const struct fp_flame_tree *tree);

/** Number of nodes below the root. */
size_t
fp_flame_tree_size(const struct fp_flame_tree *tree);

/** Deepest node's depth (0 for an empty tree). */
uint32_t
fp_flame_tree_depth(const struct fp_flame_tree *tree);

/**
 * A walk over a subtree in pre-order: a node before its children,
 * siblings in list order (by name after fp_flame_tree_finish()). It
 * holds no memory; the tree must not change while it runs.
 */
struct fp_flame_walk {
	const struct fp_flame_node *top;	/* the subtree's root */
	const struct fp_flame_node *node;	/* the current node */
};

/**
 * Start a walk over @top's subtree (@top a node of the tree, such as
 * fp_flame_tree_root()). Returns @top, the walk's first node.
 */
const struct fp_flame_node *
fp_flame_walk_start(struct fp_flame_walk *walk, const struct fp_flame_node *top);

/**
 * The node after the current one, or NULL when the subtree is done. With
 * @descend false the current node's children (and all below them) are
 * skipped: the walk goes on with its next sibling or an ancestor's.
 */
const struct fp_flame_node *
fp_flame_walk_next(struct fp_flame_walk *walk, bool descend);
