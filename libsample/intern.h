/*
 * flame_profd — a table of byte strings (raw external-term spans) to
 * values that live as long as the table.
 *
 * Private to libsample. The decoder keys its frame and stack caches on
 * the exact bytes the node sent: equal bytes are the same term (the
 * caller only interns spans without atom-cache references), so a known
 * frame costs a hash and a compare instead of a decode. Keys and values
 * are allocated from the table's own arena and freed all at once by
 * intern_clear(); nothing is ever removed one by one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct intern_entry;
struct intern_chunk;

struct intern {
	struct intern_entry **slots;	/* capacity, power of two; NULL empty */
	size_t capacity, count;
	struct intern_chunk *chunks;
	size_t bytes;			/* arena bytes handed out */
};

/* An empty table. */
void
intern_init(struct intern *t);

/* Free the table and every string it handed out. */
void
intern_release(struct intern *t);

/* Drop every entry; the memory of the newest chunk is kept. */
void
intern_clear(struct intern *t);

/* The value stored under @key, or NULL. */
void *
intern_find(const struct intern *t, uint64_t hash, const void *key,
	    size_t len);

/* Store a copy of @key with a zero-filled value of @value_size bytes (16-
 * byte aligned) and return the value; *copy (if not NULL) is the stored
 * key. The key must not be present. */
void *
intern_add(struct intern *t, uint64_t hash, const void *key, size_t len,
	   size_t value_size, const void **copy);

/* Memory from the table's arena, freed by intern_clear(). */
void *
intern_alloc(struct intern *t, size_t size);

/* A NUL-terminated copy of @s[0..len) in the arena, freed with the table. */
char *
intern_strdup(struct intern *t, const char *s, size_t len);
