/* inicat: print the settings of INI files, resolved.
 *
 *   inicat [-s SECTION] [-k] FILE...
 *
 * Reads each FILE as an INI file: `[section]` headers, `key = value` lines, comments after
 * `;` or `#` at the start of a line, values in double quotes with \n \t \" \\ escapes, a
 * trailing backslash continuing the value on the next line, `include = PATH` reading another
 * file (relative to the including one) in place, and `${section.key}` (or `${key}` for the
 * same section) in a value replaced by that setting's value. A later setting of the same
 * section and key replaces the earlier one. Prints `section.key=value`, one per line, sorted
 * by section then key (-k: keys only), only SECTION's with -s.
 *
 * Part of slice's native eval (eval/README.md): built with gcc -g -O1 by eval/run. */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 8
#define MAX_LINE 4096

struct entry {
    char *section;
    char *key;
    char *value;
    int line;
    const char *file;
};

struct config {
    struct entry *items;
    size_t len, cap;
    int errors;
};

struct options {
    const char *only_section;
    int keys_only;
};

static void die(const char *msg) {
    fprintf(stderr, "inicat: %s\n", msg);
    exit(2);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p)
        die("out of memory");
    return p;
}

static char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static size_t config_len(const struct config *c) { return c->len; }

static const char *entry_key(const struct entry *e) { return e->key; }

static const char *entry_section(const struct entry *e) { return e->section; }

static int is_comment(const char *s) { return *s == ';' || *s == '#'; }

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

static void warn_at(struct config *c, const char *file, int line, const char *what) {
    fprintf(stderr, "inicat: %s:%d: %s\n", file, line, what);
    c->errors++;
}

static struct entry *find_entry(struct config *c, const char *section, const char *key) {
    for (size_t i = 0; i < c->len; i++) {
        struct entry *e = &c->items[i];
        if (strcmp(e->section, section) == 0 && strcmp(e->key, key) == 0)
            return e;
    }
    return NULL;
}

/* A later setting of the same section and key replaces the earlier one, in place. */
static void set_entry(struct config *c, const char *section, const char *key, char *value, const char *file, int line) {
    struct entry *e = find_entry(c, section, key);
    if (e) {
        free(e->value);
        e->value = value;
        e->file = file;
        e->line = line;
        return;
    }
    if (c->len == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->items = realloc(c->items, c->cap * sizeof *c->items);
        if (!c->items)
            die("out of memory");
    }
    c->items[c->len++] = (struct entry){strdup(section), strdup(key), value, line, file};
}

/* A value: unquoted (trimmed, up to an inline ` ;` comment) or in double quotes with
 * escapes. */
static char *parse_value(struct config *c, const char *file, int line, const char *s) {
    if (*s != '"') {
        const char *semi = strstr(s, " ;");
        size_t n = semi ? (size_t)(semi - s) : strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
            n--;
        return xstrndup(s, n);
    }
    char *out = xmalloc(strlen(s) + 1), *o = out;
    for (s++; *s && *s != '"'; s++) {
        if (*s != '\\') {
            *o++ = *s;
            continue;
        }
        switch (*++s) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\0': s--; break;
        default:
            warn_at(c, file, line, "unknown escape, kept as written");
            *o++ = '\\';
            *o++ = *s;
        }
    }
    if (*s != '"')
        warn_at(c, file, line, "unterminated quoted value");
    *o = '\0';
    return out;
}

/* The next logical line: physical lines ending in a backslash are joined (the backslash and
 * the line break dropped). Returns 0 at the end of the file. */
static int read_logical_line(FILE *f, char *buf, size_t size, int *lineno) {
    size_t used = 0;
    buf[0] = '\0';
    while (fgets(buf + used, (int)(size - used), f)) {
        (*lineno)++;
        used += strlen(buf + used);
        while (used > 0 && (buf[used - 1] == '\n' || buf[used - 1] == '\r'))
            buf[--used] = '\0';
        if (used > 0 && buf[used - 1] == '\\') {
            buf[--used] = '\0';
            continue;
        }
        return 1;
    }
    return used > 0;
}

/* `include = PATH`: relative to the directory of the including file. */
static char *include_path(const char *from, const char *path) {
    if (path[0] == '/')
        return strdup(path);
    const char *slash = strrchr(from, '/');
    if (!slash)
        return strdup(path);
    size_t dir = (size_t)(slash - from) + 1;
    char *out = xmalloc(dir + strlen(path) + 1);
    memcpy(out, from, dir);
    strcpy(out + dir, path);
    return out;
}

static int load_file(struct config *c, const char *file, const char *section, int depth);

static void parse_line(struct config *c, const char *file, int line, char *text, char **section, int depth) {
    char *s = trim(text);
    if (*s == '\0' || is_comment(s))
        return;
    if (*s == '[') {
        char *close = strchr(s, ']');
        if (!close) {
            warn_at(c, file, line, "section header without ]");
            return;
        }
        *close = '\0';
        free(*section);
        *section = strdup(trim(s + 1));
        return;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
        warn_at(c, file, line, "line without = ignored");
        return;
    }
    *eq = '\0';
    char *key = trim(s);
    char *value = parse_value(c, file, line, trim(eq + 1));
    if (strcmp(key, "include") == 0) {
        char *path = include_path(file, value);
        free(value);
        if (depth + 1 >= MAX_DEPTH)
            warn_at(c, file, line, "includes nested too deep");
        else if (load_file(c, path, *section, depth + 1) != 0)
            warn_at(c, file, line, "cannot read included file");
        return;
    }
    set_entry(c, *section, key, value, file, line);
}

static int load_file(struct config *c, const char *file, const char *section, int depth) {
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    char buf[MAX_LINE];
    char *current = strdup(section);
    int lineno = 0;
    while (read_logical_line(f, buf, sizeof buf, &lineno))
        parse_line(c, file, lineno, buf, &current, depth);
    free(current);
    fclose(f);
    return 0;
}

/* `${section.key}` or `${key}` (same section) replaced by that setting's value, expanded in
 * turn; an unknown name, or a reference deeper than MAX_DEPTH (a cycle), is kept as written. */
static char *expand(struct config *c, const struct entry *e, const char *value, int depth) {
    size_t cap = strlen(value) + 1, len = 0;
    char *out = xmalloc(cap);
    for (const char *s = value; *s;) {
        const char *end = s[0] == '$' && s[1] == '{' ? strchr(s, '}') : NULL;
        const char *piece = s;
        size_t n = 1;
        char *owned = NULL;
        if (end) {
            char *name = xstrndup(s + 2, (size_t)(end - s - 2));
            char *dot = strchr(name, '.');
            struct entry *ref = dot ? (*dot = '\0', find_entry(c, name, dot + 1)) : find_entry(c, e->section, name);
            if (ref && depth < MAX_DEPTH) {
                owned = expand(c, ref, ref->value, depth + 1);
                piece = owned;
                n = strlen(owned);
            } else {
                if (!ref)
                    warn_at(c, e->file, e->line, "unknown reference kept as written");
                n = (size_t)(end - s) + 1;
            }
            free(name);
            s = end + 1;
        } else {
            s++;
        }
        if (len + n + 1 > cap) {
            cap = 2 * (len + n + 1);
            out = realloc(out, cap);
            if (!out)
                die("out of memory");
        }
        memcpy(out + len, piece, n);
        len += n;
        free(owned);
    }
    out[len] = '\0';
    return out;
}

static int by_section_then_key(const void *a, const void *b) {
    const struct entry *x = a, *y = b;
    int d = strcmp(entry_section(x), entry_section(y));
    return d ? d : strcmp(entry_key(x), entry_key(y));
}

static void print_config(struct config *c, const struct options *o) {
    qsort(c->items, config_len(c), sizeof *c->items, by_section_then_key);
    for (size_t i = 0; i < config_len(c); i++) {
        const struct entry *e = &c->items[i];
        if (o->only_section && strcmp(entry_section(e), o->only_section) != 0)
            continue;
        if (o->keys_only) {
            printf("%s.%s\n", entry_section(e), entry_key(e));
            continue;
        }
        char *v = expand(c, e, e->value, 0);
        printf("%s.%s=%s\n", entry_section(e), entry_key(e), v);
        free(v);
    }
}

static int parse_args(int argc, char **argv, struct options *o) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-k") == 0)
            o->keys_only = 1;
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            o->only_section = argv[++i];
        else
            die("usage: inicat [-s SECTION] [-k] FILE...");
    }
    return i;
}

int main(int argc, char **argv) {
    struct options o = {0};
    struct config c = {0};
    int first = parse_args(argc, argv, &o);
    if (first >= argc)
        die("usage: inicat [-s SECTION] [-k] FILE...");
    for (int i = first; i < argc; i++)
        if (load_file(&c, argv[i], "", 0) != 0) {
            fprintf(stderr, "inicat: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
    print_config(&c, &o);
    return c.errors ? 1 : 0;
}
