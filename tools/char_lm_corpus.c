/* The language model's corpus: a file or a directory of plain text read
   into memory, its byte vocabulary, and the train/validation split. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "char_lm_internal.h"
#include "tool.h"

enum { BLOCK = 4096, HELD_OUT_EVERY = 10 };
/* The most text read: its ids take 4 bytes a character, twice. */
#define CORPUS_MAX ((size_t)256 << 20)

typedef struct text {
    unsigned char *data;
    size_t n, cap;
} text;

/* Appends the file's bytes to t; 0, or 1 after printing an error. */
static int read_file(text *t, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_tool_fail("%s: %s", path, strerror(errno));
    int bad = 0;
    for (;;) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 1 << 16;
            unsigned char *p = realloc(t->data, cap);
            if (!p) {
                bad = kiln_tool_fail("%s: out of memory", path);
                break;
            }
            t->data = p, t->cap = cap;
        }
        size_t got = fread(t->data + t->n, 1, t->cap - t->n, f);
        t->n += got;
        if (t->n > CORPUS_MAX) {
            bad = kiln_tool_fail("%s: the corpus is over %zu MiB of text", path,
                                 CORPUS_MAX >> 20);
            break;
        }
        if (got == 0) {
            if (ferror(f))
                bad = kiln_tool_fail("%s: read error", path);
            break;
        }
    }
    fclose(f);
    return bad;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir of regular files without a dot (fortune's text files,
   not its .dat indexes and .u8 links), sorted; NULL after an error. */
static char **list_texts(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        kiln_tool_fail("%s: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    int n = 0, cap = 0, bad = 0;
    struct dirent *e;
    while (!bad && (e = readdir(d))) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strchr(e->d_name, '.') || stat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, (size_t)cap * sizeof *p);
            bad = !p;
            names = p ? p : names;
        }
        if (!bad && !(names[n++] = strdup(e->d_name)))
            n--, bad = 1;
    }
    closedir(d);
    if (bad) {
        kiln_tool_fail("%s: out of memory", dir);
        while (n > 0)
            free(names[--n]);
        free(names);
        return NULL;
    }
    qsort(names, (size_t)n, sizeof *names, by_name);
    *count = n;
    return names ? names : calloc(1, sizeof *names);
}

/* The whole text at path; 0, or 1 after printing an error. */
static int read_text(text *t, const char *path)
{
    struct stat st;
    if (stat(path, &st))
        return kiln_tool_fail("%s: %s (the fortunes package's texts are in "
                              "/usr/share/games/fortunes: scripts/setup)",
                              path, strerror(errno));
    if (S_ISREG(st.st_mode))
        return read_file(t, path);
    if (!S_ISDIR(st.st_mode)) /* /dev/zero would never end */
        return kiln_tool_fail("%s: not a regular file or a directory", path);
    int n = 0, bad = 0;
    char **names = list_texts(path, &n);
    if (!names)
        return 1;
    for (int i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        bad = bad || read_file(t, full);
        free(names[i]);
    }
    free(names);
    return bad;
}

/* The vocabulary of t and the ids of its blocks, split. */
static int split(lm_corpus *c, const text *t)
{
    memset(c->ids, 0xff, sizeof c->ids);
    for (size_t i = 0; i < t->n; i++)
        c->ids[t->data[i]] = 0;
    for (int b = 0; b < 256; b++)
        if (c->ids[b] == 0) {
            c->chars[c->vocab] = (unsigned char)b;
            c->ids[b] = (int16_t)c->vocab++;
        }
    c->train = malloc(t->n * sizeof *c->train);
    c->val = malloc(t->n * sizeof *c->val);
    if (!c->train || !c->val)
        return kiln_tool_fail("corpus: out of memory");
    for (size_t i = 0; i < t->n; i++) {
        int held = i / BLOCK % HELD_OUT_EVERY == HELD_OUT_EVERY - 1;
        int32_t id = c->ids[t->data[i]];
        if (held)
            c->val[c->n_val++] = id;
        else
            c->train[c->n_train++] = id;
    }
    return 0;
}

int lm_corpus_load(lm_corpus *c, const char *path, int context)
{
    memset(c, 0, sizeof *c);
    text t = {0};
    int bad = read_text(&t, path) || split(c, &t);
    free(t.data);
    if (!bad && (c->n_val <= context || c->n_train <= context))
        bad = kiln_tool_fail(
            "%s: %lld characters: too short for context %d (each "
            "tenth block of %d is held out)",
            path, (long long)(c->n_train + c->n_val), context, BLOCK);
    if (bad)
        lm_corpus_free(c);
    return bad;
}

void lm_corpus_free(lm_corpus *c)
{
    free(c->train);
    free(c->val);
    memset(c, 0, sizeof *c);
}
