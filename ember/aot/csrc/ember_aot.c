/* libember_aot: run a model of an ember .pt2 package from C, without Python (runner.h).

   The package is mapped read-only; its zip central directory is checked (names without "..",
   stored entries only, sizes within the file); the model's metadata (a flat JSON object of
   strings) is checked against this machine (platform, CPU features, ABI versions); the model
   library's bytes must match the sha256 recorded there before they are written to a private
   temporary directory and dlopen'ed (the file and directory are removed right after).  Weights
   are used in place from the map; a buffer the model updates (EMBER_AOT_ARG_MUTABLE) gets a
   private copy at load.  A package that calls Python custom ops is refused (ECOMPAT).  The model is called through its interface table
   (model.h), the same one the Python loader uses. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ember/aot/model.h"
#include "ember/aot/runner.h"

#include "sha256.h"

static __thread char g_error[1024];

static int fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  return code;
}

const char *ember_aot_last_error(void) { return g_error; }

/* ------------------------------------------------------------------------ zip */
typedef struct {
  char *name;
  uint64_t offset; /* of the data */
  uint64_t size;
} entry;

typedef struct {
  char *key, *value;
} meta_kv;

struct ember_aot_model {
  const uint8_t *map;
  size_t map_size;
  entry *entries;
  int64_t n_entries;
  meta_kv *meta;
  int64_t n_meta;
  void *dl;
  const ember_aot_model_v1 *iface;
  void **args; /* constants: pointers into the map (mutable buffers: owned copies) */
  void **owned; /* the mutable buffers' private copies (freed by unload) */
  int64_t n_user;
  int n_mutable;
  char busy; /* a model with mutable buffers runs one call at a time */
};

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static int safe_name(const char *s, size_t n) {
  if (n == 0 || s[0] == '/' || memchr(s, '\\', n) || memchr(s, '\0', n)) return 0;
  for (size_t i = 0; i + 1 < n; i++) /* a ".." path component */
    if (s[i] == '.' && s[i + 1] == '.' && (i == 0 || s[i - 1] == '/') &&
        (i + 2 == n || s[i + 2] == '/'))
      return 0;
  return 1;
}

static int zip64_extra(const uint8_t *x, size_t n, uint64_t *usize, uint64_t *csize,
                       uint64_t *off, int need_u, int need_c, int need_o) {
  while (n >= 4) {
    uint16_t id = rd16(x), len = rd16(x + 2);
    if ((size_t)len + 4 > n) return 0;
    if (id == 1) {
      const uint8_t *p = x + 4;
      size_t left = len;
      if (need_u) { if (left < 8) return 0; *usize = rd64(p); p += 8; left -= 8; }
      if (need_c) { if (left < 8) return 0; *csize = rd64(p); p += 8; left -= 8; }
      if (need_o) { if (left < 8) return 0; *off = rd64(p); }
      return 1;
    }
    x += 4 + len;
    n -= 4 + (size_t)len;
  }
  return !(need_u || need_c || need_o);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* A name twice would let two readers see different files: refused. */
static int check_duplicates(ember_aot_model *m, const char *path) {
  entry *copy = malloc(sizeof(entry) * (size_t)(m->n_entries ? m->n_entries : 1));
  if (!copy) return fail(EMBER_AOT_ENOMEM, "out of memory");
  memcpy(copy, m->entries, sizeof(entry) * (size_t)m->n_entries);
  qsort(copy, (size_t)m->n_entries, sizeof(entry), by_name);
  for (int64_t i = 1; i < m->n_entries; i++)
    if (strcmp(copy[i - 1].name, copy[i].name) == 0) {
      int rc = fail(EMBER_AOT_EFORMAT, "%s: duplicate entry '%.200s'", path, copy[i].name);
      free(copy);
      return rc;
    }
  free(copy);
  return 0;
}

static int read_directory(ember_aot_model *m, const char *path) {
  const uint8_t *b = m->map;
  size_t n = m->map_size;
  if (n < 22) return fail(EMBER_AOT_EFORMAT, "%s: too short to be a zip archive", path);
  size_t lo = n > 65557 ? n - 65557 : 0, eocd = (size_t)-1;
  for (size_t i = n - 22 + 1; i-- > lo;)
    if (rd32(b + i) == 0x06054b50) { eocd = i; break; }
  if (eocd == (size_t)-1) return fail(EMBER_AOT_EFORMAT, "%s: not a zip archive (no end of "
                                      "central directory; truncated?)", path);
  uint64_t count = rd16(b + eocd + 10), cd_size = rd32(b + eocd + 12), cd = rd32(b + eocd + 16);
  if ((count == 0xFFFF || cd == 0xFFFFFFFFu) && eocd >= 20 &&
      rd32(b + eocd - 20) == 0x07064b50) {
    uint64_t z = rd64(b + eocd - 12);
    if (z + 56 > n || rd32(b + z) != 0x06064b50)
      return fail(EMBER_AOT_EFORMAT, "%s: bad zip64 end record", path);
    count = rd64(b + z + 32); cd_size = rd64(b + z + 40); cd = rd64(b + z + 48);
  }
  if (cd > n || cd_size > n - cd || count > cd_size / 46 + 1)
    return fail(EMBER_AOT_EFORMAT, "%s: the central directory lies outside the file", path);
  m->entries = calloc(count ? count : 1, sizeof(entry));
  if (!m->entries) return fail(EMBER_AOT_ENOMEM, "out of memory");
  size_t p = cd;
  for (uint64_t k = 0; k < count; k++) {
    if (p + 46 > cd + cd_size || rd32(b + p) != 0x02014b50)
      return fail(EMBER_AOT_EFORMAT, "%s: corrupted central directory", path);
    uint16_t flags = rd16(b + p + 8), method = rd16(b + p + 10);
    uint64_t csize = rd32(b + p + 20), usize = rd32(b + p + 24), off = rd32(b + p + 42);
    size_t nl = rd16(b + p + 28), xl = rd16(b + p + 30), cl = rd16(b + p + 32);
    if (p + 46 + nl + xl + cl > cd + cd_size)
      return fail(EMBER_AOT_EFORMAT, "%s: corrupted central directory", path);
    const char *name = (const char *)b + p + 46;
    if (!safe_name(name, nl))
      return fail(EMBER_AOT_EFORMAT, "%s: unsafe entry name '%.*s' (absolute or with '..')",
                  path, (int)(nl > 200 ? 200 : nl), name);
    if (!zip64_extra(b + p + 46 + nl, xl, &usize, &csize, &off, usize == 0xFFFFFFFFu,
                     csize == 0xFFFFFFFFu, off == 0xFFFFFFFFu))
      return fail(EMBER_AOT_EFORMAT, "%s: bad zip64 field for '%.*s'", path, (int)nl, name);
    if (method != 0 || (flags & 1))
      return fail(EMBER_AOT_EFORMAT, "%s: entry '%.*s' is compressed or encrypted; packages "
                  "store entries uncompressed", path, (int)nl, name);
    if (csize != usize)
      return fail(EMBER_AOT_EFORMAT, "%s: entry '%.*s' has lying sizes", path, (int)nl, name);
    if (off > n || n - off < 30 || rd32(b + off) != 0x04034b50)
      return fail(EMBER_AOT_EFORMAT, "%s: entry '%.*s' has a bad local header (truncated?)",
                  path, (int)nl, name);
    uint64_t data = off + 30 + rd16(b + off + 26) + rd16(b + off + 28);
    if (data > n || usize > n - data)
      return fail(EMBER_AOT_EFORMAT, "%s: entry '%.*s' runs past the end of the file "
                  "(truncated or lying sizes)", path, (int)nl, name);
    entry *e = &m->entries[m->n_entries++];
    e->name = strndup(name, nl);
    if (!e->name) return fail(EMBER_AOT_ENOMEM, "out of memory");
    e->offset = data;
    e->size = usize;
    p += 46 + nl + xl + cl;
  }
  return check_duplicates(m, path);
}

static const entry *find(ember_aot_model *m, const char *name) {
  for (int64_t i = 0; i < m->n_entries; i++)
    if (strcmp(m->entries[i].name, name) == 0) return &m->entries[i];
  return NULL;
}

/* ------------------------------------------------------------------------ metadata */
static const char *json_string(const char *p, const char *end, char **out) {
  if (p >= end || *p != '"') return NULL;
  p++;
  size_t cap = 64, n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  while (p < end && *p != '"') {
    char c = *p++;
    if (c == '\\') {
      if (p >= end) break;
      char e = *p++;
      if (e == 'n') c = '\n'; else if (e == 't') c = '\t'; else if (e == 'r') c = '\r';
      else if (e == 'b') c = '\b'; else if (e == 'f') c = '\f';
      else if (e == 'u') {
        if (end - p < 4) break;
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
          char h = *p++;
          v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
        }
        c = v < 128 ? (char)v : '?';
      } else c = e;
    }
    if (n + 2 > cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) { free(s); return NULL; }
      s = t;
    }
    s[n++] = c;
  }
  if (p >= end) { free(s); return NULL; }
  s[n] = 0;
  *out = s;
  return p + 1;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  return p;
}

static int parse_metadata(ember_aot_model *m, const char *p, size_t n, const char *name) {
  const char *end = p + n;
  p = skip_ws(p, end);
  if (p >= end || *p++ != '{') return fail(EMBER_AOT_EFORMAT, "%s is not a flat JSON object of strings", name);
  size_t cap = 32;
  m->meta = calloc(cap, sizeof(meta_kv));
  if (!m->meta) return fail(EMBER_AOT_ENOMEM, "out of memory");
  p = skip_ws(p, end);
  if (p < end && *p == '}') return 0;
  for (;;) {
    char *k = NULL, *v = NULL;
    p = json_string(skip_ws(p, end), end, &k);
    if (!p) return fail(EMBER_AOT_EFORMAT, "%s is not valid JSON (expected a string key)", name);
    p = skip_ws(p, end);
    if (p >= end || *p++ != ':') { free(k); return fail(EMBER_AOT_EFORMAT, "%s is not valid JSON", name); }
    p = json_string(skip_ws(p, end), end, &v);
    if (!p) { free(k); return fail(EMBER_AOT_EFORMAT, "%s is not a flat JSON object of strings", name); }
    if ((size_t)m->n_meta == cap) {
      meta_kv *t = realloc(m->meta, (cap *= 2) * sizeof(meta_kv));
      if (!t) { free(k); free(v); return fail(EMBER_AOT_ENOMEM, "out of memory"); }
      m->meta = t;
    }
    m->meta[m->n_meta].key = k;
    m->meta[m->n_meta++].value = v;
    p = skip_ws(p, end);
    if (p < end && *p == ',') { p++; continue; }
    if (p < end && *p == '}') return 0;
    return fail(EMBER_AOT_EFORMAT, "%s is not valid JSON", name);
  }
}

const char *ember_aot_metadata(ember_aot_model *m, const char *key) {
  if (!m || !key) return NULL;
  for (int64_t i = 0; i < m->n_meta; i++)
    if (strcmp(m->meta[i].key, key) == 0) return m->meta[i].value;
  return NULL;
}

/* ------------------------------------------------------------------------ compatibility */
static int has_cpu_flag(const char *flags, const char *f) {
  size_t n = strlen(f);
  for (const char *p = flags; (p = strstr(p, f)) != NULL; p += n)
    if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
      return 1;
  return 0;
}

static int check_compat(ember_aot_model *m, const char *path, const char *model) {
  struct utsname u;
  const char *plat = ember_aot_metadata(m, "AOTI_PLATFORM");
  const char *mach = ember_aot_metadata(m, "AOTI_MACHINE");
  if (!ember_aot_metadata(m, "ember.model_abi"))
    return fail(EMBER_AOT_ECOMPAT, "%s (model '%s') was not built by ember.aot (no "
                "ember.model_abi in its metadata; a PyTorch AOTInductor package?)", path, model);
  if (!plat || strcmp(plat, "linux") != 0)
    return fail(EMBER_AOT_ECOMPAT, "%s (model '%s') was built for AOTI_PLATFORM='%s'; this "
                "machine is 'linux'", path, model, plat ? plat : "?");
  if (uname(&u) == 0 && (!mach || strcmp(mach, u.machine) != 0))
    return fail(EMBER_AOT_ECOMPAT, "%s (model '%s') was built for AOTI_MACHINE='%s'; this "
                "machine is '%s'", path, model, mach ? mach : "?", u.machine);
  const char *keys[2] = {"ember.model_abi", "ember.runtime_abi"};
  const int have[2] = {EMBER_AOT_MODEL_ABI_VERSION, EMBER_AOT_RUNTIME_VERSION};
  for (int i = 0; i < 2; i++) {
    const char *v = ember_aot_metadata(m, keys[i]);
    if (!v || atoi(v) < 1 || atoi(v) > have[i])
      return fail(EMBER_AOT_ECOMPAT, "%s (model '%s') needs %s version %s; this runtime "
                  "supports versions up to %d: upgrade libember_aot", path, model, keys[i],
                  v ? v : "?", have[i]);
  }
  const char *py = ember_aot_metadata(m, "ember.python_ops");
  if (py && strcmp(py, "[]") != 0)
    return fail(EMBER_AOT_ECOMPAT, "%s (model '%s') needs Python at run time: it calls the "
                "Python custom ops %s; load it from Python with ember.aot.load_package (with "
                "the ops registered), or replace them with kernel ops", path, model, py);
  const char *need = ember_aot_metadata(m, "ember.cpu_features");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!need || !*need || !f) { if (f) fclose(f); return 0; }
  char *line = NULL, *flags = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0)
    if (strncmp(line, "flags", 5) == 0) { flags = strdup(line); break; }
  free(line);
  fclose(f);
  if (!flags) return 0;
  char missing[512] = "";
  char *copy = strdup(need), *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (!has_cpu_flag(strchr(flags, ':') ? strchr(flags, ':') + 1 : flags, t) &&
        strlen(missing) + strlen(t) + 3 < sizeof missing) {
      if (*missing) strcat(missing, ", ");
      strcat(missing, t);
    }
  free(copy);
  free(flags);
  if (*missing)
    return fail(EMBER_AOT_ECOMPAT, "%s (model '%s') was built for CPU features this CPU "
                "lacks: %s (built with -march=%s); rebuild the package for a baseline ISA",
                path, model, missing, ember_aot_metadata(m, "AOTI_CPU_ISA"));
  return 0;
}

/* ------------------------------------------------------------------------ the library */
static int load_library(ember_aot_model *m, const entry *so, const char *path) {
  const char *want = ember_aot_metadata(m, "ember.library_sha256");
  char got[65];
  ember_sha256_hex(m->map + so->offset, so->size, got);
  if (!want || strcmp(want, got) != 0)
    return fail(EMBER_AOT_EHASH, "%s: %s does not match its recorded sha256 (%.16s... vs "
                "%.16s...): refusing to load it", path, so->name, got, want ? want : "?");
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/ember-aot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return fail(EMBER_AOT_EIO, "cannot create a temporary directory: %s",
                                 strerror(errno));
  char file[4200];
  snprintf(file, sizeof file, "%s/model.so", dir);
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0700);
  int rc = 0;
  if (fd < 0) rc = fail(EMBER_AOT_EIO, "cannot write %s: %s", file, strerror(errno));
  for (uint64_t done = 0; !rc && done < so->size;) {
    ssize_t w = write(fd, m->map + so->offset + done, so->size - done);
    if (w <= 0) rc = fail(EMBER_AOT_EIO, "cannot write %s: %s", file, strerror(errno));
    else done += (uint64_t)w;
  }
  if (fd >= 0) close(fd);
  if (!rc) {
    m->dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!m->dl) rc = fail(EMBER_AOT_ELOAD, "%s: cannot load %s: %s", path, so->name, dlerror());
  }
  unlink(file);
  rmdir(dir);
  if (rc) return rc;
  ember_aot_model_get_v1_fn get = (ember_aot_model_get_v1_fn)dlsym(m->dl, "ember_aot_model_get_v1");
  if (!get) return fail(EMBER_AOT_ELOAD, "%s: %s exports no ember_aot_model_get_v1", path,
                        so->name);
  m->iface = get();
  /* products whose B is a constant pack it once per load (the runner never changes them) */
  void (*prepack)(int) = (void (*)(int))dlsym(m->dl, "ember_aot_prepack_v1");
  const char *pp = getenv("EMBER_AOT_PREPACK");   /* "0": pack per call (less memory) */
  if (prepack) prepack(!(pp && strcmp(pp, "0") == 0));
  if (!m->iface || m->iface->abi_version != EMBER_AOT_MODEL_ABI_VERSION)
    return fail(EMBER_AOT_ECOMPAT, "%s: model ABI %d; this runtime speaks %d", path,
                m->iface ? m->iface->abi_version : -1, EMBER_AOT_MODEL_ABI_VERSION);
  return 0;
}

static int bind_weights(ember_aot_model *m, const char *root, const char *model,
                        const char *path) {
  const ember_aot_model_v1 *f = m->iface;
  m->args = calloc((size_t)f->n_args + 1, sizeof(void *));
  m->owned = calloc((size_t)f->n_args + 1, sizeof(void *));
  if (!m->args || !m->owned) return fail(EMBER_AOT_ENOMEM, "out of memory");
  char name[1024];
  for (int32_t i = 0; i < f->n_args; i++) {
    const ember_aot_arg_info *a = &f->args[i];
    if (a->kind == EMBER_AOT_ARG_USER) { m->n_user++; continue; }
    if (a->kind != EMBER_AOT_ARG_CONSTANT && a->kind != EMBER_AOT_ARG_MUTABLE)
      return fail(EMBER_AOT_EFORMAT, "%s: argument %s has an unknown kind %d", path, a->name,
                  a->kind);
    snprintf(name, sizeof name, "%sdata/weights/%s/%s", root, model, a->weight_file);
    const entry *e = find(m, name);
    if (!e) return fail(EMBER_AOT_EFORMAT, "%s: missing weight entry %s (%s)", path, name, a->name);
    if ((int64_t)e->size != a->nbytes)
      return fail(EMBER_AOT_EFORMAT, "%s: weight %s has %llu bytes; the model expects %lld",
                  path, a->name, (unsigned long long)e->size, (long long)a->nbytes);
    m->args[i] = (void *)(m->map + e->offset);
    if (a->kind == EMBER_AOT_ARG_MUTABLE) { /* updated by every run: a private copy */
      if (posix_memalign(&m->owned[i], 64, e->size ? (size_t)e->size : 64) != 0)
        return fail(EMBER_AOT_ENOMEM, "out of memory copying buffer %s", a->name);
      memcpy(m->owned[i], m->map + e->offset, (size_t)e->size);
      m->args[i] = m->owned[i];
      m->n_mutable++;
    }
  }
  return 0;
}

static int find_model(ember_aot_model *m, const char *path, const char *model, char *root,
                      const entry **meta, const entry **so) {
  const entry *fmt = NULL;
  for (int64_t i = 0; i < m->n_entries; i++) {
    const char *n = m->entries[i].name, *s = strstr(n, "archive_format");
    if (s && strcmp(s, "archive_format") == 0 && (s == n || (s[-1] == '/' && !memchr(n, '/', (size_t)(s - n - 1)))))
      fmt = &m->entries[i];
  }
  if (!fmt) return fail(EMBER_AOT_EFORMAT, "%s: no archive_format entry: not a .pt2 package", path);
  size_t rl = strlen(fmt->name) - strlen("archive_format");
  if (rl >= 256) return fail(EMBER_AOT_EFORMAT, "%s: root folder name too long", path);
  memcpy(root, fmt->name, rl);
  root[rl] = 0;
  char prefix[1024];
  snprintf(prefix, sizeof prefix, "%sdata/aotinductor/%s/", root, model);
  size_t pl = strlen(prefix);
  *meta = NULL;
  for (int64_t i = 0; i < m->n_entries; i++) {
    const char *n = m->entries[i].name;
    size_t len = strlen(n);
    if (strncmp(n, prefix, pl) == 0 && !strchr(n + pl, '/') && len > 22 &&
        strcmp(n + len - 22, ".wrapper_metadata.json") == 0)
      *meta = &m->entries[i];
  }
  if (!*meta) return fail(EMBER_AOT_ENOTFOUND, "%s has no model '%s'", path, model);
  char so_name[1100];
  snprintf(so_name, sizeof so_name, "%.*s.wrapper.so",
           (int)(strlen((*meta)->name) - 22), (*meta)->name);
  *so = find(m, so_name);
  if (!*so) return fail(EMBER_AOT_EFORMAT, "%s: missing %s", path, so_name);
  if ((*meta)->size > (64u << 20)) return fail(EMBER_AOT_EFORMAT, "%s: metadata too large", path);
  return 0;
}

int ember_aot_load(const char *package_path, const char *model_name, ember_aot_model **out) {
  if (!package_path || !out) return fail(EMBER_AOT_EARG, "ember_aot_load: NULL argument");
  *out = NULL;
  const char *model = model_name ? model_name : "model";
  if (strchr(model, '/') || strstr(model, ".."))
    return fail(EMBER_AOT_EARG, "bad model name '%s'", model);
  ember_aot_model *m = calloc(1, sizeof *m);
  if (!m) return fail(EMBER_AOT_ENOMEM, "out of memory");
  int fd = open(package_path, O_RDONLY | O_CLOEXEC), rc = 0;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    rc = fail(EMBER_AOT_EIO, "cannot open %s: %s", package_path, strerror(errno));
  } else if (st.st_size == 0) {
    rc = fail(EMBER_AOT_EFORMAT, "%s is empty: not a package", package_path);
  } else {
    m->map_size = (size_t)st.st_size;
    void *p = mmap(NULL, m->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) rc = fail(EMBER_AOT_EIO, "cannot map %s: %s", package_path, strerror(errno));
    else m->map = p;
  }
  if (fd >= 0) close(fd);
  char root[256];
  const entry *meta = NULL, *so = NULL;
  if (!rc) rc = read_directory(m, package_path);
  if (!rc) rc = find_model(m, package_path, model, root, &meta, &so);
  if (!rc) rc = parse_metadata(m, (const char *)m->map + meta->offset, meta->size, meta->name);
  if (!rc) rc = check_compat(m, package_path, model);
  if (!rc) rc = load_library(m, so, package_path);
  if (!rc) rc = bind_weights(m, root, model, package_path);
  if (rc) { ember_aot_unload(m); return rc; }
  const char *env = getenv("EMBER_NUM_THREADS");
  long threads = env ? atol(env) : sysconf(_SC_NPROCESSORS_ONLN);
  m->iface->set_num_threads(threads > 0 ? (int)threads : 1);
  *out = m;
  return 0;
}

int ember_aot_num_inputs(ember_aot_model *m, int64_t *n) {
  if (!m || !n) return fail(EMBER_AOT_EARG, "NULL argument");
  *n = m->n_user;
  return 0;
}

int ember_aot_num_outputs(ember_aot_model *m, int64_t *n) {
  if (!m || !n) return fail(EMBER_AOT_EARG, "NULL argument");
  *n = m->iface->n_outputs;
  return 0;
}

static int check_input(const DLTensor *t, const ember_aot_arg_info *a, int64_t k) {
  if (!t || (!t->data && t->ndim > 0)) return fail(EMBER_AOT_EARG, "input %lld (%s) is NULL", (long long)k, a->name);
  if (t->device.device_type != kDLCPU)
    return fail(EMBER_AOT_EARG, "input %lld (%s) is not on the CPU", (long long)k, a->name);
  if (t->dtype.code != a->dtype_code || t->dtype.bits != a->dtype_bits || t->dtype.lanes != 1)
    return fail(EMBER_AOT_EARG, "input %lld (%s) has DLPack dtype (%d, %d); expected (%d, %d)",
                (long long)k, a->name, t->dtype.code, t->dtype.bits, a->dtype_code, a->dtype_bits);
  if (t->ndim != a->ndim)
    return fail(EMBER_AOT_EARG, "input %lld (%s) has %d dims; expected %d", (long long)k, a->name,
                t->ndim, a->ndim);
  if (t->strides) {
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (t->shape[d] != 1 && t->strides[d] != expect)
        return fail(EMBER_AOT_EARG, "input %lld (%s) is not contiguous", (long long)k, a->name);
      expect *= t->shape[d];
    }
  }
  return 0;
}

int ember_aot_run(ember_aot_model *m, DLTensor *const *inputs, int64_t n_inputs,
                  DLTensor **outputs, int64_t n_outputs) {
  if (!m || (!inputs && n_inputs) || (!outputs && n_outputs))
    return fail(EMBER_AOT_EARG, "ember_aot_run: NULL argument");
  const ember_aot_model_v1 *f = m->iface;
  if (n_inputs != m->n_user || n_outputs != f->n_outputs)
    return fail(EMBER_AOT_EARG, "ember_aot_run: the model takes %lld inputs and %d outputs; "
                "got %lld and %lld", (long long)m->n_user, f->n_outputs, (long long)n_inputs,
                (long long)n_outputs);
  int rc = 0;
  for (int64_t k = 0; k < n_outputs; k++) outputs[k] = NULL;
  const int64_t **shapes = calloc((size_t)f->n_args + 1, sizeof *shapes);
  void **args = calloc((size_t)f->n_args + 1, sizeof *args);
  void **outs = calloc((size_t)f->n_outputs + 1, sizeof *outs);
  int64_t *ints = calloc((size_t)f->n_ints + 1, sizeof *ints);
  if (!shapes || !args || !outs || !ints) { rc = fail(EMBER_AOT_ENOMEM, "out of memory"); goto done; }
  for (int32_t i = 0, k = 0; i < f->n_args; i++) {
    const ember_aot_arg_info *a = &f->args[i];
    if (a->kind != EMBER_AOT_ARG_USER) {
      shapes[i] = a->shape;
      args[i] = m->args[i];
      continue;
    }
    const DLTensor *t = inputs[k];
    if ((rc = check_input(t, a, k))) goto done;
    shapes[i] = t->shape;
    args[i] = (char *)t->data + t->byte_offset;
    k++;
  }
  if ((rc = f->bind_sizes(shapes, ints))) {
    rc = fail(EMBER_AOT_EARG, "%s", f->message(rc));
    goto done;
  }
  for (int32_t k = 0; k < f->n_outputs; k++) {
    const ember_aot_arg_info *o = &f->outputs[k];
    DLTensor *t = calloc(1, sizeof *t);
    int64_t *shape = calloc((size_t)o->ndim + 1, sizeof *shape);
    if (!t || !shape) { free(t); free(shape); rc = fail(EMBER_AOT_ENOMEM, "out of memory"); goto done; }
    f->output_shape(k, ints, shape);
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= shape[d];
    size_t bytes = ((size_t)n * (o->dtype_bits / 8) + 63) & ~(size_t)63;
    t->data = NULL;
    if (posix_memalign(&t->data, 64, bytes ? bytes : 64) != 0) t->data = NULL;
    t->device.device_type = kDLCPU;
    t->ndim = o->ndim;
    t->dtype.code = o->dtype_code;
    t->dtype.bits = o->dtype_bits;
    t->dtype.lanes = 1;
    t->shape = shape;
    outputs[k] = t;
    if (!t->data) { rc = fail(EMBER_AOT_ENOMEM, "out of memory for output %d", k); goto done; }
    outs[k] = t->data;
  }
  if (m->n_mutable)
    while (__atomic_test_and_set(&m->busy, __ATOMIC_ACQUIRE)) sched_yield();
  if ((rc = f->run(args, outs, ints))) rc = fail(EMBER_AOT_ERUN, "the model failed (code %d): %s", rc, f->message(rc));
  if (m->n_mutable) __atomic_clear(&m->busy, __ATOMIC_RELEASE);
done:
  if (rc && outputs)
    for (int64_t k = 0; k < n_outputs; k++) { ember_aot_free_output(outputs[k]); outputs[k] = NULL; }
  free(shapes); free(args); free(outs); free(ints);
  return rc;
}

void ember_aot_free_output(DLTensor *t) {
  if (!t) return;
  free(t->data);
  free(t->shape);
  free(t);
}

void ember_aot_unload(ember_aot_model *m) {
  if (!m) return;
  if (m->owned && m->iface) /* before dlclose: iface lives in the library */
    for (int32_t i = 0; i < m->iface->n_args; i++) free(m->owned[i]);
  free(m->owned);
  if (m->dl) dlclose(m->dl);
  for (int64_t i = 0; i < m->n_entries; i++) free(m->entries[i].name);
  free(m->entries);
  for (int64_t i = 0; i < m->n_meta; i++) { free(m->meta[i].key); free(m->meta[i].value); }
  free(m->meta);
  free(m->args);
  if (m->map) munmap((void *)m->map, m->map_size);
  free(m);
}
