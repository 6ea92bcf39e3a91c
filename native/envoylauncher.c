// Envoy's launcher: `envoylauncher <agent pid> <envoy> [args...]` arms the parent-death signal
// (SIGKILL), checks that the agent is still its parent, and replaces itself with Envoy (same pid,
// same environment). The agent spawns it instead of a copy of itself (src/envoy/deathlink.ts):
// a copy is a second start of the whole runtime and bundle on Envoy's start path, this is a few
// system calls. Built by build.ts with gcc as a static executable without libc (no interpreter,
// no DT_NEEDED: it runs under glibc and musl systems alike), embedded in the binary and executed
// from an anonymous memory file (native/envoylauncher.ts), so a read-only root filesystem is fine.
//
// Exit codes when Envoy could not be started: 2 for a usage error, 127 otherwise, with one line on
// stderr naming Envoy's binary and the reason (as the JavaScript launcher, src/envoy/envoyexec.ts).

#define PR_SET_PDEATHSIG 1
#define SIGKILL 9

#if defined(__x86_64__)
#define SYS_WRITE 1
#define SYS_GETPPID 110
#define SYS_PRCTL 157
#define SYS_EXECVE 59
#define SYS_EXIT_GROUP 231
static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
// The kernel leaves argc, argv and envp on the stack: hand its address to launch().
__asm__(".text\n.global _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n call launch\n hlt\n");
#elif defined(__aarch64__)
#define SYS_WRITE 64
#define SYS_GETPPID 173
#define SYS_PRCTL 167
#define SYS_EXECVE 221
#define SYS_EXIT_GROUP 94
static long sys3(long n, long a, long b, long c) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
}
__asm__(".text\n.global _start\n_start:\n mov x29, #0\n mov x30, #0\n mov x0, sp\n bl launch\n");
#else
#error "envoylauncher.c: x86_64 and aarch64 only"
#endif

static unsigned long length(const char *s) {
  unsigned long n = 0;
  while (s[n]) n++;
  return n;
}

static void say(const char *s) { sys3(SYS_WRITE, 2, (long)s, (long)length(s)); }

static void say_number(long v) {
  char buf[24];
  int i = sizeof buf;
  buf[--i] = 0;
  if (v == 0) buf[--i] = '0';
  while (v > 0 && i > 0) {
    buf[--i] = (char)('0' + v % 10);
    v /= 10;
  }
  say(buf + i);
}

static __attribute__((noreturn)) void leave(int code) {
  for (;;) sys3(SYS_EXIT_GROUP, code, 0, 0);
}

static const char *errno_name(long e) {
  switch (e) {
    case 2: return "no such file or directory (ENOENT)";
    case 7: return "argument list too long (E2BIG)";
    case 8: return "exec format error (ENOEXEC)";
    case 12: return "out of memory (ENOMEM)";
    case 13: return "permission denied (EACCES)";
    case 20: return "not a directory (ENOTDIR)";
    case 26: return "text file busy (ETXTBSY)";
    case 40: return "too many levels of symbolic links (ELOOP)";
    default: return 0;
  }
}

static __attribute__((noreturn)) void fail(const char *file, const char *why, long err) {
  say("__envoy-exec: cannot start Envoy ");
  say(file);
  say(": ");
  say(why);
  if (err) {
    const char *name = errno_name(err);
    say(": ");
    if (name) say(name);
    else {
      say("errno ");
      say_number(err);
    }
  }
  say("\n");
  leave(127);
}

__attribute__((used, noreturn)) void launch(long *sp) {
  long argc = sp[0];
  char **argv = (char **)(sp + 1);
  char **envp = argv + argc + 1;
  if (argc < 3 || !argv[1][0]) {
    say("__envoy-exec: usage: __envoy-exec <agent pid> <envoy binary> [args...]\n");
    leave(2);
  }
  long agent = 0;
  for (const char *p = argv[1]; *p; p++) {
    if (*p < '0' || *p > '9' || agent > 100000000) {
      say("__envoy-exec: usage: __envoy-exec <agent pid> <envoy binary> [args...]\n");
      leave(2);
    }
    agent = agent * 10 + (*p - '0');
  }
  const char *file = argv[2];
  long r = sys3(SYS_PRCTL, PR_SET_PDEATHSIG, SIGKILL, 0);
  if (r < 0) fail(file, "prctl(PR_SET_PDEATHSIG) failed", -r);
  // The agent may have died before the signal was armed: then nothing would ever send it.
  if (sys3(SYS_GETPPID, 0, 0, 0) != agent) {
    say("__envoy-exec: cannot start Envoy ");
    say(file);
    say(": the agent (pid ");
    say_number(agent);
    say(") died before Envoy started\n");
    leave(127);
  }
  r = sys3(SYS_EXECVE, (long)file, (long)(argv + 2), (long)envp);
  fail(file, "execve failed", -r);
}
