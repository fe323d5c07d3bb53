// /exec.spec: the run's command, environment, folder, shares and consoles (exec_init.h).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec_init.h"

static int fail(struct exec_spec* spec, const char* why, const char* key) {
  snprintf(spec->error, sizeof spec->error, "%s%s%s", why, key ? ": " : "", key ? key : "");
  return -1;
}

int parse_exec_spec(char* bytes, unsigned long len, struct exec_spec* spec) {
  memset(spec, 0, sizeof *spec);
  if (len == 0 || bytes[len - 1] != 0) return fail(spec, "not NUL-terminated", NULL);
  char* strings[8];
  int argc = 0, envc = 0;
  for (unsigned long at = 0; at < len;) {
    char* key = bytes + at;
    at += strlen(key) + 1;
    const int values = strcmp(key, "share") == 0 ? 3 : 1;
    for (int i = 0; i < values; ++i) {
      if (at >= len) return fail(spec, "record cut short", key);
      strings[i] = bytes + at;
      at += strlen(strings[i]) + 1;
    }
    if (strcmp(key, "arg") == 0) {
      if (argc >= kMaxArgs) return fail(spec, "too many arguments", NULL);
      spec->argv[argc++] = strings[0];
    } else if (strcmp(key, "env") == 0) {
      if (envc >= kMaxEnv || !strchr(strings[0], '=')) return fail(spec, "bad env", strings[0]);
      spec->env[envc++] = strings[0];
    } else if (strcmp(key, "cwd") == 0) {
      spec->cwd = strings[0];
    } else if (strcmp(key, "root") == 0) {
      spec->root_tag = strings[0];
    } else if (strcmp(key, "stdout") == 0) {
      spec->stdout_dev = strings[0];
    } else if (strcmp(key, "stderr") == 0) {
      spec->stderr_dev = strings[0];
    } else if (strcmp(key, "share") == 0) {
      if (spec->shares >= kMaxShares) return fail(spec, "too many shares", NULL);
      if (strings[1][0] != '/') return fail(spec, "share path not absolute", strings[1]);
      struct exec_share* s = &spec->share[spec->shares++];
      s->tag = strings[0];
      s->path = strings[1];
      s->read_only = strcmp(strings[2], "ro") == 0;
    } else {
      return fail(spec, "unknown key", key);
    }
  }
  if (argc == 0) return fail(spec, "no command", NULL);
  if (!spec->cwd || !spec->root_tag || !spec->stdout_dev || !spec->stderr_dev) {
    return fail(spec, "missing cwd, root, stdout or stderr", NULL);
  }
  return 0;
}

int read_exec_spec(const char* path, struct exec_spec* spec) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20)) {
    memset(spec, 0, sizeof *spec);
    snprintf(spec->error, sizeof spec->error, "cannot read it (%s)", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  char* bytes = malloc((size_t)st.st_size);
  ssize_t got = 0;
  while (bytes && got < st.st_size) {
    const ssize_t n = read(fd, bytes + got, (size_t)(st.st_size - got));
    if (n <= 0) break;
    got += n;
  }
  close(fd);
  if (!bytes || got != st.st_size) {
    memset(spec, 0, sizeof *spec);
    snprintf(spec->error, sizeof spec->error, "short read");
    return -1;
  }
  return parse_exec_spec(bytes, (unsigned long)got, spec);
}
