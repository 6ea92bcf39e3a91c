// The status port's native responder: a thread of plain C that owns the listening socket, so the
// kubelet's readiness probe is answered while the agent's JavaScript event loop is busy, without
// a second JavaScript VM (a Bun Worker costs ~3.6 MiB per pod). Loaded through bun:ffi from the
// bytes embedded in the binary (native/statusresponder.ts), built by build.ts with gcc.
//
// What it answers itself: `GET /healthz/ready` while the main thread has said the agent is ready
// (sr_ready, after its own full check answered 200) and every file that answer depended on still
// exists: `200` with an empty body. Everything else, and every request while that is not so, goes
// to the main thread's HTTP server on a loopback port: the connection is relayed byte for byte
// from the first request not answered here, and the main thread learns the client's address by
// the relay's source port (sr_remote). Any change of readiness makes the main thread call
// sr_unready first, so a stale 200 cannot be served.
//
// Built without libc headers' inline helpers (no fortify, no stack protector) and linked with no
// DT_NEEDED: every symbol is a plain POSIX one that glibc and musl both export, resolved from the
// process's own libc at dlopen. No timers: at rest its threads sleep in accept() and read().

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 1024
#define HEAD_CAP 8192
#define RELAY_BUF 16384
#define FILES_CAP 4096
/** A connection quiet this long while a request head is awaited is closed (Bun.serve's idleTimeout). */
#define IDLE_MS 120000
#define STACK_SIZE (128 * 1024)

struct slot {
  int fd;           /* client socket, -1 when free */
  uint16_t relay;   /* source port of the relay's connection to the main thread, 0 before */
  char addr[64];    /* the client's address as text */
};

struct responder {
  int listen_fd;
  uint16_t backend_port;
  pthread_t acceptor;
  atomic_int ready;
  atomic_int stopping;
  atomic_long answered;
  atomic_long forwarded;
  pthread_mutex_t mu; /* guards slots, files, active */
  int active;
  struct slot slots[MAX_CONNS];
  char files[FILES_CAP]; /* NUL-separated paths that must exist for a native 200 */
  int files_len;
};

struct conn {
  struct responder *r;
  int idx;
};

static int take_slot(struct responder *r, int fd, const char *addr) {
  int idx = -1;
  pthread_mutex_lock(&r->mu);
  if (!atomic_load(&r->stopping)) {
    for (int i = 0; i < MAX_CONNS; i++) {
      if (r->slots[i].fd < 0) {
        idx = i;
        r->slots[i].fd = fd;
        r->slots[i].relay = 0;
        size_t n = strlen(addr);
        if (n >= sizeof r->slots[i].addr) n = sizeof r->slots[i].addr - 1;
        memcpy(r->slots[i].addr, addr, n);
        r->slots[i].addr[n] = 0;
        r->active++;
        break;
      }
    }
  }
  pthread_mutex_unlock(&r->mu);
  return idx;
}

static void free_slot(struct responder *r, int idx) {
  pthread_mutex_lock(&r->mu);
  r->slots[idx].fd = -1;
  r->slots[idx].relay = 0;
  r->active--;
  pthread_mutex_unlock(&r->mu);
}

/** Reads into buf; -1 on error or when nothing came within ms, 0 at end of stream. */
static ssize_t read_within(int fd, char *buf, size_t cap, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  for (;;) {
    int n = poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    ssize_t got = read(fd, buf, cap);
    if (got < 0 && errno == EINTR) continue;
    return got;
  }
}

static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static const char *find_head_end(const char *buf, size_t len) {
  for (size_t i = 3; i < len; i++)
    if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') return buf + i + 1;
  return NULL;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int name_is(const char *name, size_t len, const char *want) {
  size_t wl = strlen(want);
  if (len != wl) return 0;
  for (size_t i = 0; i < len; i++)
    if (lower((unsigned char)name[i]) != want[i]) return 0;
  return 1;
}

static int is_tchar(int c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
  return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/** True when `value` holds the token `tok` in a comma-separated list, case-insensitively. */
static int has_token(const char *v, size_t len, const char *tok) {
  size_t tl = strlen(tok);
  size_t i = 0;
  while (i < len) {
    while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t s = i;
    while (i < len && v[i] != ',') i++;
    size_t e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    if (e - s == tl && name_is(v + s, tl, tok)) return 1;
  }
  return 0;
}

/**
 * Whether the request head (ending with CRLF CRLF) is one this thread may answer: exactly
 * `GET /healthz/ready[?query] HTTP/1.x`, well-formed header lines, one Host at most, no body,
 * no upgrade. Anything else, odd or not, is the main thread's to answer. *keep says whether the
 * connection stays open after the answer (HTTP/1.1 unless `Connection: close`; HTTP/1.0 only
 * with `Connection: keep-alive`).
 */
static int hot(const char *h, size_t len, int *keep) {
  static const char GET[] = "GET /healthz/ready";
  if (len < sizeof GET - 1 || memcmp(h, GET, sizeof GET - 1) != 0) return 0;
  size_t i = sizeof GET - 1;
  if (i < len && h[i] == '?') {
    while (i < len && h[i] > ' ' && h[i] != '#' && h[i] < 127) i++;
  }
  int http10;
  if (len - i >= 11 && memcmp(h + i, " HTTP/1.1\r\n", 11) == 0) http10 = 0;
  else if (len - i >= 11 && memcmp(h + i, " HTTP/1.0\r\n", 11) == 0) http10 = 1;
  else return 0;
  i += 11;
  int hosts = 0, close = 0, keepalive = 0;
  while (i < len) {
    size_t eol = i;
    while (eol < len && h[eol] != '\r' && h[eol] != '\n') eol++;
    if (eol + 1 >= len || h[eol] != '\r' || h[eol + 1] != '\n') return 0;
    if (eol == i) {
      /* the blank line ends the head */
      if (i + 2 != len || hosts > 1) return 0;
      *keep = http10 ? keepalive && !close : !close;
      return 1;
    }
    size_t colon = i;
    while (colon < eol && is_tchar((unsigned char)h[colon])) colon++;
    if (colon == i || colon == eol || h[colon] != ':') return 0;
    for (size_t k = colon + 1; k < eol; k++) {
      unsigned char c = (unsigned char)h[k];
      if ((c < ' ' && c != '\t') || c == 127) return 0;
    }
    const char *name = h + i, *value = h + colon + 1;
    size_t nlen = colon - i, vlen = eol - colon - 1;
    if (name_is(name, nlen, "content-length") || name_is(name, nlen, "transfer-encoding") || name_is(name, nlen, "upgrade") ||
        name_is(name, nlen, "expect"))
      return 0;
    if (name_is(name, nlen, "host")) hosts++;
    if (name_is(name, nlen, "connection")) {
      if (has_token(value, vlen, "close")) close = 1;
      if (has_token(value, vlen, "keep-alive")) keepalive = 1;
      if (has_token(value, vlen, "upgrade")) return 0;
    }
    i = eol + 2;
  }
  return 0;
}

/** Every file the ready answer depended on still exists. */
static int files_present(struct responder *r) {
  int ok = 1;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->files_len && ok;) {
    const char *p = r->files + i;
    if (access(p, F_OK) != 0) ok = 0;
    i += (int)strlen(p) + 1;
  }
  pthread_mutex_unlock(&r->mu);
  return ok;
}

static int answer_ready(int fd, int keep) {
  char date[64], out[256];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  /* Bun.serve's own answer to the same request, byte for byte but for the closing notice */
  int n = snprintf(out, sizeof out, "HTTP/1.1 200 OK\r\nDate: %s\r\nContent-Length: 0\r\n%s\r\n", date, keep ? "" : "Connection: close\r\n");
  return write_all(fd, out, (size_t)n);
}

/**
 * Relays the connection to the main thread's server, starting with the `have` bytes already read.
 * With `once`, `head` is one whole request head without a body (a probe the main thread must
 * answer): it is sent with `Connection: close` added, its answer relayed, and the connection then
 * ends, so the client's next probe comes on a new connection, which this thread may answer.
 */
static void relay(struct responder *r, int idx, int fd, const char *head, size_t have, int once) {
  int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (b < 0) return;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(b, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(b, (struct sockaddr *)&a, &al) != 0) goto out;
  pthread_mutex_lock(&r->mu);
  r->slots[idx].relay = ntohs(a.sin_port);
  pthread_mutex_unlock(&r->mu);
  a.sin_port = htons(r->backend_port);
  if (connect(b, (struct sockaddr *)&a, sizeof a) != 0) goto out;
  int one = 1;
  setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  atomic_fetch_add(&r->forwarded, 1);
  if (once) {
    /* the head ends with CRLF CRLF: insert the header before the blank line */
    if (write_all(b, head, have - 2) != 0 || write_all(b, "Connection: close\r\n\r\n", 21) != 0) goto out;
  } else if (have > 0 && write_all(b, head, have) != 0) {
    goto out;
  }
  char *buf = malloc(RELAY_BUF);
  if (!buf) goto out;
  struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = b, .events = POLLIN}};
  int open_in = !once, open_out = 1; /* client → main, main → client */
  while (open_in || open_out) {
    p[0].fd = open_in ? fd : -1;
    p[1].fd = open_out ? b : -1;
    int n = poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int k = 0; k < 2; k++) {
      if (!p[k].revents) continue;
      int from = k == 0 ? fd : b, to = k == 0 ? b : fd;
      ssize_t got = read(from, buf, RELAY_BUF);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        if (k == 0) open_in = 0;
        else open_out = 0;
        shutdown(to, SHUT_WR);
        /* the main thread closed its side: the client's remaining bytes have nowhere to go */
        if (k == 1) open_in = 0;
        continue;
      }
      if (write_all(to, buf, (size_t)got) != 0) open_in = open_out = 0;
    }
  }
  free(buf);
out:
  close(b);
}

static void *conn_main(void *arg) {
  struct conn c = *(struct conn *)arg;
  free(arg);
  struct responder *r = c.r;
  int fd = r->slots[c.idx].fd;
  char head[HEAD_CAP];
  size_t have = 0;
  for (;;) {
    const char *end;
    while ((end = find_head_end(head, have)) == NULL) {
      if (have == sizeof head) goto forward;
      ssize_t got = read_within(fd, head + have, sizeof head - have, IDLE_MS);
      if (got <= 0) goto done;
      have += (size_t)got;
    }
    size_t hlen = (size_t)(end - head);
    int keep = 0;
    if (!hot(head, hlen, &keep)) goto forward;
    if (!atomic_load(&r->ready) || atomic_load(&r->stopping) || !files_present(r)) {
      relay(r, c.idx, fd, head, hlen, 1);
      goto done;
    }
    if (answer_ready(fd, keep) != 0) goto done;
    atomic_fetch_add(&r->answered, 1);
    memmove(head, head + hlen, have - hlen);
    have -= hlen;
    if (!keep) goto done;
  }
forward:
  relay(r, c.idx, fd, head, have, 0);
done:
  close(fd);
  free_slot(r, c.idx);
  return NULL;
}

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t cap) {
  out[0] = 0;
  if (ss->ss_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)cap);
  else if (ss->ss_family == AF_INET6) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out, (socklen_t)cap);
}

static void *accept_main(void *arg) {
  struct responder *r = arg;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, STACK_SIZE);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  while (!atomic_load(&r->stopping)) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(r->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      if (atomic_load(&r->stopping)) break;
      /* EMFILE, ENFILE, ENOBUFS: the kernel keeps the connection queued; wait a little, not spin */
      poll(NULL, 0, 100);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char addr[64];
    format_addr(&ss, addr, sizeof addr);
    int idx = take_slot(r, fd, addr);
    struct conn *c = idx >= 0 ? malloc(sizeof *c) : NULL;
    pthread_t t;
    if (c) {
      c->r = r;
      c->idx = idx;
      if (pthread_create(&t, &attr, conn_main, c) == 0) continue;
      free(c);
    }
    if (idx >= 0) free_slot(r, idx);
    close(fd); /* more connections than MAX_CONNS, or no thread: refused */
  }
  pthread_attr_destroy(&attr);
  return NULL;
}

/**
 * Binds `host` (an IPv4 or IPv6 literal; "::" listens on both families) at `port` (0: any) and
 * starts the responder; the main thread's server listens on 127.0.0.1:`backend_port`. Returns the
 * responder, or NULL with errno's value in *err (-1: not an address literal).
 */
struct responder *sr_start(const char *host, int port, int backend_port, int *err) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t sl;
  int family;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
  struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
  if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    family = AF_INET6;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    sl = sizeof *a6;
  } else if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    family = AF_INET;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    sl = sizeof *a4;
  } else {
    *err = -1;
    return NULL;
  }
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return NULL;
  }
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 511) != 0) {
    *err = errno;
    close(fd);
    return NULL;
  }
  struct responder *r = calloc(1, sizeof *r);
  if (!r) {
    *err = ENOMEM;
    close(fd);
    return NULL;
  }
  r->listen_fd = fd;
  r->backend_port = (uint16_t)backend_port;
  pthread_mutex_init(&r->mu, NULL);
  for (int i = 0; i < MAX_CONNS; i++) r->slots[i].fd = -1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, STACK_SIZE);
  int e = pthread_create(&r->acceptor, &attr, accept_main, r);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    *err = e;
    close(fd);
    free(r);
    return NULL;
  }
  pthread_setname_np(r->acceptor, "status-native");
  *err = 0;
  return r;
}

/** The port bound (useful when 0 was asked for). */
int sr_port(struct responder *r) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(r->listen_fd, (struct sockaddr *)&ss, &sl) != 0) return -1;
  return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/**
 * The agent is ready: answer `GET /healthz/ready` here with 200 while each of the NUL-separated
 * `files` (len bytes, at most FILES_CAP) exists. Returns 0, or -1 when the list is too long (then
 * readiness stays with the main thread).
 */
int sr_ready(struct responder *r, const char *files, int len) {
  if (len < 0 || len > FILES_CAP) return -1;
  pthread_mutex_lock(&r->mu);
  memcpy(r->files, files, (size_t)len);
  r->files_len = len;
  pthread_mutex_unlock(&r->mu);
  atomic_store(&r->ready, 1);
  return 0;
}

/** Readiness may have changed: every probe goes to the main thread until sr_ready again. */
void sr_unready(struct responder *r) { atomic_store(&r->ready, 0); }

/** The client's address of the relayed connection whose source port is `relay_port`, into out; its length, or 0. */
int sr_remote(struct responder *r, int relay_port, char *out, int cap) {
  int n = 0;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < MAX_CONNS; i++) {
    if (r->slots[i].fd >= 0 && r->slots[i].relay == relay_port) {
      n = (int)strlen(r->slots[i].addr);
      if (n >= cap) n = 0;
      else memcpy(out, r->slots[i].addr, (size_t)n + 1);
      break;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return n;
}

/** Probes answered here since the start; requests handed to the main thread (connections relayed). */
long sr_answered(struct responder *r) { return atomic_load(&r->answered); }
long sr_forwarded(struct responder *r) { return atomic_load(&r->forwarded); }
/** Connections open now. */
int sr_active(struct responder *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->active;
  pthread_mutex_unlock(&r->mu);
  return n;
}

/**
 * Stops accepting, ends every open connection and waits for the acceptor. Connection threads
 * finish on their own (their sockets are shut down here); the responder's memory is kept, so
 * a late one never touches freed memory (one small block per listener started).
 */
void sr_stop(struct responder *r) {
  atomic_store(&r->stopping, 1);
  shutdown(r->listen_fd, SHUT_RDWR);
  pthread_join(r->acceptor, NULL);
  close(r->listen_fd);
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < MAX_CONNS; i++)
    if (r->slots[i].fd >= 0) shutdown(r->slots[i].fd, SHUT_RDWR);
  pthread_mutex_unlock(&r->mu);
}
