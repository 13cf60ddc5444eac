/*
 * flame_profd — byte-string interning for the decoder's caches.
 */
#include <string.h>

#include "intern.h"
#include "util-mem.h"

struct intern_entry {
	uint64_t hash;
	const unsigned char *key;
	size_t len;
	void *value;
};

struct intern_chunk {
	struct intern_chunk *next;
	size_t used, size;
	_Alignas(16) unsigned char data[];
};

enum { INTERN_CHUNK = 256 * 1024 };

void
intern_init(struct intern *t)
{
	memset(t, 0, sizeof(*t));
}

void
intern_release(struct intern *t)
{
	while (t->chunks) {
		struct intern_chunk *next = t->chunks->next;

		free(t->chunks);
		t->chunks = next;
	}
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

void
intern_clear(struct intern *t)
{
	struct intern_chunk *c = t->chunks;

	if (c) {
		while (c->next) {
			struct intern_chunk *next = c->next;

			c->next = next->next;
			free(next);
		}
		c->used = 0;
	}
	if (t->slots)
		memset(t->slots, 0, t->capacity * sizeof(*t->slots));
	t->count = 0;
	t->bytes = 0;
}

void *
intern_alloc(struct intern *t, size_t size)
{
	struct intern_chunk *c = t->chunks;
	void *p;

	size = (size + 15) & ~(size_t)15;
	if (!c || c->size - c->used < size) {
		size_t csize = size > INTERN_CHUNK ? size : INTERN_CHUNK;

		c = xzalloc(sizeof(*c) + csize);
		c->size = csize;
		c->next = t->chunks;
		t->chunks = c;
	}
	p = c->data + c->used;
	c->used += size;
	t->bytes += size;
	return p;
}

char *
intern_strdup(struct intern *t, const char *s, size_t len)
{
	char *p = intern_alloc(t, len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

void *
intern_find(const struct intern *t, uint64_t hash, const void *key,
	    size_t len)
{
	size_t mask = t->capacity - 1;

	if (!t->count)
		return NULL;
	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		const struct intern_entry *e = t->slots[i];

		if (!e)
			return NULL;
		if (e->hash == hash && e->len == len &&
		    memcmp(e->key, key, len) == 0)
			return e->value;
	}
}

/* Put @e in the first free slot from its hash on (a free one exists). */
static void
place(struct intern_entry **slots, size_t capacity, struct intern_entry *e)
{
	size_t i;

	for (i = e->hash & (capacity - 1); slots[i]; i = (i + 1) & (capacity - 1))
		;
	slots[i] = e;
}

static void
grow(struct intern *t)
{
	size_t capacity = t->capacity ? t->capacity * 2 : 1024;
	struct intern_entry **slots = xzalloc(capacity * sizeof(*slots));

	for (size_t k = 0; k < t->capacity; k++) {
		if (t->slots[k])
			place(slots, capacity, t->slots[k]);
	}
	free(t->slots);
	t->slots = slots;
	t->capacity = capacity;
}

void *
intern_add(struct intern *t, uint64_t hash, const void *key, size_t len,
	   size_t value_size, const void **copy)
{
	struct intern_entry *e;
	unsigned char *k;

	if ((t->count + 1) * 4 > t->capacity * 3)	/* load <= 3/4 */
		grow(t);
	e = intern_alloc(t, sizeof(*e));
	k = intern_alloc(t, len ? len : 1);
	memcpy(k, key, len);
	e->hash = hash;
	e->key = k;
	e->len = len;
	e->value = intern_alloc(t, value_size);
	memset(e->value, 0, value_size);
	if (copy)
		*copy = k;
	place(t->slots, t->capacity, e);
	t->count++;
	return e->value;
}
