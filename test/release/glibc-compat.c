/*
 * The few glibc-only symbols that Debian's libstdc++.so.6 and libgcc_s.so.1 (built against
 * glibc) reference, implemented on musl, so that those two libraries load under musl's dynamic
 * loader in the test's musl root. Installed there as /lib/ld-linux-x86-64.so.2: libstdc++ lists
 * that name as NEEDED, so musl loads this file and its symbols join the global scope (the same
 * trick as Alpine's gcompat). Only the test's root uses it; a real Alpine host has libstdc++ and
 * libgcc built for musl (apk add libstdc++ libgcc) and needs nothing of this.
 */
#define _GNU_SOURCE
#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

/* glibc 2.32+: nonzero while the process has one thread; 0 keeps libstdc++ on atomic paths. */
char __libc_single_threaded = 0;

/* glibc 2.36+ */
uint32_t arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
  }
  return v;
}

/* glibc's internal alias of strftime_l */
size_t __strftime_l(char *s, size_t max, const char *fmt, const struct tm *tm, locale_t loc) {
  return strftime_l(s, max, fmt, tm, loc);
}

/* glibc 2.35+: fast unwinder lookup; -1 makes libgcc fall back to dl_iterate_phdr. */
int _dl_find_object(void *pc, void *result) {
  (void)pc;
  (void)result;
  return -1;
}

/* libgcc's CPU feature data, exported by libgcc_s only under a non-default symbol version that
 * musl's loader does not resolve; all zero means "no optional CPU features". */
struct cpu_model {
  unsigned int vendor, type, subtype, features[1];
};
struct cpu_model __cpu_model = {0, 0, 0, {0}};
int __cpu_indicator_init(void) { return 0; }

/* glibc 2.18+: destructors of thread_local objects, run when their thread exits. */
struct tls_dtor {
  void (*fn)(void *);
  void *obj;
  struct tls_dtor *next;
};
static pthread_key_t dtor_key;
static pthread_once_t dtor_once = PTHREAD_ONCE_INIT;

static void run_dtors(void *head) {
  for (struct tls_dtor *d = head; d;) {
    struct tls_dtor *next = d->next;
    d->fn(d->obj);
    free(d);
    d = next;
  }
}
static void make_key(void) { pthread_key_create(&dtor_key, run_dtors); }

int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso) {
  (void)dso;
  pthread_once(&dtor_once, make_key);
  struct tls_dtor *d = malloc(sizeof *d);
  if (!d) return -1;
  d->fn = fn;
  d->obj = obj;
  d->next = pthread_getspecific(dtor_key); /* newest first: reverse order of construction */
  pthread_setspecific(dtor_key, d);
  return 0;
}
