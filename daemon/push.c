/*
 * flame_profd — --push: finished files as pprof profiles, through a
 * spool on disk, to a Pyroscope-compatible /ingest, or with
 * --push-format otlp as OTLP profiles export requests to an OTLP/HTTP
 * receiver's /v1development/profiles.
 *
 * One thread does all of it, so that nothing here can move the loop's
 * sampling: the loop only queues a file's name (fpd_output_finished_fn),
 * under a mutex held for a copy. libcurl's easy interface blocks that
 * thread alone; every request has --push-timeout.
 */
#include "config.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "push.h"
#include "daemon-log.h"
#include "fp/perf-file.h"
#include "fp/perf-script-read.h"
#include "fp/otlp.h"
#include "fp/pprof.h"
#include "output.h"
#include "util.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"

#define QUEUE_MAX 256			/* files waiting to be spooled, of
					 * every node */
#define HEADER_FILE_MAX 16384		/* --push-header-file's size */
#define PROFILE_MAX (256u << 20)	/* a spooled profile read back */
#define BACKOFF_MIN_US 1000000u		/* the first retry after 1 s ... */
#define BACKOFF_MAX_US 60000000u	/* ... doubling up to a minute */
#define SPOOL_TMP ".push.tmp"
#define SPOOL_MARK ".pushed"		/* mark_ms, across runs */
#define SPOOL_MARK_TMP ".pushed.tmp"
#define BACKFILL_MAX (QUEUE_MAX / 2)	/* files finished unspooled, taken up */
#define SPY_NAME "flame_profd"
#define FINAL_ROUND_US 1000000u		/* stopping: the spool tried this long */
#define RETRY_AFTER_MAX_US 300000000u	/* a server's Retry-After, at most */
#define ANSWER_MAX 65536		/* a response body kept for reading */
#define PPROF_SUFFIX ".pprof.gz"
#define OTLP_SUFFIX ".otlp.gz"		/* an ExportProfilesServiceRequest */
#define OTLP_PATH "/v1development/profiles"
#define OTLP_NODE_ATTR "beam.node"
#define OTLP_STATUS_ATTR "beam.process.status"

/*
 * What each profile tells Pyroscope of its one column: samples, summed
 * over time, each standing for 1/sampleRate s (docs/OPERATIONS.md). The
 * server names the series SERVICE.samples{...}.
 */
static const char sample_type_config[] =
	"{\"samples\":{\"units\":\"samples\",\"aggregation\":\"sum\","
	"\"display-name\":\"samples\",\"sampled\":true}}";

/* A profile in the spool: its name says when it starts and ends and the
 * rate its samples were taken at (spool_name_parse()). */
struct spooled {
	char name[64];
	uint64_t size;
	struct fpd_made made;
	bool otlp;			/* OTLP_SUFFIX, else PPROF_SUFFIX */
};

struct push_node {
	struct fpd_push *push;
	char *node;
	char *name_param;		/* name=, escaped for the URL */
	char *service;			/* otlp: service.name */
	char *host;			/* otlp: host.name, the node's host */
	int node_dirfd;			/* the node directory (a dup) */
	int spool_fd;			/* push-spool/, -1 until opened */
	bool spool_tried;
	struct spooled *spool;		/* oldest first */
	size_t nspool, spool_cap;
	uint64_t spool_bytes;
	uint64_t next_try_us;		/* monotonic; 0: now */
	unsigned failures;		/* in a row */
	uint64_t mark_ms;		/* the time in the name of the newest
					 * file spooled (or given up on), as
					 * SPOOL_MARK records it; 0: none */
	uint64_t floor_ms;		/* files of this time or older are
					 * not pushed (finished before the
					 * first run with --push, or past
					 * BACKFILL_MAX after a kill) */
	char *file_node;		/* the node in its files' names */
	/* under the pusher's mu: */
	bool behind;			/* the queue was full: the node's
					 * files after mark_ms wait in its
					 * directory for scan_behind() */
	uint64_t skipped;		/* files finished while behind */
};

struct job {
	struct push_node *pn;		/* read from its node_dirfd */
	char name[FP_PERF_NAME_MAX];
};

struct fpd_push {
	struct fpd_push_config c;
	char *ingest_url;
	char *otlp_url;
	struct curl_slist *headers;	/* from the header file: never logged */
	struct curl_slist *otlp_headers; /* those, and the body's type */
	CURL *curl;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu: */
	struct push_node **nodes;
	size_t nnodes, nodes_cap;
	struct job queue[QUEUE_MAX];
	size_t qhead, qlen;
	size_t scan_next;		/* the node scan_behind() tries first */
	bool stopping;
	struct fpd_push_stats stats;
	/* stopping: when the request in flight is given up and the last
	 * round ends (0: not stopping); read by the transfer's callback */
	_Atomic uint64_t stop_deadline_us;
};

/* --- the header file ---------------------------------------------------- */

/* A line of the header file: "Name: value", Name a token (RFC 9110). */
static bool
header_line_ok(const char *line)
{
	const char *colon = strchr(line, ':');

	if (!colon || colon == line)
		return false;
	for (const char *s = line; s < colon; s++) {
		if (*s <= ' ' || *s >= 127 || strchr("\"(),/:;<=>?@[\\]{}", *s))
			return false;
	}
	for (const char *s = colon + 1; *s; s++) {
		if ((unsigned char)*s < ' ' && *s != '\t')
			return false;
	}
	return true;
}

/*
 * The header file holds credentials (an Authorization or X-Scope-OrgID
 * line): it is read like the cookie, and what is wrong with it is said
 * by line number only.
 */
static int
read_header_file(struct fpd_push *p)
{
	char buf[HEADER_FILE_MAX + 1], *line, *save = NULL;
	const char *why = NULL;
	struct stat st;
	size_t len = 0;
	unsigned lineno = 0;
	ssize_t n;
	int fd, rc = 0;

	fd = fpd_fs_open_foreign_file(p->c.header_file, &p->c.trust, &st, &why);
	if (fd < 0) {
		if (why)
			fpd_fatal("--push-header-file %s %s", p->c.header_file, why);
		else
			fpd_fatal("cannot open --push-header-file %s: %s",
				  p->c.header_file, strerror(-fd));
		return fd;
	}
	if (st.st_mode & 077) {
		/* a token others can read is a token others have */
		fpd_fatal("--push-header-file %s must be accessible by its owner only (chmod 600)",
			  p->c.header_file);
		close(fd);
		return -EPERM;
	}
	while (len < sizeof(buf) - 1) {
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			rc = -EINVAL;	/* not a regular file after all */
			break;
		}
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (rc == 0 && len >= sizeof(buf) - 1)
		rc = -EFBIG;
	if (rc < 0) {
		fpd_fatal("cannot read --push-header-file %s: %s", p->c.header_file,
			  strerror(-rc));
		goto out;
	}
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t l = strlen(line);

		lineno++;
		if (l && line[l - 1] == '\r')
			line[--l] = '\0';
		if (l == 0 || line[0] == '#')
			continue;
		if (!header_line_ok(line)) {
			fpd_fatal("--push-header-file %s: line %u is not \"Name: value\"",
				  p->c.header_file, lineno);
			rc = -EBADMSG;
			goto out;
		}
		p->headers = curl_slist_append(p->headers, line);
		if (!p->headers)
			abort();
	}
out:
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

/* --- setting up ------------------------------------------------------- */

/* Whether @path ends in @tail. */
static bool
ends_with(const char *path, size_t len, const char *tail)
{
	size_t n = strlen(tail);

	return len >= n && memcmp(path + len - n, tail, n) == 0;
}

/*
 * The URLs requests go to: --push as given when it names the format's
 * path (/ingest, /v1development/profiles) already, else with that path
 * added, as OTLP/HTTP exporters add theirs to a base URL. The other
 * format's URL, for what an earlier run with the other --push-format
 * left in a spool, is made from the same base.
 */
static int
push_urls(struct fpd_push *p)
{
	CURLU *u = curl_url();
	char *path = NULL, *scheme = NULL, *query = NULL;
	struct fp_text t = { 0 };
	int rc = 0;

	if (!u)
		abort();
	if (curl_url_set(u, CURLUPART_URL, p->c.url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
		fpd_fatal("--push %s: not an http:// or https:// URL", p->c.url);
		rc = -EINVAL;
		goto out;
	}
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK) {
		fpd_fatal("--push %s: give the server's URL without a query", p->c.url);
		rc = -EINVAL;
		goto out;
	}
	fp_text_puts(&t, p->c.url);
	if (path && ends_with(t.buf, t.len, "/ingest"))
		t.len -= strlen("/ingest");
	else if (path && ends_with(t.buf, t.len, OTLP_PATH))
		t.len -= strlen(OTLP_PATH);
	while (t.len && t.buf[t.len - 1] == '/')
		t.len--;
	{
		size_t base = t.len;

		fp_text_puts(&t, "/ingest");
		fp_text_putc(&t, '\0');
		p->ingest_url = xstrdup(t.buf);
		t.len = base;
		fp_text_puts(&t, OTLP_PATH);
		fp_text_putc(&t, '\0');
		p->otlp_url = xstrdup(t.buf);
	}
out:
	fp_text_free(&t);
	curl_free(path);
	curl_free(scheme);
	curl_free(query);
	curl_url_cleanup(u);
	return rc;
}

/* OTLP/HTTP's binary protobuf encoding, gzip'd as the spool holds it;
 * after the header file's lines. */
static void
otlp_headers(struct fpd_push *p)
{
	static const char *const ours[] = {
		"Content-Type: application/x-protobuf",
		"Content-Encoding: gzip",
	};

	for (struct curl_slist *l = p->headers; l; l = l->next) {
		p->otlp_headers = curl_slist_append(p->otlp_headers, l->data);
		if (!p->otlp_headers)
			abort();
	}
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
		p->otlp_headers = curl_slist_append(p->otlp_headers, ours[i]);
		if (!p->otlp_headers)
			abort();
	}
}

int
fpd_push_new(const struct fpd_push_config *c, struct fpd_push **out)
{
	struct fpd_push *p = xnew(struct fpd_push);
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	p->c = *c;
	p->c.url = xstrdup(c->url);
	p->c.header_file = c->header_file ? xstrdup(c->header_file) : NULL;
	p->c.service = c->service ? xstrdup(c->service) : NULL;
	pthread_mutex_init(&p->mu, NULL);
	/* the backoff is counted on the monotonic clock: so are the waits */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* before any thread: curl_global_init() is not thread-safe */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fpd_fatal("--push: libcurl cannot start");
		rc = -ENOMEM;
		goto fail;
	}
	p->curl = curl_easy_init();
	if (!p->curl)
		abort();
	rc = push_urls(p);
	if (rc == 0 && p->c.header_file)
		rc = read_header_file(p);
	if (rc < 0)
		goto fail;
	otlp_headers(p);
	*out = p;
	return 0;
fail:
	fpd_push_destroy(p);
	return rc;
}

/* The name= of a node's requests: SERVICE{node=NODE}, as Pyroscope's
 * key grammar has it (a value holds no ',', '{', '}' or '='). */
static char *
name_param(struct fpd_push *p, const char *node)
{
	struct fp_text t = { 0 };
	const char *at = strchr(node, '@');
	char *enc, *res;

	if (p->c.service)
		fp_text_puts(&t, p->c.service);
	else
		fp_text_put(&t, node, at ? (size_t)(at - node) : strlen(node));
	fp_text_puts(&t, "{node=");
	for (const char *s = node; *s; s++)
		fp_text_putc(&t, strchr(",{}=\"", *s) || (unsigned char)*s < ' ' ?
				 '_' : *s);
	fp_text_putc(&t, '}');
	enc = curl_easy_escape(p->curl, t.buf, (int)t.len);
	if (!enc)
		abort();
	res = xstrdup(enc);
	curl_free(enc);
	fp_text_free(&t);
	return res;
}

/*
 * Queue @pn's finished file @name; under mu. The queue is shared by
 * every node and never drops: when it is full the node falls behind,
 * and this file and the node's next ones stay in its directory until
 * scan_behind() takes them up, oldest first. Dropping one instead would
 * lose it for good, as the mark moves past it once a newer file of the
 * node is spooled.
 */
static void
queue_locked(struct fpd_push *p, struct push_node *pn, const char *name)
{
	struct job *j;

	if (pn->behind) {
		pn->skipped++;
		return;
	}
	if (p->qlen == QUEUE_MAX) {
		fpd_warn("--push [%s]: %u files wait to be spooled: %s and the "
			 "node's next files are taken up from its directory "
			 "once they are", pn->node, QUEUE_MAX, name);
		pn->behind = true;
		pn->skipped++;
		return;
	}
	j = &p->queue[(p->qhead + p->qlen) % QUEUE_MAX];
	j->pn = pn;
	snprintf(j->name, sizeof(j->name), "%s", name);
	p->qlen++;
	p->stats.queued++;
	pthread_cond_signal(&p->cv);
}

/* A finished file: the loop's side, a copy under the mutex. The output's
 * directory is the one pn->node_dirfd is a dup of. */
static void
on_finished(void *data, int dirfd, const char *name)
{
	struct push_node *pn = data;

	(void)dirfd;
	if (pn->node_dirfd < 0)
		return;
	pthread_mutex_lock(&pn->push->mu);
	queue_locked(pn->push, pn, name);
	pthread_mutex_unlock(&pn->push->mu);
}

/* SPOOL_MARK of the spool in @spool_fd: 0 when there is none. */
static uint64_t
mark_read(struct fpd_push *p, int spool_fd)
{
	const char *why = NULL;
	char buf[32];
	uint64_t ms = 0;
	ssize_t n;
	int fd;

	fd = fpd_fs_open_file(spool_fd, SPOOL_MARK, O_RDONLY, &p->c.trust, NULL, &why);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = '\0';
		if (sscanf(buf, "%" SCNu64, &ms) != 1)
			ms = 0;
	}
	return ms;
}

struct finished {
	uint64_t ms;
	char name[FP_PERF_NAME_MAX];
};

static int
cmp_finished(const void *a, const void *b)
{
	const struct finished *x = a, *y = b;

	if (x->ms != y->ms)
		return x->ms < y->ms ? -1 : 1;
	return strcmp(x->name, y->name);
}

/*
 * The finished files of @pn in its directory newer than @after_ms
 * (0: all), oldest first, into *@out (the caller frees it): their count.
 */
static size_t
list_after(struct push_node *pn, uint64_t after_ms, struct finished **out)
{
	struct finished *f = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *dir;
	int fd;

	*out = NULL;
	fd = dup(pn->node_dirfd);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	/* a dup shares the offset, which the output's own listing left at
	 * the end */
	rewinddir(dir);
	while ((de = readdir(dir))) {
		struct fp_perf_name parsed;

		if (!fp_perf_name_is_of(de->d_name, pn->file_node) ||
		    !fp_perf_name_parse(de->d_name, &parsed) ||
		    parsed.epoch_ms <= after_ms ||
		    strlen(de->d_name) >= sizeof(f->name))
			continue;
		FP_GROW(f, cap, n + 1);
		f[n].ms = parsed.epoch_ms;
		memcpy(f[n].name, de->d_name, strlen(de->d_name) + 1);
		n++;
	}
	closedir(dir);
	if (n > 1)
		qsort(f, n, sizeof(*f), cmp_finished);
	*out = f;
	return n;
}

static uint64_t
max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/*
 * At attach, from the loop's thread: files the node directory holds that
 * finished after the mark, oldest first: those of a run killed before it
 * spooled them, those a stop left unspooled, and those the start
 * recovered from its partial files. Without a mark (the first run with
 * --push) none: files written before are not pushed. Only the newest
 * BACKFILL_MAX are taken; what the queue has no room for waits behind
 * (queue_locked()).
 */
static void
backfill(struct fpd_push *p, struct push_node *pn)
{
	const char *why = NULL;
	struct finished *f;
	size_t n, first = 0;
	int spool_fd;

	if (fpd_fs_open_subdir(pn->node_dirfd, FPD_PUSH_SPOOL_DIR, 0, &p->c.trust,
			       &spool_fd, NULL, &why) == 0) {
		pn->mark_ms = mark_read(p, spool_fd);
		close(spool_fd);
	}
	n = list_after(pn, 0, &f);
	if (!pn->mark_ms) {
		pn->floor_ms = n ? f[n - 1].ms : 0;
		free(f);
		return;
	}
	while (first < n && f[first].ms <= pn->mark_ms)
		first++;
	if (n - first > BACKFILL_MAX) {
		size_t all = n - first;

		first = n - BACKFILL_MAX;
		pn->floor_ms = f[first - 1].ms;
		fpd_warn("--push [%s]: %zu files finished but never spooled; the %zu oldest are not pushed",
			 pn->node, all, all - BACKFILL_MAX);
	}
	if (n > first)
		fpd_info("--push [%s]: %zu files finished but never spooled (a run killed or stopped, or files recovered) are pushed",
			 pn->node, n - first);
	pthread_mutex_lock(&p->mu);
	for (size_t i = first; i < n; i++)
		queue_locked(p, pn, f[i].name);
	pthread_mutex_unlock(&p->mu);
	free(f);
}

/*
 * The push thread, with an empty queue: the nodes that fell behind have
 * their waiting files queued, oldest first, BACKFILL_MAX of a node at a
 * time, in turn. The directory is read without mu (the loop finishes
 * files meanwhile); a file finished during the read is read again, and a
 * file both listed here and handed over by the loop is spooled once
 * (spool_job() skips what the mark has passed).
 * @return whether anything was queued.
 */
static bool
scan_behind(struct fpd_push *p)
{
	size_t nn = p->nnodes, start = p->scan_next;
	bool queued = false;

	for (size_t k = 0; k < nn && p->qlen < QUEUE_MAX; k++) {
		struct push_node *pn = p->nodes[(start + k) % nn];
		struct finished *f;
		uint64_t skipped;
		size_t n, take;

		if (!pn->behind)
			continue;
		if (pn->spool_tried && pn->spool_fd < 0) {
			/* nothing of it is pushed (said): never spooled, the
			 * mark would stay and the scan come back forever */
			pn->behind = false;
			continue;
		}
		do {
			skipped = pn->skipped;
			pthread_mutex_unlock(&p->mu);
			n = list_after(pn, max_u64(pn->mark_ms, pn->floor_ms), &f);
			pthread_mutex_lock(&p->mu);
			if (skipped != pn->skipped)
				free(f);
		} while (skipped != pn->skipped);
		take = QUEUE_MAX - p->qlen;
		if (take > BACKFILL_MAX)
			take = BACKFILL_MAX;
		if (take > n)
			take = n;
		/* the rest of the node, if any, waits for the next scan */
		pn->behind = false;
		for (size_t i = 0; i < take; i++)
			queue_locked(p, pn, f[i].name);
		pn->behind = take < n;
		free(f);
		queued |= take > 0;
		p->scan_next = (start + k + 1) % nn;
	}
	return queued;
}

/* Record that the file @name was spooled or given up on. */
static void
mark_write(struct fpd_push *p, struct push_node *pn, const char *name)
{
	struct fp_perf_name parsed;
	struct fpd_made made;
	char buf[32];
	int fd, rc, len;

	if (!fp_perf_name_parse(name, &parsed) || parsed.epoch_ms <= pn->mark_ms)
		return;
	pn->mark_ms = parsed.epoch_ms;
	len = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", parsed.epoch_ms);
	fpd_fs_clear_own_name(pn->spool_fd, SPOOL_MARK_TMP, &p->c.trust);
	fd = fpd_fs_create(pn->spool_fd, SPOOL_MARK_TMP, O_WRONLY | O_CLOEXEC, 0600,
			   &made);
	if (fd < 0)
		return;
	rc = fpd_write_all(fd, buf, (size_t)len);
	close(fd);
	if (rc == 0)
		rc = fpd_fs_rename(pn->spool_fd, SPOOL_MARK_TMP, SPOOL_MARK, true);
	if (rc < 0)
		fpd_fs_unlink_made(pn->spool_fd, SPOOL_MARK_TMP, &made);
}

void
fpd_push_attach(struct fpd_push *p, struct fpd_output *out, const char *node)
{
	struct push_node *pn = xnew(struct push_node);

	pn->push = p;
	pn->node = xstrdup(node);
	pn->name_param = name_param(p, node);
	{
		const char *at = strchr(node, '@');
		char host[256] = "";

		size_t n = at ? (size_t)(at - node) : strlen(node);

		pn->service = p->c.service ? xstrdup(p->c.service) :
			      memcpy(xzalloc(n + 1), node, n);
		/* a node's name says its host; a short name without one
		 * runs here */
		if (!at && gethostname(host, sizeof(host) - 1) < 0)
			host[0] = '\0';
		pn->host = xstrdup(at ? at + 1 : host);
	}
	pn->file_node = xstrdup(fpd_output_node_name(out));
	pn->node_dirfd = fcntl(fpd_output_dirfd(out), F_DUPFD_CLOEXEC, 3);
	pn->spool_fd = -1;
	if (pn->node_dirfd < 0)
		fpd_err("--push [%s]: cannot keep the node's directory: %s; nothing of the node is pushed",
			pn->node, strerror(errno));
	pthread_mutex_lock(&p->mu);
	FP_GROW(p->nodes, p->nodes_cap, p->nnodes + 1);
	p->nodes[p->nnodes++] = pn;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (pn->node_dirfd >= 0)
		backfill(p, pn);
	fpd_output_set_finished(out, on_finished, pn);
}

/* --- the spool -------------------------------------------------------- */

static int
cmp_spooled(const void *a, const void *b)
{
	return strcmp(((const struct spooled *)a)->name,
		      ((const struct spooled *)b)->name);
}

/* <first sample µs>-<last sample µs>-<rate mHz>.pprof.gz (or .otlp.gz,
 * *@otlp then true): names sort by time, and a profile needs nothing but
 * its name and bytes to be sent, also by a run of the other
 * --push-format. */
static bool
spool_name_parse(const char *name, uint64_t *from_us, uint64_t *until_us,
		 uint64_t *rate_mhz, bool *otlp)
{
	int end = 0;

	if (sscanf(name, "%16" SCNu64 "-%16" SCNu64 "-%" SCNu64 "%n",
		   from_us, until_us, rate_mhz, &end) != 3 || end <= 0)
		return false;
	if (strcmp(name + end, PPROF_SUFFIX) == 0)
		*otlp = false;
	else if (strcmp(name + end, OTLP_SUFFIX) == 0)
		*otlp = true;
	else
		return false;
	return strlen(name) < sizeof(((struct spooled *)0)->name);
}

/* Open (making it) the node's spool, and list what an earlier run left. */
static void
spool_open(struct fpd_push *p, struct push_node *pn)
{
	const char *why = NULL;
	struct fpd_made made;
	struct dirent *de;
	DIR *dir;
	int fd, rc;

	pn->spool_tried = true;
	if (pn->node_dirfd < 0)
		return;
	rc = fpd_fs_open_subdir(pn->node_dirfd, FPD_PUSH_SPOOL_DIR, 0700,
				&p->c.trust, &pn->spool_fd, &made, &why);
	if (rc < 0) {
		pn->spool_fd = -1;
		fpd_err("--push [%s]: cannot open the spool %s: %s; nothing of the node is pushed",
			pn->node, FPD_PUSH_SPOOL_DIR, why ? why : strerror(-rc));
		return;
	}
	fpd_fs_clear_own_name(pn->spool_fd, SPOOL_TMP, &p->c.trust);
	fpd_fs_clear_own_name(pn->spool_fd, SPOOL_MARK_TMP, &p->c.trust);
	fd = dup(pn->spool_fd);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(dir);
	while ((de = readdir(dir))) {
		uint64_t a, b, r;
		struct stat st;
		bool otlp;
		int f;

		if (!spool_name_parse(de->d_name, &a, &b, &r, &otlp))
			continue;
		f = fpd_fs_open_file(pn->spool_fd, de->d_name, O_RDONLY,
				     &p->c.trust, &st, &why);
		if (f < 0)
			continue;
		close(f);
		FP_GROW(pn->spool, pn->spool_cap, pn->nspool + 1);
		/* spool_name_parse() checked that it fits */
		memcpy(pn->spool[pn->nspool].name, de->d_name,
		       strlen(de->d_name) + 1);
		pn->spool[pn->nspool].size = (uint64_t)st.st_size;
		pn->spool[pn->nspool].otlp = otlp;
		fpd_fs_made_of(&st, &pn->spool[pn->nspool].made);
		pn->spool_bytes += (uint64_t)st.st_size;
		pn->nspool++;
	}
	closedir(dir);
	if (pn->nspool) {
		qsort(pn->spool, pn->nspool, sizeof(*pn->spool), cmp_spooled);
		fpd_info("--push [%s]: %zu profiles left in the spool by an earlier run are sent first",
			 pn->node, pn->nspool);
	}
}

static void
spool_forget(struct push_node *pn, size_t i)
{
	pn->spool_bytes -= pn->spool[i].size;
	memmove(&pn->spool[i], &pn->spool[i + 1],
		(pn->nspool - i - 1) * sizeof(*pn->spool));
	pn->nspool--;
}

/* Make room: the oldest go first, counted; the newest always stays. */
static void
spool_trim(struct fpd_push *p, struct push_node *pn)
{
	uint64_t dropped = 0;

	while (pn->nspool > 1 && pn->spool_bytes > p->c.spool_max) {
		fpd_fs_unlink_made(pn->spool_fd, pn->spool[0].name,
				   &pn->spool[0].made);
		spool_forget(pn, 0);
		dropped++;
	}
	if (!dropped)
		return;
	pthread_mutex_lock(&p->mu);
	p->stats.dropped += dropped;
	pthread_mutex_unlock(&p->mu);
	fpd_warn("--push [%s]: spool full (--push-spool-max): dropped the %" PRIu64
		 " oldest profile%s", pn->node, dropped, dropped == 1 ? "" : "s");
}

struct build {
	struct fp_pprof *pp;		/* one of these two */
	struct fp_otlp *otlp;
	uint64_t first_us, last_us, n;
};

static int
on_record(void *data, const struct fp_perf_record *rec)
{
	struct build *b = data;
	const int64_t one = 1;
	const char *status = fp_status_name(rec->status);

	/* Status is the one label (attribute): Pyroscope makes a series of
	 * each label set, and pids or names would make thousands. */
	if (b->otlp) {
		struct fp_otlp_attr attr = { OTLP_STATUS_ATTR, status };

		fp_otlp_add(b->otlp, rec->frames, rec->files, rec->nframes, &one,
			    &attr, 1);
	} else {
		struct fp_pprof_label label = { .key = "status", .str = status };

		fp_pprof_add(b->pp, rec->frames, rec->files, rec->nframes, &one,
			     &label, 1);
	}
	if (b->n == 0 || rec->time_us < b->first_us)
		b->first_us = rec->time_us;
	if (rec->time_us > b->last_us)
		b->last_us = rec->time_us;
	b->n++;
	return 0;
}

/*
 * The OTLP request of a file: one resource, the node (service.name as
 * Pyroscope's name= has it, host.name, OTLP_NODE_ATTR), one scope, this
 * program; one profile of samples counted, each standing for a period
 * of wall time (1/--rate): wall time is samples x period, which a
 * receiver derives (a second profile of it would be a second series
 * of the same name in Pyroscope).
 */
static void
otlp_start(struct push_node *pn, struct build *b)
{
	b->otlp = fp_otlp_new();
	fp_otlp_add_resource_attr(b->otlp, "service.name", pn->service);
	if (pn->host[0])
		fp_otlp_add_resource_attr(b->otlp, "host.name", pn->host);
	fp_otlp_add_resource_attr(b->otlp, OTLP_NODE_ATTR, pn->node);
	fp_otlp_set_scope(b->otlp, SPY_NAME, FP_VERSION);
	fp_otlp_add_sample_type(b->otlp, "samples", "count");
}

/* The finished file @j names, as a gzip'd profile (pprof, or an OTLP
 * request) in *@gz. */
static int
build_profile(struct fpd_push *p, const struct job *j, char **gz, size_t *gzlen,
	      struct build *b, double *rate)
{
	struct fp_perf_reader *r = NULL;
	const char *why = NULL;
	int64_t period = 0;
	FILE *mem;
	int fd, rc;

	fd = fpd_fs_open_file(j->pn->node_dirfd, j->name, O_RDONLY, &p->c.trust,
			      NULL, &why);
	if (fd < 0) {
		fpd_warn("--push [%s]: cannot read %s: %s", j->pn->node, j->name,
			 why ? why : strerror(-fd));
		return fd;
	}
	rc = fp_perf_reader_open_fd(fd, j->name, &r);
	if (rc < 0)
		return rc;
	if (p->c.otlp) {
		otlp_start(j->pn, b);
	} else {
		b->pp = fp_pprof_new();
		fp_pprof_add_sample_type(b->pp, "samples", "count");
		fp_pprof_set_default_sample_type(b->pp, "samples");
	}
	rc = fp_perf_read(r, on_record, b);
	if (rc < 0) {
		fpd_warn("--push [%s]: cannot read %s: %s", j->pn->node, j->name,
			 fp_perf_reader_error(r) ? fp_perf_reader_error(r) :
						   strerror(-rc));
		goto out;
	}
	*rate = fp_perf_reader_rate(r);
	if (*rate > 0)
		period = (int64_t)(1e9 / *rate + 0.5);
	mem = open_memstream(gz, gzlen);
	if (!mem)
		abort();
	if (b->otlp) {
		if (period)
			fp_otlp_set_period(b->otlp, "wall", "nanoseconds", period);
		fp_otlp_set_time(b->otlp, b->first_us * 1000,
				 (b->last_us - b->first_us) * 1000);
		fp_otlp_set_mapping(b->otlp, "[beam]");
		rc = fp_otlp_write_gzip(b->otlp, mem);
	} else {
		if (period)
			fp_pprof_set_period(b->pp, "wall", "nanoseconds", period);
		fp_pprof_set_time(b->pp, (int64_t)b->first_us * 1000,
				  (int64_t)(b->last_us - b->first_us) * 1000);
		fp_pprof_set_mapping(b->pp, "[beam]");
		rc = fp_pprof_write(b->pp, mem);
	}
	if (fclose(mem) != 0 && rc == 0)
		rc = -EIO;
out:
	fp_perf_reader_destroy(r);
	return rc;
}

/* Spool the file a job names: tmp, fsync, rename, fsync the spool. */
static void
spool_job(struct fpd_push *p, struct job *j)
{
	struct push_node *pn = j->pn;
	struct fp_perf_name parsed;
	struct build b = { 0 };
	struct fpd_made made;
	struct spooled *s;
	char name[64], *gz = NULL;
	size_t gzlen = 0;
	double rate = 0;
	int fd, rc;

	if (!pn->spool_tried)
		spool_open(p, pn);
	if (pn->spool_fd < 0) {
		rc = -ENOENT;
		goto out;
	}
	if (fp_perf_name_parse(j->name, &parsed) && parsed.epoch_ms <= pn->mark_ms)
		return;		/* listed by scan_behind() and handed over */
	rc = build_profile(p, j, &gz, &gzlen, &b, &rate);
	if (rc < 0 || b.n == 0)
		goto out;
	snprintf(name, sizeof(name), "%016" PRIu64 "-%016" PRIu64 "-%" PRIu64
		 "%s", b.first_us, b.last_us, (uint64_t)(rate * 1000 + 0.5),
		 p->c.otlp ? OTLP_SUFFIX : PPROF_SUFFIX);
	fpd_fs_clear_own_name(pn->spool_fd, SPOOL_TMP, &p->c.trust);
	fd = fpd_fs_create(pn->spool_fd, SPOOL_TMP, O_WRONLY | O_CLOEXEC, 0600, &made);
	if (fd < 0) {
		rc = fd;
		goto said;
	}
	rc = fpd_write_all(fd, gz, gzlen);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0)
		rc = fpd_fs_rename(pn->spool_fd, SPOOL_TMP, name, false);
	if (rc == -EEXIST) {
		/* spooled by a run killed before it recorded the mark */
		fpd_fs_unlink_made(pn->spool_fd, SPOOL_TMP, &made);
		rc = 0;
		goto out;
	}
	if (rc < 0) {
		fpd_fs_unlink_made(pn->spool_fd, SPOOL_TMP, &made);
		goto said;
	}
	fsync(pn->spool_fd);
	FP_GROW(pn->spool, pn->spool_cap, pn->nspool + 1);
	s = &pn->spool[pn->nspool++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->size = gzlen;
	s->made = made;
	s->otlp = p->c.otlp;
	pn->spool_bytes += gzlen;
	pthread_mutex_lock(&p->mu);
	p->stats.spooled++;
	pthread_mutex_unlock(&p->mu);
	spool_trim(p, pn);
	goto out;
said:
	fpd_warn("--push [%s]: cannot spool the profile of %s: %s", pn->node,
		 j->name, strerror(-rc));
out:
	if (rc < 0 || b.n == 0) {
		pthread_mutex_lock(&p->mu);
		p->stats.dropped++;
		pthread_mutex_unlock(&p->mu);
	}
	/* spooled or given up on: never taken up again (the mark comes
	 * after the spool's rename; a kill between them only finds the
	 * profile spooled already, above) */
	if (pn->spool_fd >= 0)
		mark_write(p, pn, j->name);
	fp_pprof_destroy(b.pp);
	fp_otlp_destroy(b.otlp);
	free(gz);
}

/* --- sending ---------------------------------------------------------- */

/* What a server answered: its status, Retry-After and the start of its
 * body (ANSWER_MAX bytes), for OTLP's partial success and errors. */
struct answer {
	long code;			/* 0: no answer */
	uint64_t retry_after_us;	/* 0: none */
	bool protobuf;			/* Content-Type application/x-protobuf */
	struct fp_text body;
};

static size_t
keep(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct fp_text *t = data;
	size_t n = size * nmemb;

	if (t->len < ANSWER_MAX)
		fp_text_put(t, ptr, n < ANSWER_MAX - t->len ? n : ANSWER_MAX - t->len);
	return n;
}

/* A varint of the protobuf at *@p before @end; false if cut short. */
static bool
pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		unsigned char c = *(*p)++;

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

/*
 * In the protobuf message @msg (@len bytes), the last field @field: a
 * varint into *@v, or a length-delimited field's bytes into *@at and
 * *@n. What the server sends is not trusted: every length is checked,
 * and a field of another wire type than expected is not taken.
 * @return whether the field was found.
 */
static bool
pb_field(const char *msg, size_t len, unsigned field, uint64_t *v,
	 const char **at, size_t *n)
{
	const unsigned char *p = (const unsigned char *)msg, *end = p + len;
	bool found = false;

	while (p < end) {
		uint64_t key, x;

		if (!pb_varint(&p, end, &key))
			return false;
		switch (key & 7) {
		case 0:
			if (!pb_varint(&p, end, &x))
				return false;
			if (key >> 3 == field && v) {
				*v = x;
				found = true;
			}
			break;
		case 1:
			if (end - p < 8)
				return false;
			p += 8;
			break;
		case 2:
			if (!pb_varint(&p, end, &x) || x > (uint64_t)(end - p))
				return false;
			if (key >> 3 == field && at) {
				*at = (const char *)p;
				*n = (size_t)x;
				found = true;
			}
			p += x;
			break;
		case 5:
			if (end - p < 4)
				return false;
			p += 4;
			break;
		default:
			return false;
		}
	}
	return found;
}

/* @n bytes a server sent, as a log line may show them. */
static char *
shown(const char *s, size_t n)
{
	struct fp_text t = { 0 };

	fp_text_put_escaped(&t, s, n > 512 ? 512 : n, NULL);
	fp_text_putc(&t, '\0');
	return t.buf;
}

/*
 * A 2xx of OTLP/HTTP: an ExportProfilesServiceResponse, whose
 * partial_success (1) says how many profiles the server dropped
 * (rejected_profiles, 1) and why (error_message, 2), or warns with none
 * rejected. Logged; the request is not sent again (OTLP: a partial
 * success is not retried).
 */
static void
otlp_partial(struct push_node *pn, const struct spooled *s,
	     const struct answer *a)
{
	const char *ps, *msg = NULL;
	size_t psn, msgn = 0;
	uint64_t rejected = 0;
	char *text;

	if (!a->protobuf || !a->body.len ||
	    !pb_field(a->body.buf, a->body.len, 1, NULL, &ps, &psn))
		return;
	pb_field(ps, psn, 1, &rejected, NULL, NULL);
	pb_field(ps, psn, 2, NULL, &msg, &msgn);
	if (!rejected && !msgn)
		return;
	text = shown(msg ? msg : "", msgn);
	if (rejected)
		fpd_warn("--push [%s]: the server took %s in part: %" PRId64
			 " profiles rejected: %s", pn->node, s->name,
			 (int64_t)rejected, msgn ? text : "(no message)");
	else
		fpd_warn("--push [%s]: the server took %s with a warning: %s",
			 pn->node, s->name, text);
	free(text);
}

/* The message of an OTLP/HTTP error answer (a google.rpc.Status, its
 * message field 2), shown, or NULL. */
static char *
otlp_error(const struct answer *a)
{
	const char *msg;
	size_t n;

	if (!a->protobuf || !a->body.len ||
	    !pb_field(a->body.buf, a->body.len, 2, NULL, &msg, &n) || !n)
		return NULL;
	return shown(msg, n);
}

static int
progress(void *data, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
	 curl_off_t ulnow)
{
	struct fpd_push *p = data;
	uint64_t deadline = atomic_load(&p->stop_deadline_us);

	/* stopping: a request to a server that does not answer holds the
	 * exit no longer than the last round */
	return deadline && fpd_now_mono_us() > deadline;
}

/* Read the spooled profile @s back. */
static int
spool_read(struct fpd_push *p, struct push_node *pn, const struct spooled *s,
	   struct fp_text *body)
{
	const char *why = NULL;
	struct stat st;
	char buf[65536];
	ssize_t n;
	int fd, rc = 0;

	fd = fpd_fs_open_file(pn->spool_fd, s->name, O_RDONLY, &p->c.trust, &st, &why);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > PROFILE_MAX) {
		close(fd);
		return -EFBIG;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		fp_text_put(body, buf, (size_t)n);
	}
	close(fd);
	return rc;
}

/* The /ingest request of a pprof profile: the URL's query and the form. */
static curl_mime *
pyroscope_request(struct fpd_push *p, struct push_node *pn,
		  const struct spooled *s, const struct fp_text *body,
		  struct fp_text *url)
{
	uint64_t from_us, until_us, rate_mhz;
	char num[32];
	curl_mime *mime;
	curl_mimepart *part;
	bool otlp;

	spool_name_parse(s->name, &from_us, &until_us, &rate_mhz, &otlp);
	fp_text_puts(url, p->ingest_url);
	fp_text_puts(url, "?name=");
	fp_text_puts(url, pn->name_param);
	/* whole seconds that hold every sample */
	snprintf(num, sizeof(num), "&from=%" PRIu64, from_us / 1000000);
	fp_text_puts(url, num);
	snprintf(num, sizeof(num), "&until=%" PRIu64, (until_us + 999999) / 1000000);
	fp_text_puts(url, num);
	fp_text_puts(url, "&format=pprof");
	snprintf(num, sizeof(num), "&sampleRate=%" PRIu64,
		 rate_mhz >= 1000 ? (rate_mhz + 500) / 1000 : 1);
	fp_text_puts(url, num);
	fp_text_puts(url, "&spyName=" SPY_NAME);
	fp_text_putc(url, '\0');

	mime = curl_mime_init(p->curl);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "profile");
	curl_mime_filename(part, "profile.pprof");
	curl_mime_type(part, "application/octet-stream");
	curl_mime_data(part, body->buf ? body->buf : "", body->len);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "sample_type_config");
	curl_mime_filename(part, "sample_type_config.json");
	curl_mime_type(part, "application/json");
	curl_mime_data(part, sample_type_config, CURL_ZERO_TERMINATED);
	return mime;
}

/* Send the node's oldest profile, into *@a. @return 0, or a negative
 * errno when the spooled profile cannot be read (*@err says why); no
 * answer is a->code 0 (*@err says why). */
static int
send_oldest(struct fpd_push *p, struct push_node *pn, struct answer *a,
	    const char **err)
{
	const struct spooled *s = &pn->spool[0];
	struct fp_text body = { 0 }, url = { 0 };
	curl_mime *mime = NULL;
	curl_off_t retry_after = 0;
	char *ctype = NULL;
	CURLcode cc;
	int rc;

	*err = NULL;
	rc = spool_read(p, pn, s, &body);
	if (rc < 0) {
		*err = strerror(-rc);
		fp_text_free(&body);
		return rc;
	}
	curl_easy_reset(p->curl);
	if (s->otlp) {
		/* the spooled bytes are the gzip'd request, sent as they are */
		curl_easy_setopt(p->curl, CURLOPT_URL, p->otlp_url);
		curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, body.buf ? body.buf : "");
		curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)body.len);
		curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->otlp_headers);
	} else {
		mime = pyroscope_request(p, pn, s, &body, &url);
		curl_easy_setopt(p->curl, CURLOPT_URL, url.buf);
		curl_easy_setopt(p->curl, CURLOPT_MIMEPOST, mime);
		curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->headers);
	}
	curl_easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(p->curl, CURLOPT_USERAGENT, "flame_profd/" FP_VERSION);
	curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->curl, CURLOPT_TIMEOUT_MS,
			 (long)(p->c.timeout_us / 1000));
	curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(p->c.timeout_us / 1000));
	curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, &a->body);
	curl_easy_setopt(p->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(p->curl, CURLOPT_XFERINFOFUNCTION, progress);
	curl_easy_setopt(p->curl, CURLOPT_XFERINFODATA, p);
	cc = curl_easy_perform(p->curl);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &a->code);
		/* delay-seconds or an HTTP-date, as seconds from now */
		if (curl_easy_getinfo(p->curl, CURLINFO_RETRY_AFTER, &retry_after) ==
			    CURLE_OK && retry_after > 0)
			a->retry_after_us = (uint64_t)retry_after * 1000000 >
						    RETRY_AFTER_MAX_US ?
					    RETRY_AFTER_MAX_US :
					    (uint64_t)retry_after * 1000000;
		if (curl_easy_getinfo(p->curl, CURLINFO_CONTENT_TYPE, &ctype) ==
			    CURLE_OK && ctype)
			a->protobuf = strncmp(ctype, "application/x-protobuf", 22) == 0 ||
				      strncmp(ctype, "application/protobuf", 20) == 0;
	} else {
		*err = curl_easy_strerror(cc);
	}
	curl_mime_free(mime);
	fp_text_free(&body);
	fp_text_free(&url);
	return 0;
}

/* Full jitter on a doubling delay: nodes that lost the server together
 * do not come back together. */
static uint64_t
backoff_us(unsigned failures)
{
	uint64_t d = BACKOFF_MIN_US;
	uint32_t r = 0;

	for (unsigned i = 1; i < failures && d < BACKOFF_MAX_US; i++)
		d *= 2;
	if (d > BACKOFF_MAX_US)
		d = BACKOFF_MAX_US;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)fpd_now_mono_us();
	return d / 2 + (uint64_t)r % (d / 2 + 1);
}

/*
 * Whether a request that got @code (not 2xx) is sent again. Of the 4xx
 * and 5xx, OTLP/HTTP retries 429, 502, 503 and 504 only: the rest "MUST
 * NOT be retried"; /ingest every 5xx, 408 and 429. No answer (0), and
 * what neither is, is retried.
 */
static bool
retryable(bool otlp, long code)
{
	if (code < 400 || code > 599)
		return true;
	if (otlp)
		return code == 429 || code == 502 || code == 503 || code == 504;
	return code >= 500 || code == 408 || code == 429;
}

/* One attempt at the node's oldest profile. @return true if sent (or
 * dropped as refused), false if it stays for a retry. */
static bool
send_one(struct fpd_push *p, struct push_node *pn)
{
	struct answer a = { 0 };
	bool otlp = pn->spool[0].otlp, done = true;
	const char *err;
	uint64_t wait;
	char *why;

	if (send_oldest(p, pn, &a, &err) < 0) {
		/* the spooled file is gone or unreadable: nothing to retry */
		fpd_warn("--push [%s]: cannot read %s from the spool: %s; dropped",
			 pn->node, pn->spool[0].name, err);
		spool_forget(pn, 0);
		pthread_mutex_lock(&p->mu);
		p->stats.dropped++;
		pthread_mutex_unlock(&p->mu);
		goto out;
	}
	if (a.code >= 200 && a.code < 300) {
		if (otlp)
			otlp_partial(pn, &pn->spool[0], &a);
		fpd_fs_unlink_made(pn->spool_fd, pn->spool[0].name,
				   &pn->spool[0].made);
		spool_forget(pn, 0);
		if (pn->failures)
			fpd_info("--push [%s]: the server takes profiles again; %zu in the spool",
				 pn->node, pn->nspool);
		pn->failures = 0;
		pn->next_try_us = 0;
		pthread_mutex_lock(&p->mu);
		p->stats.sent++;
		pthread_mutex_unlock(&p->mu);
		goto out;
	}
	if (!retryable(otlp, a.code)) {
		/* the server will never take it: sending it again only
		 * holds up the ones behind it */
		why = otlp ? otlp_error(&a) : NULL;
		fpd_warn("--push [%s]: the server refused %s with HTTP %ld%s%s; dropped",
			 pn->node, pn->spool[0].name, a.code, why ? ": " : "",
			 why ? why : "");
		free(why);
		fpd_fs_unlink_made(pn->spool_fd, pn->spool[0].name,
				   &pn->spool[0].made);
		spool_forget(pn, 0);
		pthread_mutex_lock(&p->mu);
		p->stats.rejected++;
		pthread_mutex_unlock(&p->mu);
		goto out;
	}
	done = false;
	pn->failures++;
	wait = backoff_us(pn->failures);
	/* a server that says when to come back (429, 503) is taken at its
	 * word, up to RETRY_AFTER_MAX_US */
	if (a.retry_after_us > wait)
		wait = a.retry_after_us;
	pn->next_try_us = fpd_now_mono_us() + wait;
	/* given up at the stop: the spool says the rest */
	if (pn->failures == 1 && !atomic_load(&p->stop_deadline_us)) {
		if (a.code)
			fpd_warn("--push [%s]: the server answered HTTP %ld; retrying with backoff, profiles kept in the spool",
				 pn->node, a.code);
		else
			fpd_warn("--push [%s]: no answer from the server (%s); retrying with backoff, profiles kept in the spool",
				 pn->node, err);
	}
	pthread_mutex_lock(&p->mu);
	p->stats.failed++;
	pthread_mutex_unlock(&p->mu);
out:
	fp_text_free(&a.body);
	return done;
}

/* The node whose oldest profile is due first, and when (under mu). */
static struct push_node *
next_due(struct fpd_push *p, uint64_t *when)
{
	struct push_node *best = NULL;

	for (size_t i = 0; i < p->nnodes; i++) {
		struct push_node *pn = p->nodes[i];

		if (!pn->spool_tried || pn->nspool == 0)
			continue;
		if (!best || pn->next_try_us < best->next_try_us)
			best = pn;
	}
	if (best)
		*when = best->next_try_us;
	return best;
}

static void
wait_until(struct fpd_push *p, uint64_t mono_us)
{
	struct timespec ts;
	uint64_t now = fpd_now_mono_us(), left = mono_us > now ? mono_us - now : 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(left / 1000000);
	ts.tv_nsec += (long)(left % 1000000) * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

/* Stopping: every node's spool once more, oldest first, until a request
 * fails or the stop's deadline (FINAL_ROUND_US after it) is past. */
static void
final_round(struct fpd_push *p)
{
	uint64_t deadline = atomic_load(&p->stop_deadline_us);

	for (size_t i = 0; i < p->nnodes; i++) {
		struct push_node *pn = p->nodes[i];

		if (!pn->spool_tried)
			spool_open(p, pn);
		while (pn->nspool && fpd_now_mono_us() < deadline) {
			if (!send_one(p, pn))
				break;
		}
		if (pn->nspool)
			fpd_info("--push [%s]: %zu profiles stay in the spool for the next run",
				 pn->node, pn->nspool);
	}
}

static void *
run(void *data)
{
	struct fpd_push *p = data;

	/* top -H and /proc/PID/task show the pusher's CPU apart */
	pthread_setname_np(pthread_self(), "fp-push");
	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct push_node *pn;
		uint64_t when = 0;

		/* stopping: what is still queued once the stop's deadline is
		 * past stays in the directory, after the mark, for the next
		 * run's backfill() */
		if (p->qlen && !(p->stopping &&
				 fpd_now_mono_us() >= atomic_load(&p->stop_deadline_us))) {
			struct job j = p->queue[p->qhead];

			p->qhead = (p->qhead + 1) % QUEUE_MAX;
			p->qlen--;
			pthread_mutex_unlock(&p->mu);
			spool_job(p, &j);
			pthread_mutex_lock(&p->mu);
			continue;
		}
		if (p->stopping)
			break;
		/* a node attached since: its spool is read, and sent first */
		for (size_t i = 0; i < p->nnodes; i++) {
			if (!p->nodes[i]->spool_tried) {
				pn = p->nodes[i];
				pthread_mutex_unlock(&p->mu);
				spool_open(p, pn);
				pthread_mutex_lock(&p->mu);
			}
		}
		if (scan_behind(p))
			continue;
		pn = next_due(p, &when);
		if (pn && when <= fpd_now_mono_us()) {
			pthread_mutex_unlock(&p->mu);
			send_one(p, pn);
			pthread_mutex_lock(&p->mu);
			continue;
		}
		if (pn)
			wait_until(p, when);
		else
			pthread_cond_wait(&p->cv, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	final_round(p);
	return NULL;
}

int
fpd_push_start(struct fpd_push *p)
{
	sigset_t all, old;
	int rc;

	if (p->started)
		return 0;
	/* signals stay the loop's (signalfd) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&p->thread, NULL, run, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		fpd_err("--push: cannot start its thread: %s; nothing is pushed",
			strerror(-rc));
		return rc;
	}
	p->started = true;
	return 0;
}

void
fpd_push_stats(struct fpd_push *p, struct fpd_push_stats *s)
{
	pthread_mutex_lock(&p->mu);
	*s = p->stats;
	pthread_mutex_unlock(&p->mu);
}

void
fpd_push_stop(struct fpd_push *p)
{
	if (!p->started)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	atomic_store(&p->stop_deadline_us, fpd_now_mono_us() +
		     (p->c.timeout_us < FINAL_ROUND_US ? p->c.timeout_us : FINAL_ROUND_US));
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	p->started = false;
}

void
fpd_push_destroy(struct fpd_push *p)
{
	if (!p)
		return;
	fpd_push_stop(p);
	for (size_t i = 0; i < p->nnodes; i++) {
		struct push_node *pn = p->nodes[i];

		if (pn->node_dirfd >= 0)
			close(pn->node_dirfd);
		if (pn->spool_fd >= 0)
			close(pn->spool_fd);
		free(pn->spool);
		free(pn->file_node);
		free(pn->node);
		free(pn->name_param);
		free(pn->service);
		free(pn->host);
		free(pn);
	}
	free(p->nodes);
	if (p->curl)
		curl_easy_cleanup(p->curl);
	curl_slist_free_all(p->headers);
	curl_global_cleanup();
	free(p->ingest_url);
	free(p->otlp_url);
	curl_slist_free_all(p->otlp_headers);
	free((char *)p->c.url);
	free((char *)p->c.header_file);
	free((char *)p->c.service);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}
