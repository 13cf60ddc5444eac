/*
 * flame_prof — top --follow: the live view of a node's directory while
 * flame_profd writes it.
 *
 * flame_profd writes a file under its hidden .NAME.partial name in whole
 * segments, about one a second, each a complete zstd frame, gzip member
 * or run of whole plain samples (docs/FORMAT.md, "Segments"), and renames
 * it when it is finished. The view keeps the partial file open and reads
 * the segments written since the last look, whichever the compression;
 * the rename leaves the open file the same, so it is read to its end and
 * the next partial file followed. Each segment is read once: the view
 * costs what writing cost, not a re-read of the file every second.
 *
 * In a terminal it draws on the alternate screen with the cursor hidden
 * and reads keys unbuffered; the terminal is restored on every way out
 * (q, Ctrl-C, SIGINT, SIGTERM, SIGHUP, SIGQUIT, an error, a crash; on
 * SIGTSTP it is restored and taken again on SIGCONT). Elsewhere it
 * prints a plain snapshot every interval, for scripts.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp/perf-file.h"
#include "util-escape.h"
#include "util-mem.h"

/* No new sample for this long (or three intervals, if longer): the
 * daemon is not writing. It writes a segment about once a second. */
#define STALE_US (5 * 1000000ULL)

struct follow {
	const struct fpp_options *o;
	const char *dir;		/* as given */
	char *node_dir;			/* the node's directory, once found */
	struct fpp_window *win;
	enum fpp_view view;
	bool by_total;

	/* the file being read */
	int fd;
	char *name;			/* its name in node_dir */
	bool partial;
	enum fp_perf_compress kind;
	off_t good;			/* bytes of whole segments read */
	uint64_t last_ms;		/* the newest file's time read or followed */

	/* what the segments said */
	struct fp_text sampler;		/* the last interval note, shown */
	struct fp_text event;		/* the last other note, shown */
	uint64_t samples_read;
	uint64_t new_at;		/* monotonic µs of the last new sample */
	uint64_t started_at;

	/* per-sample scratch */
	struct fp_text proc, names;
	const char **frames;
	size_t frames_cap;
	size_t *offs;
	size_t offs_cap;

	int ex;				/* FPP_EXIT_OK until an error */
	char err[1200];

	/* output */
	bool tty;			/* stdout is a terminal: the screen */
	unsigned rows, cols;
	unsigned drawn;			/* lines of this frame so far */
	struct fp_text out, line;
};

static uint64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- the terminal ---- */

static struct termios saved_tio;
static volatile sig_atomic_t tio_saved, screen_on;

static void
write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Async-signal-safe: called from the crash handler too. */
static void
term_restore(void)
{
	static const char leave[] = "\033[?25h\033[?1049l";

	if (screen_on) {
		write_all(STDOUT_FILENO, leave, sizeof(leave) - 1);
		screen_on = 0;
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
		tio_saved = 0;
	}
}

static void
on_crash(int sig)
{
	term_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
term_enter(void)
{
	static const char enter[] = "\033[?1049h\033[?25l\033[H\033[2J";
	struct termios raw;

	/* keys one at a time, unechoed; Ctrl-C and Ctrl-Z arrive as keys */
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		raw = saved_tio;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
		raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
			tio_saved = 1;
	}
	write_all(STDOUT_FILENO, enter, sizeof(enter) - 1);
	screen_on = 1;
}

static void
term_size(struct follow *f)
{
	struct winsize ws;

	f->rows = 24;
	f->cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col > 1) {
		f->rows = ws.ws_row;
		f->cols = ws.ws_col;
	}
}

/* ---- shown text ---- */

/*
 * A name as written (an atom, an MFA): its \xHH escapes are the file's
 * and stay; anything else a terminal would act on is escaped. The
 * reader checked the grammar, so this only guards the rule.
 */
static void
put_written(struct fp_text *t, const char *s)
{
	for (;;) {
		size_t n = strcspn(s, "\\");

		fp_text_put_escaped(t, s, n, NULL);
		if (!s[n])
			return;
		fp_text_putc(t, '\\');
		s += n + 1;
	}
}

/* @t's line cut to @cols columns (a character of U+0080 and above
 * takes one), appended to @out. */
static void
put_clipped(struct fp_text *out, const struct fp_text *t, unsigned cols)
{
	const unsigned char *p = (const unsigned char *)t->buf;
	size_t i = 0, n = t->len;

	for (unsigned c = 0; i < n && c < cols; c++) {
		size_t k = p[i] < 0x80 ? 1 : fp_utf8_len(p + i, n - i);

		i += k ? k : 1;
	}
	fp_text_put(out, t->buf, i);
}

/* ---- reading the files ---- */

/* ".NAME.partial" of a finished NAME: its time and compression */
static bool
partial_name(const char *name, struct fp_perf_name *parsed)
{
	size_t n = strlen(name);
	char inner[FP_PERF_NAME_MAX];

	if (name[0] != '.' || n < 10 || n - 9 >= sizeof(inner) ||
	    strcmp(name + n - 8, ".partial") != 0)
		return false;
	memcpy(inner, name + 1, n - 9);
	inner[n - 9] = '\0';
	return fp_perf_name_parse(inner, parsed);
}

struct listing {
	char partial[FP_PERF_PARTIAL_MAX], finished[FP_PERF_NAME_MAX];
	struct fp_perf_name p, fin;
	bool has_partial, has_finished, ours;	/* ours: any file of flame_profd's */
};

/* The newest partial and finished file in @dir. */
static int
list_dir(const char *dir, struct listing *l)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	memset(l, 0, sizeof(*l));
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct fp_perf_name parsed;

		if (strcmp(e->d_name, "manifest.json") == 0 ||
		    strcmp(e->d_name, ".flame_profd.lock") == 0)
			l->ours = true;
		if (partial_name(e->d_name, &parsed)) {
			l->ours = true;
			if (strlen(e->d_name) < sizeof(l->partial) &&
			    (!l->has_partial || parsed.epoch_ms > l->p.epoch_ms)) {
				l->has_partial = true;
				l->p = parsed;
				strcpy(l->partial, e->d_name);
			}
		} else if (fp_perf_name_parse(e->d_name, &parsed)) {
			l->ours = true;
			if (strlen(e->d_name) < sizeof(l->finished) &&
			    (!l->has_finished || parsed.epoch_ms > l->fin.epoch_ms)) {
				l->has_finished = true;
				l->fin = parsed;
				strcpy(l->finished, e->d_name);
			}
		}
	}
	closedir(d);
	return 0;
}

static char *
join(const char *dir, const char *name)
{
	char *p = xzalloc(strlen(dir) + strlen(name) + 2);

	sprintf(p, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
		name);
	return p;
}

/*
 * The node's directory: @dir itself when it holds flame_profd's files,
 * else its one subdirectory that does (the daemon's --out of one
 * node). 1: none yet (the daemon has not written); -EEXIST after a
 * message when several nodes' directories are there.
 */
static int
find_node_dir(struct follow *f)
{
	struct listing l;
	DIR *d;
	struct dirent *e;
	char *found = NULL;
	int rc;

	rc = list_dir(f->dir, &l);
	if (rc < 0) {
		snprintf(f->err, sizeof(f->err), "cannot read %s: %s", f->dir,
			 strerror(-rc));
		return rc;
	}
	if (l.ours) {
		f->node_dir = xstrdup(f->dir);
		return 0;
	}
	d = opendir(f->dir);
	if (!d)
		return 1;
	while ((e = readdir(d))) {
		char *sub;
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		sub = join(f->dir, e->d_name);
		/* links to directories are not followed, as elsewhere */
		if (lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    list_dir(sub, &l) < 0 || !l.ours) {
			free(sub);
			continue;
		}
		if (found) {
			snprintf(f->err, sizeof(f->err),
				 "%s holds the directories of several nodes (%s, %s): "
				 "follow one", f->dir, strrchr(found, '/') + 1, e->d_name);
			free(sub);
			free(found);
			closedir(d);
			return -EEXIST;
		}
		found = sub;
	}
	closedir(d);
	if (!found)
		return 1;
	f->node_dir = found;
	return 0;
}

/* Interval notes: the sampler's own account, shown as it is. */
static void
take_note(struct follow *f, const char *text, size_t len)
{
	static const char *const keys[] = {
		"achieved=", "requested=", "skipped=", "cost=", "rate=", "top=",
		"breaker=",
	};
	static const char prefix[] = "# flame_profd: ";
	const char *body, *end = text + len;

	if (len < sizeof(prefix) - 1 || memcmp(text, prefix, sizeof(prefix) - 1) != 0)
		return;
	/* past the time */
	body = memchr(text + sizeof(prefix) - 1, ' ', len - (sizeof(prefix) - 1));
	if (!body)
		return;
	body++;
	if ((size_t)(end - body) > 10 && memcmp(body, "interval: ", 10) == 0) {
		f->sampler.len = 0;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t kl = strlen(keys[k]);

			for (const char *p = body; p + kl < end; p++) {
				size_t vl = 0;

				if ((p != body && p[-1] != ' ') || memcmp(p, keys[k], kl) != 0)
					continue;
				/* the segment's text is not NUL-ended */
				while (p + vl < end && p[vl] != ' ' && p[vl] != '\n')
					vl++;
				if (f->sampler.len)
					fp_text_putc(&f->sampler, ' ');
				fp_text_put_escaped(&f->sampler, p, vl, NULL);
				break;
			}
		}
		return;
	}
	f->event.len = 0;
	fp_text_put_escaped(&f->event, text + sizeof(prefix) - 1,
			    len - (sizeof(prefix) - 1), NULL);
}

static const char *
without_line_copy(struct follow *f, const char *name, size_t i)
{
	const char *slash = strrchr(name, '/');
	const char *colon = slash ? strchr(slash, ':') : NULL;

	if (!f->o->strip_lines || !colon)
		return NULL;
	FP_GROW(f->offs, f->offs_cap, i + 1);
	f->offs[i] = fp_text_put_str(&f->names, name, (size_t)(colon - name));
	return name;	/* resolved once the scratch text has stopped moving */
}

static int
on_record(void *data, const struct fp_perf_record *rec)
{
	struct follow *f = data;
	const struct fpp_options *o = f->o;
	struct fpp_window_sample s = {
		.time_us = rec->time_us,
		.status = rec->status,
		/* as top: idle samples in no row, unless statuses are chosen */
		.idle = rec->idle && !o->status_filter,
		.nframes = rec->nframes,
		.frames = rec->frames,
	};
	char pid[64];

	f->samples_read++;
	if (!fpp_selected(o, rec))
		return 0;
	if (o->strip_lines) {
		bool any = false;

		f->names.len = 0;
		FP_GROW(f->frames, f->frames_cap, rec->nframes + 1);
		for (uint32_t i = 0; i < rec->nframes; i++) {
			f->frames[i] = without_line_copy(f, rec->frames[i], i);
			any |= f->frames[i] != NULL;
		}
		for (uint32_t i = 0; any && i < rec->nframes; i++)
			f->frames[i] = f->frames[i] ? f->names.buf + f->offs[i] :
				       rec->frames[i];
		if (any)
			s.frames = f->frames;
	}
	/* a process as procs and --process name it */
	snprintf(pid, sizeof(pid), "<0.%" PRIu32 ".%" PRIu32 ">", rec->pid.num,
		 rec->pid.serial);
	f->proc.len = 0;
	if (rec->registered_name) {
		fp_text_puts(&f->proc, rec->registered_name);
	} else {
		fp_text_puts(&f->proc, pid);
		if (rec->initial_call) {
			fp_text_putc(&f->proc, ' ');
			fp_text_puts(&f->proc, rec->initial_call);
		}
	}
	fp_text_putc(&f->proc, '\0');
	s.process = f->proc.buf;
	if (o->group) {
		const char *v = fpp_field_value(rec, &o->group_by);

		s.value = v ? v : "-";
	}
	fpp_window_add(f->win, &s);
	return 0;
}

static void
on_segment(void *data, const char *text, size_t len)
{
	struct follow *f = data;
	struct fp_perf_reader *reader;
	uint64_t before = f->samples_read;
	char label[1024];
	int rc;

	if (f->ex != FPP_EXIT_OK || !len)
		return;
	/* the notes, between samples: each at the start of a line */
	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (n && p[0] == '#')
			take_note(f, p, n);
		p += n + 1;
	}
	/* the reader's line numbers count from the segment */
	snprintf(label, sizeof(label), "%s/%s (a segment past byte %lld)",
		 f->node_dir, f->name, (long long)f->good);
	fp_perf_reader_open_text(label, text, len, &reader);
	fp_perf_reader_set_erlang_names(reader, f->o->erlang_names);
	rc = fp_perf_read(reader, on_record, f);
	if (rc < 0) {
		snprintf(f->err, sizeof(f->err), "%s", fp_perf_reader_error(reader));
		f->ex = FPP_EXIT_DATAERR;
	}
	fp_perf_reader_destroy(reader);
	if (f->samples_read > before)
		f->new_at = mono_us();
}

/* The segments written since the last look. */
static void
read_more(struct follow *f)
{
	ssize_t rc = fp_perf_segments_scan_at(f->kind, f->fd, f->good,
					      FP_PERF_SEGMENT_TEXT_MAX,
					      on_segment, f);

	if (rc >= 0) {
		f->good = rc;
		return;
	}
	if (rc == -EBADMSG) {
		snprintf(f->err, sizeof(f->err), "%s/%s: not a %s perf-script file "
			 "past byte %lld", f->node_dir, f->name,
			 f->kind == FP_PERF_ZSTD ? "zstd" :
			 f->kind == FP_PERF_GZIP ? "gzip" : "plain",
			 (long long)f->good);
		f->ex = FPP_EXIT_DATAERR;
	} else {
		snprintf(f->err, sizeof(f->err), "cannot read %s/%s: %s",
			 f->node_dir, f->name, strerror((int)-rc));
		f->ex = FPP_EXIT_IOERR;
	}
}

static void
close_file(struct follow *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	free(f->name);
	f->name = NULL;
}

/* Open @name of @parsed's time; read what it holds. 0, or -ENOENT when
 * it went (a partial file renamed meanwhile: the next look finds it). */
static int
open_file(struct follow *f, const char *name, const struct fp_perf_name *parsed,
	  bool partial)
{
	char *path = join(f->node_dir, name);
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	free(path);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	f->fd = fd;
	f->name = xstrdup(name);
	f->partial = partial;
	f->kind = parsed->kind;
	f->good = 0;
	f->last_ms = parsed->epoch_ms;
	read_more(f);
	return 0;
}

struct finished {
	char name[FP_PERF_NAME_MAX];
	struct fp_perf_name parsed;
};

static int
by_time(const void *a, const void *b)
{
	const struct finished *x = a, *y = b;

	if (x->parsed.epoch_ms != y->parsed.epoch_ms)
		return x->parsed.epoch_ms < y->parsed.epoch_ms ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The finished files newer than the last one read (only the newest at
 * the start) and older than the partial file of @l, read whole. */
static void
read_finished(struct follow *f, const struct listing *l)
{
	struct finished *files = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	if (!f->last_ms) {
		struct fp_perf_name fin = l->fin;
		uint64_t new_at = f->new_at;

		if (open_file(f, l->finished, &fin, false) == 0)
			close_file(f);
		/* what was there before the view started is not news: a
		 * stopped daemon is said to be so from the start */
		f->new_at = new_at;
		return;
	}
	d = opendir(f->node_dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		struct fp_perf_name parsed;

		if (!fp_perf_name_parse(e->d_name, &parsed) ||
		    parsed.epoch_ms <= f->last_ms ||
		    (l->has_partial && parsed.epoch_ms >= l->p.epoch_ms) ||
		    strlen(e->d_name) >= sizeof(files->name))
			continue;
		FP_GROW(files, cap, n + 1);
		strcpy(files[n].name, e->d_name);
		files[n++].parsed = parsed;
	}
	closedir(d);
	if (n > 1)
		qsort(files, n, sizeof(*files), by_time);
	for (size_t i = 0; i < n && f->ex == FPP_EXIT_OK; i++) {
		if (open_file(f, files[i].name, &files[i].parsed, false) == 0)
			close_file(f);
	}
	free(files);
}

/* One look at the directory: new segments, a rotation, a new file. */
static void
poll_files(struct follow *f)
{
	struct listing l;

	if (!f->node_dir) {
		int rc = find_node_dir(f);

		if (rc < 0) {
			f->ex = FPP_EXIT_NOINPUT;
			return;
		}
		if (rc > 0)
			return;
	}
	if (f->fd >= 0)
		read_more(f);
	if (f->ex != FPP_EXIT_OK || list_dir(f->node_dir, &l) < 0)
		return;
	if (f->fd >= 0 && f->partial) {
		char *path = join(f->node_dir, f->name);
		struct stat st;
		bool gone = lstat(path, &st) < 0;

		free(path);
		/* finished (renamed: the open file is the same, now
		 * whole), or a newer file begun: read it to its end */
		if (gone || (l.has_partial && l.p.epoch_ms > f->last_ms)) {
			read_more(f);
			close_file(f);
		}
	}
	if (f->fd >= 0 && !f->partial)
		close_file(f);
	if (f->fd >= 0 || f->ex != FPP_EXIT_OK)
		return;
	/* at the start, the newest finished file, read whole (the window
	 * keeps what is recent of it); later, every file begun and
	 * finished between two looks, oldest first */
	if (l.has_finished && l.fin.epoch_ms > f->last_ms &&
	    (!l.has_partial || l.fin.epoch_ms < l.p.epoch_ms))
		read_finished(f, &l);
	if (l.has_partial && l.p.epoch_ms > f->last_ms && f->ex == FPP_EXIT_OK)
		open_file(f, l.partial, &l.p, true);
}

/* ---- drawing ---- */

static void
line_end(struct follow *f)
{
	if (f->tty && f->drawn + 1 >= f->rows) {
		/* a terminal too low: the last row is the keys' */
		f->line.len = 0;
		return;
	}
	f->drawn++;
	if (f->tty) {
		/* short of the last column: a line that fills it is one
		 * tmux takes as wrapped, and joins to the next on a resize */
		put_clipped(&f->out, &f->line, f->cols - 1);
		fp_text_puts(&f->out, "\033[K");
	} else {
		fp_text_put(&f->out, f->line.buf, f->line.len);
	}
	fp_text_putc(&f->out, '\n');
	f->line.len = 0;
}

static void
linef(struct follow *f, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void
linef(struct follow *f, const char *format, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, format);
	n = vsnprintf(buf, sizeof(buf), format, ap);
	va_end(ap);
	if (n > 0)
		fp_text_put(&f->line, buf, (size_t)n < sizeof(buf) ? (size_t)n :
			    sizeof(buf) - 1);
}

static void
clock_text(uint64_t us, char *dst, size_t size)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(dst, size, "%H:%M:%S", &tm);
}

static void
draw(struct follow *f)
{
	const struct fpp_options *o = f->o;
	const struct fpp_window_row *rows;
	struct fpp_window_summary sum;
	struct timespec now_rt;
	char now[16], newest[16];
	uint64_t now_us, mono = mono_us(), quiet, stale, in_rows, nrows;
	size_t n, shown, fit, limit, header = 7;
	const char *what;

	n = fpp_window_rows(f->win, f->view, f->by_total, &rows, &sum);
	clock_gettime(CLOCK_REALTIME, &now_rt);
	now_us = (uint64_t)now_rt.tv_sec * 1000000 + (uint64_t)now_rt.tv_nsec / 1000;
	clock_text(now_us, now, sizeof(now));
	f->out.len = 0;
	f->line.len = 0;
	f->drawn = 0;
	if (f->tty)
		fp_text_puts(&f->out, "\033[H");

	/* 1: what is followed */
	linef(f, "flame_prof top --follow  ");
	fp_text_puts_escaped(&f->line, f->node_dir ? f->node_dir : f->dir, NULL);
	linef(f, "  %s UTC", now);
	line_end(f);

	/* 2: the window */
	linef(f, "window %.0f s: %" PRIu64 " samples", (double)o->window_us / 1e6,
	      sum.samples);
	if (sum.seconds)
		linef(f, " (%.1f/s)", (double)sum.samples / (double)sum.seconds);
	if (sum.idle)
		linef(f, ", %" PRIu64 " idle", sum.idle);
	for (int s = 0; s < FP_STATUS_COUNT; s++) {
		if (sum.status[s])
			linef(f, ", %s %" PRIu64, fp_status_name((enum fp_status)s),
			      sum.status[s]);
	}
	line_end(f);

	/* 3: the sampler's account */
	linef(f, "sampler: ");
	if (f->sampler.len)
		fp_text_put(&f->line, f->sampler.buf, f->sampler.len);
	else
		linef(f, "no interval note yet");
	line_end(f);

	/* 4: the file, or why there is none */
	stale = STALE_US > 3 * o->interval_us ? STALE_US : 3 * o->interval_us;
	quiet = mono - (f->new_at ? f->new_at : f->started_at);
	if (!f->node_dir) {
		linef(f, "waiting for flame_profd's files in ");
		fp_text_puts_escaped(&f->line, f->dir, NULL);
	} else if (quiet >= stale) {
		linef(f, "NO NEW SAMPLES for %.0f s: flame_profd is not writing",
		      (double)quiet / 1e6);
		if (sum.newest_us) {
			clock_text(sum.newest_us, newest, sizeof(newest));
			linef(f, " (newest sample %s UTC)", newest);
		}
	} else if (f->fd >= 0) {
		linef(f, "following ");
		fp_text_puts_escaped(&f->line, f->name, NULL);
		linef(f, " (%lld bytes read)", (long long)f->good);
	} else {
		linef(f, "waiting for the next file");
	}
	line_end(f);

	/* 5: the last note that was not an interval's */
	linef(f, "note: ");
	if (f->event.len)
		fp_text_put(&f->line, f->event.buf, f->event.len);
	else
		linef(f, "-");
	line_end(f);
	line_end(f);

	/* the rows */
	in_rows = f->view == FPP_VIEW_FUNCTIONS ? sum.samples - sum.idle : sum.samples;
	what = f->view == FPP_VIEW_FUNCTIONS ? "FUNCTION" :
	       f->view == FPP_VIEW_PROCESSES ? "PROCESS" : fpp_field_title(&o->group_by);
	if (f->view == FPP_VIEW_FUNCTIONS)
		linef(f, "%8s %6s %8s %6s  %s", "SELF", "SELF%", "TOTAL", "TOTAL%", what);
	else
		linef(f, "%8s %6s  ", "SAMPLES", "SHARE");
	if (f->view != FPP_VIEW_FUNCTIONS)
		fp_text_puts_escaped(&f->line, what, NULL);
	line_end(f);
	fit = f->tty ? (f->rows > header + 1 ? f->rows - header - 1 : 0) : SIZE_MAX;
	/* the terminal's height, else --limit's (25 unless given) */
	limit = o->limit_set ? o->limit : f->tty ? 0 : 25;
	nrows = limit && limit < fit ? limit : fit;
	shown = n < nrows ? n : (size_t)nrows;
	for (size_t i = 0; i < shown; i++) {
		double d = in_rows ? 100.0 / (double)in_rows : 0;

		if (f->view == FPP_VIEW_FUNCTIONS)
			linef(f, "%8" PRIu64 " %5.1f%% %8" PRIu64 " %5.1f%%  ",
			      rows[i].self, (double)rows[i].self * d, rows[i].total,
			      (double)rows[i].total * d);
		else
			linef(f, "%8" PRIu64 " %5.1f%%  ", rows[i].self,
			      (double)rows[i].self * d);
		if (f->view == FPP_VIEW_FIELD)
			fp_text_puts_escaped(&f->line, rows[i].name, NULL);
		else
			put_written(&f->line, rows[i].name);
		line_end(f);
	}
	if (f->tty) {
		/* the keys, on the last line, without a newline: no scroll */
		fp_text_puts(&f->out, "\033[J");
		for (unsigned i = f->drawn; i + 1 < f->rows; i++)
			fp_text_putc(&f->out, '\n');
		linef(f, "q quit  f functions  p processes%s%s",
		      o->group ? "  b values" : "",
		      f->view != FPP_VIEW_FUNCTIONS ? "" :
		      f->by_total ? "  s sort by self" : "  s sort by total");
		put_clipped(&f->out, &f->line, f->cols - 1);
		f->line.len = 0;
	} else {
		fp_text_putc(&f->out, '\n');
	}
}

/* Write the frame; false when the output is gone or fails. */
static bool
flush_out(struct follow *f)
{
	const char *p = f->out.buf;
	size_t n = f->out.len;

	while (n) {
		ssize_t w = write(STDOUT_FILENO, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(f->err, sizeof(f->err), "cannot write the view: %s",
				 strerror(w < 0 ? errno : EIO));
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* A key: false to quit. */
static bool
on_key(struct follow *f, char c)
{
	switch (c) {
	case 'q':
	case 'Q':
	case 3:		/* Ctrl-C */
	case 4:		/* Ctrl-D */
		return false;
	case 'f':
		f->view = FPP_VIEW_FUNCTIONS;
		break;
	case 'p':
		f->view = FPP_VIEW_PROCESSES;
		break;
	case 'b':
		if (f->o->group)
			f->view = FPP_VIEW_FIELD;
		break;
	case 's':
		f->by_total = !f->by_total;
		break;
	case 26:	/* Ctrl-Z: stop as the terminal's SIGTSTP would */
		term_restore();
		kill(getpid(), SIGSTOP);
		break;
	default:
		break;
	}
	return true;
}

static int
open_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGWINCH);
	sigaddset(&set, SIGTSTP);
	sigaddset(&set, SIGCONT);
	sigprocmask(SIG_BLOCK, &set, old);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static void
catch_crashes(void)
{
	struct sigaction sa = { .sa_handler = on_crash, .sa_flags = SA_RESETHAND };
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

int
fpp_cmd_follow(const struct fpp_options *o, const char *dir)
{
	struct follow f = {
		.o = o, .dir = dir, .fd = -1, .view = (enum fpp_view)o->view,
		.by_total = o->sort == 1, .ex = FPP_EXIT_OK,
	};
	struct stat st;
	sigset_t old;
	int sfd = -1;
	bool keys, run = true;
	uint64_t next;

	if (stat(dir, &st) < 0) {
		fpp_fail("cannot open %s: %s", dir, strerror(errno));
		return FPP_EXIT_NOINPUT;
	}
	if (!S_ISDIR(st.st_mode)) {
		fpp_fail("%s: --follow takes a directory (a node's, or flame_profd's "
			 "--out of one node)", dir);
		return FPP_EXIT_NOINPUT;
	}
	f.win = fpp_window_new(o->window_us);
	f.tty = isatty(STDOUT_FILENO);
	f.started_at = mono_us();
	sfd = open_signals(&old);
	if (sfd < 0) {
		fpp_fail("signalfd: %s", strerror(errno));
		f.ex = FPP_EXIT_SOFTWARE;
		goto free_follow;
	}
	if (f.tty) {
		catch_crashes();
		term_size(&f);
		term_enter();
	}
	keys = f.tty && tio_saved;

	next = mono_us();
	while (run && f.ex == FPP_EXIT_OK) {
		struct pollfd pfd[2] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = keys ? STDIN_FILENO : -1, .events = POLLIN },
		};
		uint64_t now = mono_us();
		bool redraw = false;
		int timeout;

		if (now >= next) {
			poll_files(&f);
			if (f.ex != FPP_EXIT_OK)
				break;
			redraw = true;
			next += o->interval_us;
			if (next <= now)
				next = now + o->interval_us;
		}
		/* not while stopped by Ctrl-Z: the screen is the shell's */
		if (redraw && (!f.tty || screen_on)) {
			draw(&f);
			if (!flush_out(&f)) {
				f.ex = FPP_EXIT_IOERR;
				break;
			}
		}
		now = mono_us();
		timeout = next > now ? (int)((next - now + 999) / 1000) : 0;
		if (poll(pfd, 2, timeout) < 0 && errno != EINTR) {
			snprintf(f.err, sizeof(f.err), "poll: %s", strerror(errno));
			f.ex = FPP_EXIT_SOFTWARE;
			break;
		}
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				switch (si.ssi_signo) {
				case SIGWINCH:
					if (f.tty)
						term_size(&f);
					redraw = true;
					break;
				case SIGTSTP:
					/* give the terminal back while stopped */
					term_restore();
					kill(getpid(), SIGSTOP);
					break;
				case SIGCONT:
					if (f.tty && !screen_on) {
						term_size(&f);
						term_enter();
						redraw = true;
					}
					break;
				default:
					/* SIGINT, SIGTERM, SIGHUP, SIGQUIT:
					 * the way a script stops it */
					run = false;
					break;
				}
			}
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[64];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				keys = false;	/* no more keys: signals still stop it */
			for (ssize_t i = 0; i < n && run; i++)
				run = on_key(&f, buf[i]);
			redraw = true;
		}
		if (run && redraw && f.ex == FPP_EXIT_OK && f.tty && screen_on) {
			draw(&f);
			if (!flush_out(&f))
				f.ex = FPP_EXIT_IOERR;
		}
	}

free_follow:
	term_restore();
	if (sfd >= 0) {
		close(sfd);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (f.ex != FPP_EXIT_OK && f.err[0])
		fpp_fail("%s", f.err);
	close_file(&f);
	fpp_window_destroy(f.win);
	free(f.node_dir);
	fp_text_free(&f.sampler);
	fp_text_free(&f.event);
	fp_text_free(&f.proc);
	fp_text_free(&f.names);
	free(f.frames);
	free(f.offs);
	fp_text_free(&f.out);
	fp_text_free(&f.line);
	return f.ex;
}
