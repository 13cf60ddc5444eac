/*
 * flame_profd — call tree keyed by frame name.
 *
 * Every (parent, name) pair is one entry of an open-addressing hash
 * table, so adding a stack costs one probe per frame whatever the fan-out;
 * a profile of a busy node has hundreds of thousands of samples of a few
 * thousand distinct paths. Nodes and strings live in chunks that never
 * move, so node pointers stay valid while the tree grows.
 */
#include <stdlib.h>
#include <string.h>

#include "util-hash.h"
#include "fp/flame-tree.h"
#include "util-buf.h"
#include "util-mem.h"
#include "util-sat.h"

#define NODE_CHUNK 4096
#define TEXT_CHUNK (256 * 1024)

struct node_chunk {
	struct node_chunk *next;
	size_t used;
	struct fp_flame_node nodes[NODE_CHUNK];
};

struct text_chunk {
	struct text_chunk *next;
	size_t used, cap;
	char text[];
};

struct slot {
	uint64_t hash;
	struct fp_flame_node *node;
};

struct fp_flame_tree {
	struct fp_flame_node root;
	struct node_chunk *nodes;
	struct text_chunk *text;
	struct slot *slots;
	size_t nslots, count;
	uint32_t depth;
	bool saturated;
};

static uint64_t
key_hash(const struct fp_flame_node *parent, const char *name)
{
	uint64_t h = fnv1a_str(FNV1A_BASIS ^ ((uint64_t)(uintptr_t)parent *
					      0x9e3779b97f4a7c15ULL), name);

	return h ? h : 1;
}

struct fp_flame_tree *
fp_flame_tree_new(void)
{
	struct fp_flame_tree *t = xnew(struct fp_flame_tree);

	t->root.name = "";
	t->nslots = 1024;
	t->slots = xzalloc(t->nslots * sizeof(*t->slots));
	return t;
}

void
fp_flame_tree_destroy(struct fp_flame_tree *t)
{
	if (!t)
		return;
	while (t->nodes) {
		struct node_chunk *next = t->nodes->next;

		free(t->nodes);
		t->nodes = next;
	}
	while (t->text) {
		struct text_chunk *next = t->text->next;

		free(t->text);
		t->text = next;
	}
	free(t->slots);
	free(t);
}

static const char *
copy_text(struct fp_flame_tree *t, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p;

	if (!t->text || t->text->used + n > t->text->cap) {
		size_t cap = n > TEXT_CHUNK ? n : TEXT_CHUNK;
		struct text_chunk *c = xzalloc(sizeof(*c) + cap);

		c->cap = cap;
		c->next = t->text;
		t->text = c;
	}
	p = t->text->text + t->text->used;
	memcpy(p, s, n);
	t->text->used += n;
	return p;
}

static void
grow(struct fp_flame_tree *t)
{
	size_t nslots = t->nslots * 2;
	struct slot *slots = xzalloc(nslots * sizeof(*slots));

	for (size_t i = 0; i < t->nslots; i++) {
		size_t j;

		if (!t->slots[i].node)
			continue;
		j = t->slots[i].hash & (nslots - 1);
		while (slots[j].node)
			j = (j + 1) & (nslots - 1);
		slots[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
}

static struct fp_flame_node *
child(struct fp_flame_tree *t, struct fp_flame_node *parent, const char *name,
      const char *file, enum fp_flame_kind kind)
{
	uint64_t h = key_hash(parent, name);
	size_t i = h & (t->nslots - 1);
	struct fp_flame_node *n;

	for (;;) {
		n = t->slots[i].node;
		if (!n)
			break;
		if (t->slots[i].hash == h && n->parent == parent &&
		    strcmp(n->name, name) == 0)
			return n;
		i = (i + 1) & (t->nslots - 1);
	}

	if (!t->nodes || t->nodes->used == NODE_CHUNK) {
		struct node_chunk *c = xnew(struct node_chunk);

		c->next = t->nodes;
		t->nodes = c;
	}
	n = &t->nodes->nodes[t->nodes->used++];
	n->name = copy_text(t, name);
	n->file = file ? copy_text(t, file) : NULL;
	n->parent = parent;
	n->depth = parent->depth + 1;
	n->kind = kind;
	n->next = parent->child;
	parent->child = n;
	if (n->depth > t->depth)
		t->depth = n->depth;

	t->slots[i] = (struct slot){ h, n };
	if (++t->count * 2 > t->nslots)
		grow(t);
	return n;
}

void
fp_flame_tree_add(struct fp_flame_tree *t, int set, const char *const *names,
		  const char *const *files, size_t n, size_t ngroups,
		  uint64_t weight)
{
	struct fp_flame_node *node = &t->root;
	bool sat;

	node->samples[set]++;
	sat = sat_add_u64(&node->weight[set], weight);
	for (size_t i = 0; i < n; i++) {
		node = child(t, node, names[i], files ? files[i] : NULL,
			     i < ngroups ? FP_FLAME_GROUP : FP_FLAME_FRAME);
		node->samples[set]++;
		sat |= sat_add_u64(&node->weight[set], weight);
	}
	node->self_samples[set]++;
	sat |= sat_add_u64(&node->self_weight[set], weight);
	t->saturated |= sat;
}

bool
fp_flame_tree_saturated(const struct fp_flame_tree *t)
{
	return t->saturated;
}

static int
by_name(const void *a, const void *b)
{
	const struct fp_flame_node *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

static void
sort_children(struct fp_flame_node *parent, struct fp_flame_node ***scratch,
	      size_t *cap)
{
	size_t n = 0;

	for (struct fp_flame_node *c = parent->child; c; c = c->next)
		n++;
	if (n < 2)
		return;
	FP_GROW(*scratch, *cap, n);
	n = 0;
	for (struct fp_flame_node *c = parent->child; c; c = c->next)
		(*scratch)[n++] = c;
	qsort(*scratch, n, sizeof(**scratch), by_name);
	parent->child = (*scratch)[0];
	for (size_t i = 0; i + 1 < n; i++)
		(*scratch)[i]->next = (*scratch)[i + 1];
	(*scratch)[n - 1]->next = NULL;
}

void
fp_flame_tree_finish(struct fp_flame_tree *t)
{
	struct fp_flame_node **scratch = NULL;
	size_t cap = 0;

	sort_children(&t->root, &scratch, &cap);
	for (struct node_chunk *c = t->nodes; c; c = c->next) {
		for (size_t i = 0; i < c->used; i++)
			sort_children(&c->nodes[i], &scratch, &cap);
	}
	free(scratch);
}

const struct fp_flame_node *
fp_flame_tree_root(const struct fp_flame_tree *t)
{
	return &t->root;
}

size_t
fp_flame_tree_size(const struct fp_flame_tree *t)
{
	return t->count;
}

uint32_t
fp_flame_tree_depth(const struct fp_flame_tree *t)
{
	return t->depth;
}

const struct fp_flame_node *
fp_flame_walk_start(struct fp_flame_walk *walk, const struct fp_flame_node *top)
{
	walk->top = top;
	walk->node = top;
	return top;
}

const struct fp_flame_node *
fp_flame_walk_next(struct fp_flame_walk *walk, bool descend)
{
	const struct fp_flame_node *n = walk->node;

	if (!n)
		return NULL;
	if (descend && n->child) {
		walk->node = n->child;
		return walk->node;
	}
	while (n != walk->top && !n->next)
		n = n->parent;
	walk->node = n != walk->top ? n->next : NULL;
	return walk->node;
}
