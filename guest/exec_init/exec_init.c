// minivmm exec's init (docs/exec.md): PID 1 of a guest that runs one host command and hands its
// exit status back. The VMM packs it into an initramfs with the kernel's own modules (their load
// order in /modules.list) and a spec of the run (/exec.spec, spec.c). In order, it:
//   1. mounts /dev (devtmpfs), /proc and /sys of the initramfs and loads the modules;
//   2. opens the command's stdout and stderr consoles (virtio-console hvcN), in raw mode so
//      the bytes reach the host as the command wrote them (no \n -> \r\n);
//   3. mounts the host's / (9p, read-only) under a tmpfs through overlayfs (without overlayfs:
//      read-only, with tmpfs on /tmp, /run, /var/tmp and /root), /proc, /sys, /dev, /dev/pts,
//      /dev/shm, /tmp, and last each share at its host path (so a share below /tmp is not
//      hidden by the tmpfs there); moves it over / and chroots;
//   4. runs the command in the host's working directory with the spec's environment, reaps
//      every child as PID 1 must, drains the consoles and writes the status to
//      isa-debug-exit (status.h says how it is encoded).
// It never exits: PID 1 exiting would panic the kernel, which the VMM would then report.
// Static, on glibc; no busybox, no shell.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "exec_init.h"

static int g_err_fd = -1;  // the command's stderr console, once open

void init_say(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  int kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (kmsg >= 0) {
    (void)!write(kmsg, line, (size_t)n);
    close(kmsg);
  }
  if (g_err_fd >= 0) (void)!write(g_err_fd, line, (size_t)n);
}

void report_status(unsigned kind, unsigned value) {
  if (g_err_fd >= 0) tcdrain(g_err_fd);
  sync();
  if (ioperm(kExecStatusPort, 4, 1) == 0) {
    outl(exec_status_word(kind, value), kExecStatusPort);
  } else {
    init_say("minivmm-init: ioperm(0x%x): %s", kExecStatusPort, strerror(errno));
  }
  for (;;) pause();  // the VMM ends the run on the write
}

void init_failed(unsigned reason, const char* fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  init_say("minivmm-init: failed: %s", what);
  report_status(kStatusInitFailed, reason);
}

static void mount_or_fail(const char* src, const char* dst, const char* type, unsigned long flags,
                          const char* data, unsigned reason) {
  mkdir(dst, 0755);
  if (mount(src, dst, type, flags, data) != 0) {
    init_failed(reason, "mount %s (%s) on %s: %s", src, type, dst, strerror(errno));
  }
}

// The kernel's modules, one path per line in load order (dependencies first). A module the
// kernel already has (EEXIST) is fine; a compressed one is handed to the kernel to unpack
// (MODULE_INIT_COMPRESSED_FILE, Linux 6.4+ with CONFIG_MODULE_DECOMPRESS).
static void load_modules(void) {
  FILE* list = fopen("/modules.list", "re");
  if (!list) return;  // every module built in
  char path[4096];
  while (fgets(path, sizeof path, list)) {
    path[strcspn(path, "\n")] = 0;
    if (!path[0]) continue;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) init_failed(kFailModule, "module %s: %s", path, strerror(errno));
    const size_t n = strlen(path);
    const int compressed = (n > 3 && strcmp(path + n - 3, ".xz") == 0) ||
                           (n > 4 && strcmp(path + n - 4, ".zst") == 0) ||
                           (n > 3 && strcmp(path + n - 3, ".gz") == 0);
    if (syscall(SYS_finit_module, fd, "", compressed ? 4 /* MODULE_INIT_COMPRESSED_FILE */ : 0) !=
            0 &&
        errno != EEXIST) {
      init_failed(kFailModule, "finit_module %s: %s", path, strerror(errno));
    }
    close(fd);
  }
  fclose(list);
}

// A console device the modules just created: devtmpfs makes the node as the driver binds.
static int open_console(const char* path) {
  int fd = -1;
  for (int i = 0; i < 500 && fd < 0; ++i) {  // up to 5 s
    fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) usleep(10000);
  }
  if (fd < 0) init_failed(kFailConsole, "open %s: %s", path, strerror(errno));
  struct termios t;
  if (tcgetattr(fd, &t) == 0) {
    cfmakeraw(&t);
    tcsetattr(fd, TCSANOW, &t);
  }
  return fd;
}

// mount(2) of a 9p share; virtio 9p channels register as their driver binds, so a tag not
// there yet (ENOENT) is retried for a while.
static void mount_9p(const char* tag, const char* dst, int read_only, unsigned reason) {
  const char* opts = "trans=virtio,version=9p2000.L,msize=512000,access=any";
  mkdir(dst, 0755);
  int rc = -1;
  for (int i = 0; i < 500 && rc != 0; ++i) {
    rc = mount(tag, dst, "9p", read_only ? MS_RDONLY : 0, opts);
    if (rc != 0 && errno != ENOENT) break;
    if (rc != 0) usleep(10000);
  }
  if (rc != 0) init_failed(reason, "mount 9p '%s' on %s: %s", tag, dst, strerror(errno));
}

// 1 when / is the overlay (writable, nothing of it reaches the host), 0 when read-only.
static int mount_root(const struct exec_spec* spec) {
  mount_9p(spec->root_tag, "/lower", 1, kFailRoot);
  mount_or_fail("tmpfs", "/rw", "tmpfs", 0, "mode=0755", kFailRoot);
  mkdir("/rw/upper", 0755);
  mkdir("/rw/work", 0755);
  mkdir("/newroot", 0755);
  if (mount("overlay", "/newroot", "overlay", 0,
            "lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work") == 0) {
    return 1;
  }
  // No overlayfs: the host's / read-only, writable tmpfs where programs expect to write.
  init_say("minivmm-init: overlay: %s; / is read-only, tmpfs on /tmp /run /var/tmp /root",
           strerror(errno));
  mount_or_fail("/lower", "/newroot", NULL, MS_BIND | MS_REC, NULL, kFailRoot);
  static const char* const writable[] = {"/newroot/run", "/newroot/var/tmp", "/newroot/root"};
  for (size_t i = 0; i < sizeof writable / sizeof *writable; ++i) {
    mount("tmpfs", writable[i], "tmpfs", 0, "mode=0755");  // where the folder exists
  }
  return 0;
}

static void mkdir_p(char* path) {
  for (char* p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(path, 0755);
    *p = '/';
  }
  mkdir(path, 0755);
}

static void mount_system(const struct exec_spec* spec, int overlay) {
  mount_or_fail("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, kFailMount);
  mount_or_fail("sysfs", "/newroot/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, kFailMount);
  mount_or_fail("/dev", "/newroot/dev", NULL, MS_MOVE, NULL, kFailMount);
  mount_or_fail("devpts", "/newroot/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=0666",
                kFailMount);
  mount_or_fail("tmpfs", "/newroot/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", kFailMount);
  // A working folder under /tmp (a CI job's mktemp -d) must stay where the command starts: over
  // the overlay, /tmp is then the overlay's own (the host's files, writes kept in the guest)
  // instead of a fresh tmpfs that would hide it.
  const int cwd_in_tmp =
      strncmp(spec->cwd, "/tmp", 4) == 0 && (spec->cwd[4] == 0 || spec->cwd[4] == '/');
  if (!(overlay && cwd_in_tmp)) {
    mount_or_fail("tmpfs", "/newroot/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", kFailMount);
  }
  // The shares last, over the system's own mounts: a share under /tmp (or /dev/shm) would
  // otherwise be hidden by the tmpfs mounted there after it.
  for (int i = 0; i < spec->shares; ++i) {
    char dst[4200];
    snprintf(dst, sizeof dst, "/newroot%s", spec->share[i].path);
    mkdir_p(dst);
    mount_9p(spec->share[i].tag, dst, spec->share[i].read_only, kFailShare);
  }
  if (chdir("/newroot") != 0 || mount(".", "/", NULL, MS_MOVE, NULL) != 0 || chroot(".") != 0 ||
      chdir("/") != 0) {
    init_failed(kFailMount, "switching to the new root: %s", strerror(errno));
  }
}

static pid_t start_command(const struct exec_spec* spec, int out_fd, int err_fd) {
  if (chdir(spec->cwd) != 0) init_failed(kFailCwd, "chdir %s: %s", spec->cwd, strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) init_failed(kFailFork, "fork: %s", strerror(errno));
  if (pid > 0) return pid;
  setsid();
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  environ = (char**)spec->env;
  execvp(spec->argv[0], spec->argv);
  const int err = errno;
  dprintf(2, "minivmm exec: %s: %s\n", spec->argv[0], strerror(err));
  _exit(err == ENOENT ? 127 : 126);  // as a shell says it
}

int main(void) {
  mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
  // The initramfs has no /dev/console, so the kernel started us without fds 0-2: fill them,
  // or the consoles opened below would get them and the child's dup2s would close them.
  for (int fd = open("/dev/null", O_RDWR); fd >= 0; fd = open("/dev/null", O_RDWR)) {
    if (fd > 2) {
      close(fd);
      break;
    }
  }
  mount("proc", "/proc", "proc", 0, NULL);
  mount("sysfs", "/sys", "sysfs", 0, NULL);
  struct exec_spec spec;
  if (read_exec_spec("/exec.spec", &spec) != 0) init_failed(kFailSpec, "/exec.spec: %s", spec.error);
  load_modules();
  const int out_fd = open_console(spec.stdout_dev);
  g_err_fd = open_console(spec.stderr_dev);
  const int overlay = mount_root(&spec);
  mount_system(&spec, overlay);
  sethostname("minivmm", 7);
  const pid_t child = start_command(&spec, out_fd, g_err_fd);
  for (;;) {
    int st = 0;
    const pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) init_failed(kFailFork, "waitpid: %s", strerror(errno));
    if (pid != child) continue;  // an orphan the command left: reaped
    tcdrain(out_fd);
    if (WIFEXITED(st)) report_status(kStatusExited, (unsigned)WEXITSTATUS(st));
    if (WIFSIGNALED(st)) report_status(kStatusSignaled, (unsigned)WTERMSIG(st));
  }
}
