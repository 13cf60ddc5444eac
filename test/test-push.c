/*
 * flame_profd — unit tests: --push (daemon/push.c) against a small HTTP
 * server in the test, answering the status each case sets: files the
 * output finishes are spooled and sent, removed on 2xx, dropped on a
 * 4xx, retried after a 5xx; the spool keeps its bound and an earlier
 * run's profiles are sent by the next, as are files finished and never
 * spooled; the header file and the URL are checked before anything is
 * sent.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp-test.h"
#include "options.h"
#include "output.h"
#include "push.h"
#include "recorder.h"
#include "util.h"

#define NODE "a@b"

/* --- a server that answers every request with one status ------------- */

struct server {
	int fd;
	unsigned short port;
	pthread_t thread;
	atomic_int status;		/* what it answers */
	atomic_int requests;		/* requests answered */
	pthread_mutex_t mu;
	char first_line[512];		/* of the last request */
	char headers[2048];		/* of the last request */
};

/* Read one request (headers, then Content-Length bytes) from @c. */
static void
serve_one(struct server *s, int c)
{
	char buf[65536], line[512];
	size_t len = 0, body = 0, have;
	char *end = NULL, *cl;
	ssize_t n;

	while (!end && len < sizeof(buf) - 1) {
		n = read(c, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (!end)
		return;
	cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl)
		body = strtoul(cl + 17, NULL, 10);
	have = len - (size_t)(end + 4 - buf);
	body = body > have ? body - have : 0;
	pthread_mutex_lock(&s->mu);
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(buf, "\r"), buf);
	snprintf(s->first_line, sizeof(s->first_line), "%s", line);
	snprintf(s->headers, sizeof(s->headers), "%.*s", (int)(end - buf), buf);
	pthread_mutex_unlock(&s->mu);
	while (body > 0) {
		n = read(c, buf, body < sizeof(buf) ? body : sizeof(buf));
		if (n <= 0)
			return;
		body -= (size_t)n;
	}
	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		     atomic_load(&s->status));
	if (write(c, buf, (size_t)n) != n)
		return;
	atomic_fetch_add(&s->requests, 1);
}

static void *
serve(void *data)
{
	struct server *s = data;
	int c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		serve_one(s, c);
		close(c);
	}
	return NULL;
}

/* A port nothing listens on (bound, then closed). */
static unsigned short
closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	fp_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	fp_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void
server_start(struct server *s, int status)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	atomic_store(&s->status, status);
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	fp_assert_int_eq(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	fp_assert_int_eq(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
	fp_assert_int_eq(listen(s->fd, 16), 0);
	s->port = ntohs(a.sin_port);
	fp_assert_int_eq(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void
server_stop(struct server *s)
{
	shutdown(s->fd, SHUT_RDWR);
	close(s->fd);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->mu);
}

/* --- the node's output ------------------------------------------------ */

struct fixture {
	char dir[64];
	char spool[128];
	char url[128];
	struct fpd_options o;
	struct fpd_output_config oc;
	struct fpd_recorder *rec;
	struct fpd_output *out;
	struct fpd_push_config pc;
	struct fpd_push *push;
	uint64_t t_us;
};

static void
fixture_init(struct fixture *fx, unsigned short port)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/fp-push-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(fx->dir));
	snprintf(fx->spool, sizeof(fx->spool), "%s/%s/%s", fx->dir, NODE,
		 FPD_PUSH_SPOOL_DIR);
	snprintf(fx->url, sizeof(fx->url), "http://127.0.0.1:%u/", port);
	fx->oc = (struct fpd_output_config){
		.dir = fx->dir, .node = NODE, .header = "# test\n",
		.options_json = "{}", .compress = FPD_COMPRESS_ZSTD, .level = 3,
		.rotate_us = 3600000000u, .file_mode = 0600, .dir_mode = 0700,
		.uid = geteuid(), .gid = getegid(),
	};
	fx->pc = (struct fpd_push_config){
		.url = fx->url, .spool_max = 64u << 20, .timeout_us = 2000000,
		.trust = { geteuid(), getegid() },
	};
	fx->t_us = 1795000000000000ull;
}

/* The output and its recorder, without --push. */
static void
fixture_open_files(struct fixture *fx)
{
	fp_assert_int_eq(fpd_output_new(&fx->oc, &fx->out), 0);
	fx->rec = fpd_recorder_new(&fx->o, fx->out);
}

/* The output, its recorder and a pusher attached to it, started. */
static void
fixture_open(struct fixture *fx)
{
	fixture_open_files(fx);
	fp_assert_int_eq(fpd_push_new(&fx->pc, &fx->push), 0);
	fpd_push_attach(fx->push, fx->out, NODE);
	fp_assert_int_eq(fpd_push_start(fx->push), 0);
}

/* The recorder (its last file finished), then the pusher. */
static void
fixture_close(struct fixture *fx)
{
	fpd_recorder_destroy(fx->rec);
	fx->rec = NULL;
	fpd_push_destroy(fx->push);
	fx->push = NULL;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void
fixture_destroy(struct fixture *fx)
{
	fixture_close(fx);
	nftw(fx->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A file of @n samples, finished. */
static void
write_file(struct fixture *fx, unsigned n)
{
	struct fp_frame frame = { .module = "m", .function = "f", .arity = 1 };

	for (unsigned i = 0; i < n; i++) {
		struct fp_sample smp = {
			.status = i % 2 ? FP_STATUS_WAITING : FP_STATUS_RUNNING,
			.pid = { 100 + i, 0 }, .time_us = fx->t_us,
			.frames = &frame, .nframes = 1,
		};

		fx->t_us += 100000;
		fp_assert_int_eq(fpd_recorder_write(fx->rec, &smp, FPD_RECORD_NODE), 0);
	}
	fp_assert_int_eq(fpd_output_finish(fx->out), 0);
	fx->t_us += 1000000;
}

static size_t
spooled(const struct fixture *fx)
{
	DIR *d = opendir(fx->spool);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += strstr(de->d_name, ".pprof.gz") != NULL;
	closedir(d);
	return n;
}

/* Wait (up to 15 s) until the stats' field at @off reaches @want. */
static uint64_t
wait_stat(struct fixture *fx, size_t off, uint64_t want)
{
	struct fpd_push_stats s;
	uint64_t v = 0;

	for (int i = 0; i < 1500; i++) {
		fpd_push_stats(fx->push, &s);
		memcpy(&v, (char *)&s + off, sizeof(v));
		if (v >= want)
			break;
		usleep(10000);
	}
	return v;
}

#define WAIT(fx, field, want) \
	wait_stat(fx, offsetof(struct fpd_push_stats, field), want)

/* --- the cases -------------------------------------------------------- */

START_TEST(sent_then_removed)
{
	struct server srv;
	struct fixture fx;
	char line[512];

	server_start(&srv, 200);
	fixture_init(&fx, srv.port);
	fixture_open(&fx);
	write_file(&fx, 5);
	write_file(&fx, 3);
	write_file(&fx, 7);
	fp_assert_int_eq(WAIT(&fx, sent, 3), 3);
	fp_assert_int_eq(spooled(&fx), 0);
	fp_assert_int_eq(atomic_load(&srv.requests), 3);
	pthread_mutex_lock(&srv.mu);
	snprintf(line, sizeof(line), "%s", srv.first_line);
	pthread_mutex_unlock(&srv.mu);
	/* the third file: its first and last sample (at +2.8 s and +3.4 s)
	 * in whole seconds that hold them; no rate in the test's header */
	fp_assert_str_eq(line, "POST /ingest?name=a%7Bnode%3Da%40b%7D&from=1795000002"
			 "&until=1795000004&format=pprof&sampleRate=1&spyName=flame_profd"
			 " HTTP/1.1");
	fixture_destroy(&fx);
	server_stop(&srv);
}
END_TEST

START_TEST(refused_dropped)
{
	struct server srv;
	struct fixture fx;
	struct fpd_push_stats s;

	server_start(&srv, 400);
	fixture_init(&fx, srv.port);
	fixture_open(&fx);
	write_file(&fx, 2);
	write_file(&fx, 2);
	fp_assert_int_eq(WAIT(&fx, rejected, 2), 2);
	fpd_push_stats(fx.push, &s);
	fp_assert_int_eq(s.sent, 0);
	fp_assert_int_eq(s.failed, 0);
	fp_assert_int_eq(spooled(&fx), 0);
	fixture_destroy(&fx);
	server_stop(&srv);
}
END_TEST

START_TEST(retried_after_5xx)
{
	struct server srv;
	struct fixture fx;

	server_start(&srv, 503);
	fixture_init(&fx, srv.port);
	fixture_open(&fx);
	write_file(&fx, 4);
	fp_assert_int_eq(WAIT(&fx, failed, 1), 1);
	fp_assert_int_eq(spooled(&fx), 1);
	atomic_store(&srv.status, 204);
	fp_assert_int_eq(WAIT(&fx, sent, 1), 1);
	fp_assert_int_eq(spooled(&fx), 0);
	fixture_destroy(&fx);
	server_stop(&srv);
}
END_TEST

/* No server: the spool keeps its bound (here the newest profile only),
 * and the next run, with a server, sends what it kept. */
START_TEST(spool_bounded_then_sent_next_run)
{
	struct server srv;
	struct fixture fx;
	struct fpd_push_stats s;

	fixture_init(&fx, closed_port());
	fx.pc.spool_max = 1;
	fx.pc.timeout_us = 500000;
	fixture_open(&fx);
	for (int i = 0; i < 4; i++)
		write_file(&fx, 3);
	fp_assert_int_eq(WAIT(&fx, spooled, 4), 4);
	fpd_push_stop(fx.push);
	fpd_push_stats(fx.push, &s);
	fp_assert_int_eq(s.dropped, 3);
	fp_assert_int_eq(s.sent, 0);
	fp_assert_int_eq(spooled(&fx), 1);
	fixture_close(&fx);

	server_start(&srv, 200);
	snprintf(fx.url, sizeof(fx.url), "http://127.0.0.1:%u", srv.port);
	fx.pc.spool_max = 64u << 20;
	fixture_open(&fx);
	fp_assert_int_eq(WAIT(&fx, sent, 1), 1);
	fp_assert_int_eq(spooled(&fx), 0);
	fixture_destroy(&fx);
	server_stop(&srv);
}
END_TEST

/* A file finished and never spooled (a run killed in between, or one
 * without --push) is taken up by the next run; files spooled before are
 * not taken up again. */
START_TEST(finished_unspooled_taken_up)
{
	struct server srv;
	struct fixture fx;
	struct fpd_push_stats s;

	fixture_init(&fx, closed_port());
	fx.pc.timeout_us = 500000;
	fixture_open(&fx);
	write_file(&fx, 3);
	fp_assert_int_eq(WAIT(&fx, spooled, 1), 1);
	fixture_close(&fx);
	fixture_open_files(&fx);
	write_file(&fx, 2);
	fixture_close(&fx);
	fp_assert_int_eq(spooled(&fx), 1);

	server_start(&srv, 200);
	snprintf(fx.url, sizeof(fx.url), "http://127.0.0.1:%u", srv.port);
	fixture_open(&fx);
	fpd_push_stats(fx.push, &s);
	fp_assert_int_eq(s.queued, 1);
	fp_assert_int_eq(WAIT(&fx, sent, 2), 2);
	fp_assert_int_eq(spooled(&fx), 0);
	fixture_close(&fx);
	fixture_open(&fx);
	fpd_push_stats(fx.push, &s);
	fp_assert_int_eq(s.queued, 0);
	fixture_destroy(&fx);
	fp_assert_int_eq(atomic_load(&srv.requests), 2);
	server_stop(&srv);
}
END_TEST

/* Several nodes, each with more files finished and never spooled than
 * one node's share of the shared queue: none is lost, none sent twice. */
#define MANY_NODES 3
#define MANY_FILES 100

static void
many_open(struct fixture *fx, int i, const char *node)
{
	fx[i] = fx[0];
	fx[i].oc.node = node;
	fx[i].o = (struct fpd_options){ 0 };
	fixture_open_files(&fx[i]);
}

START_TEST(many_nodes_none_lost)
{
	static const char *const nodes[MANY_NODES] = { "n1@h", "n2@h", "n3@h" };
	struct fixture fx[MANY_NODES];
	struct fpd_push_stats s;
	struct fpd_push *push;
	struct server srv;

	fixture_init(&fx[0], closed_port());
	fx[0].pc.timeout_us = 500000;
	/* a first run with --push: one file each spooled, the marks made */
	fp_assert_int_eq(fpd_push_new(&fx[0].pc, &push), 0);
	for (int i = 0; i < MANY_NODES; i++) {
		many_open(fx, i, nodes[i]);
		fpd_push_attach(push, fx[i].out, nodes[i]);
	}
	fp_assert_int_eq(fpd_push_start(push), 0);
	for (int i = 0; i < MANY_NODES; i++)
		write_file(&fx[i], 2);
	fx[0].push = push;
	fp_assert_int_eq(WAIT(&fx[0], spooled, MANY_NODES), MANY_NODES);
	for (int i = 0; i < MANY_NODES; i++) {
		fpd_recorder_destroy(fx[i].rec);
		fx[i].rec = NULL;
	}
	fpd_push_destroy(push);
	/* a run killed before it spooled anything */
	for (int i = 0; i < MANY_NODES; i++) {
		fixture_open_files(&fx[i]);
		for (int k = 0; k < MANY_FILES; k++)
			write_file(&fx[i], 1);
		fpd_recorder_destroy(fx[i].rec);
		fx[i].rec = NULL;
	}

	server_start(&srv, 200);
	snprintf(fx[0].url, sizeof(fx[0].url), "http://127.0.0.1:%u", srv.port);
	fp_assert_int_eq(fpd_push_new(&fx[0].pc, &push), 0);
	for (int i = 0; i < MANY_NODES; i++) {
		fixture_open_files(&fx[i]);
		fpd_push_attach(push, fx[i].out, nodes[i]);
	}
	fp_assert_int_eq(fpd_push_start(push), 0);
	fx[0].push = push;
	fp_assert_int_eq(WAIT(&fx[0], sent, MANY_NODES * (MANY_FILES + 1)),
			 MANY_NODES * (MANY_FILES + 1));
	for (int i = 0; i < MANY_NODES; i++) {
		fpd_recorder_destroy(fx[i].rec);
		fx[i].rec = NULL;
	}
	fpd_push_stop(push);
	fpd_push_stats(push, &s);
	fp_assert_int_eq(s.dropped, 0);
	fp_assert_int_eq(s.sent, MANY_NODES * (MANY_FILES + 1));
	fp_assert_int_eq(atomic_load(&srv.requests), MANY_NODES * (MANY_FILES + 1));
	fixture_destroy(&fx[0]);
	server_stop(&srv);
}
END_TEST

/* A stop converts queued files for a second at most: here the one
 * request in flight, to a server that never answers, holds the thread
 * past it, so the stop spools none of them; the next run takes them all
 * up, none lost and none sent twice. */
START_TEST(stop_leaves_rest_for_next_run)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	struct fpd_push_stats s;
	struct server srv;
	struct fixture fx;
	int mute = socket(AF_INET, SOCK_STREAM, 0);

	/* connections complete in the backlog and are never answered */
	fp_assert_int_eq(bind(mute, (struct sockaddr *)&a, sizeof(a)), 0);
	fp_assert_int_eq(getsockname(mute, (struct sockaddr *)&a, &al), 0);
	fp_assert_int_eq(listen(mute, 16), 0);
	fixture_init(&fx, ntohs(a.sin_port));
	fx.pc.timeout_us = 30000000;
	fixture_open(&fx);
	write_file(&fx, 2);
	fp_assert_int_eq(WAIT(&fx, spooled, 1), 1);
	for (int i = 0; i < MANY_FILES; i++)
		write_file(&fx, 1);
	fpd_recorder_destroy(fx.rec);
	fx.rec = NULL;
	fpd_push_stop(fx.push);
	fpd_push_stats(fx.push, &s);
	fp_assert_int_eq(s.spooled, 1);
	fixture_close(&fx);
	close(mute);

	server_start(&srv, 200);
	snprintf(fx.url, sizeof(fx.url), "http://127.0.0.1:%u", srv.port);
	fx.pc.timeout_us = 2000000;
	fixture_open(&fx);
	fp_assert_int_eq(WAIT(&fx, sent, MANY_FILES + 1), MANY_FILES + 1);
	fixture_destroy(&fx);
	fp_assert_int_eq(atomic_load(&srv.requests), MANY_FILES + 1);
	server_stop(&srv);
}
END_TEST

/* A node whose files find the queue full (the thread held by a request
 * to a server that does not answer) falls behind: its files are taken up
 * from its directory later, a share at a time, none lost. */
START_TEST(behind_taken_up)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	struct fpd_push_stats s;
	struct fixture fx;
	int mute = socket(AF_INET, SOCK_STREAM, 0);
	unsigned files = 400;

	fp_assert_int_eq(bind(mute, (struct sockaddr *)&a, sizeof(a)), 0);
	fp_assert_int_eq(getsockname(mute, (struct sockaddr *)&a, &al), 0);
	fp_assert_int_eq(listen(mute, 16), 0);
	fixture_init(&fx, ntohs(a.sin_port));
	fx.pc.timeout_us = 3000000;
	fixture_open(&fx);
	write_file(&fx, 2);
	fp_assert_int_eq(WAIT(&fx, spooled, 1), 1);
	for (unsigned i = 0; i < files; i++)
		write_file(&fx, 1);
	fp_assert_int_eq(WAIT(&fx, spooled, files + 1), files + 1);
	fpd_push_stats(fx.push, &s);
	fp_assert_int_eq(s.dropped, 0);
	fp_assert_int_eq(s.spooled, files + 1);
	fixture_destroy(&fx);
	close(mute);
}
END_TEST

static void
write_header_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	fp_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	fp_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(header_file)
{
	struct server srv;
	struct fixture fx;
	struct fpd_push *p;
	char path[128], headers[2048];

	server_start(&srv, 200);
	fixture_init(&fx, srv.port);
	snprintf(path, sizeof(path), "%s/headers", fx.dir);
	fx.pc.header_file = path;

	write_header_file(path, "X-Scope-OrgID: t1\nAuthorization Bearer x\n", 0600);
	fp_assert_int_eq(fpd_push_new(&fx.pc, &p), -EBADMSG);
	write_header_file(path, "X-Scope-OrgID: t1\n", 0644);
	fp_assert_int_eq(fpd_push_new(&fx.pc, &p), -EPERM);
	write_header_file(path, "# tenant\n\nX-Scope-OrgID: t1\r\nAuthorization: Bearer x\n",
			  0600);
	fixture_open(&fx);
	write_file(&fx, 1);
	fp_assert_int_eq(WAIT(&fx, sent, 1), 1);
	pthread_mutex_lock(&srv.mu);
	snprintf(headers, sizeof(headers), "%s", srv.headers);
	pthread_mutex_unlock(&srv.mu);
	fp_assert_ptr_nonnull(strstr(headers, "\r\nX-Scope-OrgID: t1\r\n"));
	fp_assert_ptr_nonnull(strstr(headers, "\r\nAuthorization: Bearer x\r\n"));
	fp_assert_ptr_nonnull(strstr(headers, "\r\nContent-Type: multipart/form-data; boundary="));
	fixture_destroy(&fx);
	server_stop(&srv);
}
END_TEST

/* The URL is PREFIX, the server's port, SUFFIX. */
static const struct {
	const char *prefix, *suffix;
	int rc;
	const char *path;	/* the request's, before '?' */
} urls[] = {
	{ "http://127.0.0.1:", "", 0, "/ingest" },
	{ "http://127.0.0.1:", "/pyroscope/", 0, "/pyroscope/ingest" },
	{ "http://127.0.0.1:", "/ingest", 0, "/ingest" },
	{ "http://127.0.0.1:", "/ingest?x=1", -EINVAL, NULL },
	{ "ftp://127.0.0.1:", "/", -EINVAL, NULL },
	{ "http://[::1:", "/", -EINVAL, NULL },
};

START_TEST(url)
{
	struct server srv;
	struct fixture fx;
	struct fpd_push *p = NULL;
	char want[128], line[512];

	server_start(&srv, 200);
	fixture_init(&fx, srv.port);
	snprintf(fx.url, sizeof(fx.url), "%s%u%s", urls[_i].prefix, srv.port,
		 urls[_i].suffix);
	if (urls[_i].rc) {
		fp_assert_int_eq(fpd_push_new(&fx.pc, &p), urls[_i].rc);
		fp_assert_ptr_null(p);
	} else {
		fixture_open(&fx);
		write_file(&fx, 1);
		fp_assert_int_eq(WAIT(&fx, sent, 1), 1);
		pthread_mutex_lock(&srv.mu);
		snprintf(line, sizeof(line), "%s", srv.first_line);
		pthread_mutex_unlock(&srv.mu);
		snprintf(want, sizeof(want), "POST %s?", urls[_i].path);
		fp_assert_int_eq(strncmp(line, want, strlen(want)), 0);
	}
	fixture_destroy(&fx);
	server_stop(&srv);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("push");
	TCase *tc = tcase_create("sending");

	/* Each case waits up to 15 s for the pusher's thread (wait_stat()):
	 * on a loaded host check's 4 s default can end a case that would
	 * have passed. */

	tcase_add_test(tc, sent_then_removed);
	tcase_add_test(tc, refused_dropped);
	tcase_add_test(tc, retried_after_5xx);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("spool");
	tcase_add_test(tc, spool_bounded_then_sent_next_run);
	tcase_add_test(tc, finished_unspooled_taken_up);
	tcase_add_test(tc, many_nodes_none_lost);
	tcase_add_test(tc, stop_leaves_rest_for_next_run);
	tcase_add_test(tc, behind_taken_up);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("configuration");
	tcase_add_test(tc, header_file);
	tcase_add_loop_test(tc, url, 0, sizeof(urls) / sizeof(urls[0]));
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
