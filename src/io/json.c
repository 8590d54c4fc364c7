#include "io/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Headers nest two or three levels; the limit stops stack exhaustion on
   hostile input like "[[[[[...". */
#define JSON_MAX_DEPTH 64

static int fail(json_cursor *c, const char *fmt, ...)
{
    if (c->err[0])
        return -1;
    char msg[120];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "%s at byte %td", msg, c->s - c->begin);
    return -1;
}

void json_init(json_cursor *c, const char *text, size_t n)
{
    c->begin = c->s = text;
    c->end = text + n;
    c->depth = 0;
    c->err[0] = '\0';
}

int json_peek(json_cursor *c)
{
    while (c->s < c->end &&
           (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r'))
        c->s++;
    return c->s < c->end ? (unsigned char)*c->s : -1;
}

int json_expect(json_cursor *c, char ch)
{
    if (json_peek(c) != (unsigned char)ch)
        return fail(c, "expected '%c'", ch);
    c->s++;
    return 0;
}

int json_next(json_cursor *c, char close, int *first)
{
    int ch = json_peek(c);
    if (ch == (unsigned char)close) {
        c->s++;
        return 0;
    }
    if (!*first && json_expect(c, ',') != 0)
        return fail(c, "expected ',' or '%c'", close);
    if (!*first && json_peek(c) == (unsigned char)close)
        return fail(c, "trailing comma");
    *first = 0;
    return ch < 0 ? fail(c, "unexpected end") : 1;
}

static int hex4(json_cursor *c, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, c->s++) {
        if (c->s >= c->end)
            return fail(c, "bad \\u escape");
        char h = *c->s;
        unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                            : 16;
        if (d == 16)
            return fail(c, "bad \\u escape");
        *v = *v << 4 | d;
    }
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* \uXXXX, joining a UTF-16 surrogate pair into one code point. */
static int unicode_escape(json_cursor *c, unsigned *cp)
{
    if (hex4(c, cp))
        return -1;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF)
        return fail(c, "lone low surrogate");
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {
        unsigned lo;
        if (c->end - c->s < 2 || c->s[0] != '\\' || c->s[1] != 'u')
            return fail(c, "lone high surrogate");
        c->s += 2;
        if (hex4(c, &lo))
            return -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return fail(c, "bad surrogate pair");
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (*cp == 0)
        return fail(c, "\\u0000 in a string");
    return 0;
}

static int escape(json_cursor *c, char *o, size_t *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (c->s >= c->end)
        return fail(c, "unterminated string");
    char ch = *c->s++;
    if (ch == 'u') {
        unsigned cp;
        if (unicode_escape(c, &cp))
            return -1;
        *n += put_utf8(o + *n, cp);
        return 0;
    }
    const char *k = strchr(from, ch);
    if (!k || !ch)
        return fail(c, "bad escape '\\%c'", ch);
    o[(*n)++] = to[k - from];
    return 0;
}

/* The input is taken as UTF-8 as is: names are only compared and printed. */
int json_string(json_cursor *c, char **out)
{
    *out = NULL;
    if (json_expect(c, '"'))
        return -1;
    /* Sized by the string's own source bytes, not the rest of the text
       (a header of many short strings must not cost that many big
       allocations): escapes never produce more bytes than they take. */
    const char *close = c->s;
    while (close < c->end && *close != '"')
        close += *close == '\\' && c->end - close >= 2 ? 2 : 1;
    char *o = malloc((size_t)(close - c->s) + 1);
    size_t n = 0;
    if (!o)
        return fail(c, "out of memory");
    for (;;) {
        if (c->s >= c->end) {
            free(o);
            return fail(c, "unterminated string");
        }
        unsigned char ch = (unsigned char)*c->s++;
        if (ch == '"')
            break;
        if (ch < 0x20 || (ch == '\\' && escape(c, o, &n))) {
            free(o);
            return fail(c, "bad character in string");
        }
        if (ch != '\\')
            o[n++] = (char)ch;
    }
    o[n] = '\0';
    *out = o;
    return 0;
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(json_cursor *c, int *is_int)
{
    const char *p = c->s;
    *is_int = 1;
    if (p < c->end && *p == '-')
        p++;
    if (p >= c->end || *p < '0' || *p > '9')
        return fail(c, "bad number");
    if (*p == '0')
        p++;
    else
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    if (p < c->end && *p == '.') {
        *is_int = 0;
        if (++p >= c->end || *p < '0' || *p > '9')
            return fail(c, "bad number");
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        if (++p < c->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return fail(c, "bad number");
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    c->s = p;
    return 0;
}

int json_uint(json_cursor *c, int64_t *out)
{
    json_peek(c);
    const char *start = c->s;
    int is_int;
    if (scan_number(c, &is_int))
        return -1;
    if (!is_int || *start == '-')
        return fail(c, "expected a non-negative integer");
    int64_t v = 0;
    for (const char *p = start; p < c->s; p++) {
        if (v > (INT64_MAX - (*p - '0')) / 10)
            return fail(c, "integer too large");
        v = 10 * v + (*p - '0');
    }
    *out = v;
    return 0;
}

static int skip_literal(json_cursor *c)
{
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(c->end - c->s) >= n && memcmp(c->s, words[i], n) == 0) {
            c->s += n;
            return 0;
        }
    }
    return fail(c, "unexpected character");
}

static int skip_container(json_cursor *c, char open, char close)
{
    if (++c->depth > JSON_MAX_DEPTH)
        return fail(c, "nested too deeply");
    c->s++;
    int first = 1, more;
    while ((more = json_next(c, close, &first)) == 1) {
        if (open == '{') {
            char *key;
            if (json_string(c, &key))
                return -1;
            free(key);
            if (json_expect(c, ':'))
                return -1;
        }
        if (json_skip(c))
            return -1;
    }
    c->depth--;
    return more;
}

int json_skip(json_cursor *c)
{
    int ch = json_peek(c), is_int;
    char *s;
    switch (ch) {
    case '{':
        return skip_container(c, '{', '}');
    case '[':
        return skip_container(c, '[', ']');
    case '"':
        if (json_string(c, &s))
            return -1;
        free(s);
        return 0;
    case -1:
        return fail(c, "unexpected end");
    default:
        if (ch == '-' || (ch >= '0' && ch <= '9'))
            return scan_number(c, &is_int);
        return skip_literal(c);
    }
}

int json_finish(json_cursor *c)
{
    if (json_peek(c) != -1)
        return fail(c, "text after the JSON value");
    return 0;
}
