/*
 * flame_profd — pid hash map (linear probing, backward-shift deletion).
 */
#include <string.h>

#include "pidmap.h"
#include "util-mem.h"

static inline size_t
hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key;
}

static inline void *
slot_value(const struct pidmap *map, size_t i)
{
	return map->values + i * map->value_size;
}

void
pidmap_init(struct pidmap *map, size_t value_size)
{
	memset(map, 0, sizeof(*map));
	map->value_size = value_size;
}

void
pidmap_release(struct pidmap *map)
{
	free(map->keys);
	free(map->values);
	pidmap_init(map, map->value_size);
}

void
pidmap_clear(struct pidmap *map)
{
	if (map->keys)
		memset(map->keys, 0, map->capacity * sizeof(*map->keys));
	map->count = 0;
}

void *
pidmap_find(const struct pidmap *map, uint64_t key)
{
	size_t mask = map->capacity - 1;

	if (!map->capacity)
		return NULL;
	for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
		if (map->keys[i] == 0)
			return NULL;
		if (map->keys[i] == key + 1)
			return slot_value(map, i);
	}
}

static void
grow(struct pidmap *map)
{
	struct pidmap bigger;

	pidmap_init(&bigger, map->value_size);
	bigger.capacity = map->capacity ? map->capacity * 2 : 64;
	bigger.keys = xzalloc(bigger.capacity * sizeof(*bigger.keys));
	bigger.values = xzalloc(bigger.capacity * map->value_size);
	for (size_t i = 0; i < map->capacity; i++) {
		bool created;
		void *v;

		if (!map->keys[i])
			continue;
		v = pidmap_insert(&bigger, map->keys[i] - 1, &created);
		memcpy(v, slot_value(map, i), map->value_size);
	}
	free(map->keys);
	free(map->values);
	*map = bigger;
}

void *
pidmap_insert(struct pidmap *map, uint64_t key, bool *created)
{
	size_t mask;

	if ((map->count + 1) * 4 > map->capacity * 3)
		grow(map);
	mask = map->capacity - 1;
	for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
		if (map->keys[i] == key + 1) {
			*created = false;
			return slot_value(map, i);
		}
		if (map->keys[i] == 0) {
			map->keys[i] = key + 1;
			memset(slot_value(map, i), 0, map->value_size);
			map->count++;
			*created = true;
			return slot_value(map, i);
		}
	}
}

void
pidmap_remove(struct pidmap *map, uint64_t key)
{
	size_t mask = map->capacity - 1, i, j;

	if (!map->capacity)
		return;
	for (i = hash(key) & mask;; i = (i + 1) & mask) {
		if (map->keys[i] == 0)
			return;
		if (map->keys[i] == key + 1)
			break;
	}
	/* Shift later members of the cluster back into the hole. */
	for (j = (i + 1) & mask; map->keys[j]; j = (j + 1) & mask) {
		size_t home = hash(map->keys[j] - 1) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			map->keys[i] = map->keys[j];
			memcpy(slot_value(map, i), slot_value(map, j),
			       map->value_size);
			i = j;
		}
	}
	map->keys[i] = 0;
	map->count--;
}

bool
pidmap_next(const struct pidmap *map, size_t *iter, uint64_t *key,
	    void **value)
{
	for (size_t i = *iter; i < map->capacity; i++) {
		if (map->keys[i]) {
			*key = map->keys[i] - 1;
			*value = slot_value(map, i);
			*iter = i + 1;
			return true;
		}
	}
	*iter = map->capacity;
	return false;
}
