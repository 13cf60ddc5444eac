/*
 * flame_profd — open-addressing hash map from pid to a value slot.
 *
 * Private to libsample. Values are fixed-size structs stored inline; a
 * removal is a tombstone-free backward shift, so lookups never degrade on
 * a node whose processes come and go.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pidmap {
	size_t value_size;
	size_t capacity;	/* power of two */
	size_t count;
	uint64_t *keys;		/* key + 1; 0 marks an empty slot */
	unsigned char *values;
};

/* An empty map whose values are @value_size bytes. */
void
pidmap_init(struct pidmap *map, size_t value_size);

/* Free the map's memory; it is left empty and usable, as after init. */
void
pidmap_release(struct pidmap *map);

/* Remove every entry, keeping the memory. */
void
pidmap_clear(struct pidmap *map);

/* Returns the value slot for @key or NULL. */
void *
pidmap_find(const struct pidmap *map, uint64_t key);

/* Returns the slot for @key, zero-filled and *created set if it is new.
 * Slots move when the map grows: do not keep pointers across inserts. */
void *
pidmap_insert(struct pidmap *map, uint64_t key, bool *created);

/* Remove @key's entry, if there is one. */
void
pidmap_remove(struct pidmap *map, uint64_t key);

/* Iteration: for (i = 0; pidmap_next(map, &i, &key, &value); ) */
bool
pidmap_next(const struct pidmap *map, size_t *iter, uint64_t *key,
	    void **value);
