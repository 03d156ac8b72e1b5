/* libyaml events -> struct ynode tree (see yaml_tree.h). */
#include "conf/yaml_tree.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* A configuration needs three levels; this only bounds the recursion. */
#define YTREE_MAX_DEPTH 32

struct builder {
    yaml_parser_t parser;
    const char *text;
    size_t len;
    struct ytree_error *err;
};

static int fail_at(struct builder *b, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(struct builder *b, unsigned line, unsigned col, const char *fmt, ...)
{
    b->err->line = line;
    b->err->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err->msg, sizeof b->err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* libyaml marks are 0-based; messages are 1-based. */
static unsigned line_of(yaml_mark_t m) { return (unsigned)m.line + 1; }
static unsigned col_of(yaml_mark_t m) { return (unsigned)m.column + 1; }

/* Reader errors (bad UTF-8, control characters) carry a byte offset, not a mark. */
static void offset_to_position(const char *text, size_t len, size_t offset,
                               unsigned *line, unsigned *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < offset && i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') {
            (*line)++;
            *col = 1;
        } else if ((c & 0xC0) != 0x80) { /* count characters, not UTF-8 bytes */
            (*col)++;
        }
    }
}

/* ---- a '{' or '[' that the writer meant as part of a value -------------------
 * In YAML, '{' and '[' start flow collections, and inside one an unquoted
 * value ends at any of , [ ] { }, so `{socket: /tmp/x-{host}.sock}` and
 * `socket: {host}.sock` are syntax errors whose libyaml messages ("did not
 * find expected ',' or '}'") do not say why. These find the brace and say to
 * quote the value. Each returns -1 with the error set, or 0: not this case. */

/* Byte offset of a libyaml mark, which counts lines and characters. */
static size_t mark_offset(const struct builder *b, yaml_mark_t m)
{
    size_t i = b->len >= 3 && memcmp(b->text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0; /* BOM */
    for (size_t line = 0; line < m.line && i < b->len; i++)
        if (b->text[i] == '\n') line++;
    for (size_t col = 0; i < b->len && b->text[i] != '\n'; i++)
        if (((unsigned char)b->text[i] & 0xC0) != 0x80 && col++ == m.column) break;
    return i;
}

static bool one_of(char ch, const char *set) { return ch && strchr(set, ch); }

/* A character an unquoted value inside a flow collection can go on with. */
static bool plain_char(char ch) { return ch && !one_of(ch, " \t\r\n,[]{}#"); }

/* The length of the unquoted value that starts at `start`, as the writer
 * meant it: to the end of the line or a comment, or in a flow collection to
 * a ',' or closing bracket outside the value's own brackets. 0 when it has
 * characters that would need escapes in quotes, or is long. */
static size_t meant_value(const struct builder *b, size_t start, bool flow)
{
    size_t i = start;
    for (int depth = 0; i < b->len && b->text[i] != '\n' && b->text[i] != '\r'; i++) {
        char ch = b->text[i];
        if (ch == '{' || ch == '[') depth++;
        else if ((ch == '}' || ch == ']') && depth-- == 0) break;
        else if (ch == ',' && depth == 0 && flow) break;
        else if (ch == '#' && i > start && b->text[i - 1] == ' ') break; /* a comment */
        else if (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) return 0;
    }
    while (i > start && b->text[i - 1] == ' ') i--;
    return i - start <= 120 ? i - start : 0;
}

/* "WHAT: VALUE (expected the value in quotes: "VALUE")" at the brace. */
static int fail_brace(struct builder *b, size_t brace, size_t start, bool flow, const char *what)
{
    unsigned line, col;
    offset_to_position(b->text, b->len, brace, &line, &col);
    int n = (int)meant_value(b, start, flow);
    if (!n)
        return fail_at(b, line, col, "YAML syntax error: %s (expected the value in quotes)", what);
    const char *v = b->text + start;
    return fail_at(b, line, col,
                   "YAML syntax error: %s: %.*s (expected the value in quotes: \"%.*s\")", what, n,
                   v, n, v);
}

/* At a '{' or '[' that goes on an unquoted value inside a flow collection:
 * `{socket: /tmp/x-{host}.sock}`. */
static int explain_brace_in_value(struct builder *b, size_t at, const char *context)
{
    char ch = b->text[at];
    if (at == 0 || (ch != '{' && ch != '[') || !plain_char(b->text[at - 1]) ||
        b->text[at - 1] == ':')
        return 0;
    size_t start = at;
    while (start > 0 && plain_char(b->text[start - 1])) start--;
    const char *inside = strstr(context, "flow mapping")    ? "{...}"
                         : strstr(context, "flow sequence") ? "[...]"
                                                            : "a flow collection";
    char what[96];
    snprintf(what, sizeof what, "an unquoted value inside %s cannot contain '%c'", inside, ch);
    return fail_brace(b, at, start, true, what);
}

/* The '{' or '[' that opens the collection closed at `close`, on its line. */
static bool find_opener(const struct builder *b, size_t close, size_t *open)
{
    int depth = 0;
    for (size_t i = close + 1; i-- > 0 && b->text[i] != '\n';) {
        char ch = b->text[i];
        if (ch == '}' || ch == ']') depth++;
        else if ((ch == '{' || ch == '[') && --depth == 0) {
            *open = i;
            return true;
        }
    }
    return false;
}

/* Only a bracketed word like {host} was meant as text: a collection with
 * a ':', ',' or quote in it more likely lost its own brackets elsewhere. */
static bool bracketed_word(const struct builder *b, size_t open, size_t close)
{
    for (size_t i = open + 1; i < close; i++)
        if (one_of(b->text[i], ":,\"'")) return false;
    return true;
}

/* Right after a value that starts with '{' or '[' and goes on:
 * `socket: {host}.sock`. */
static int explain_value_opening_brace(struct builder *b, size_t at, bool flow)
{
    size_t open;
    if (at == 0 || !plain_char(b->text[at]) ||
        (b->text[at - 1] != '}' && b->text[at - 1] != ']') || !find_opener(b, at - 1, &open) ||
        !bracketed_word(b, open, at - 1))
        return 0;
    size_t before = open; /* the collection must be where a value starts */
    while (before > 0 && b->text[before - 1] == ' ') before--;
    if (before > 0 && !one_of(b->text[before - 1], ":-,[{")) return 0;
    char what[96];
    snprintf(what, sizeof what, "a value that starts with '%c' is a flow %s", b->text[open],
             b->text[open] == '{' ? "mapping" : "sequence");
    return fail_brace(b, open, open, flow, what);
}

static int explain_brace(struct builder *b)
{
    const yaml_parser_t *p = &b->parser;
    if (p->error != YAML_PARSER_ERROR) return 0;
    size_t at = mark_offset(b, p->problem_mark);
    if (at >= b->len) return 0;
    bool flow = p->context && strstr(p->context, "flow");
    if (flow && explain_brace_in_value(b, at, p->context)) return -1;
    return explain_value_opening_brace(b, at, flow);
}

static int fail_from_parser(struct builder *b)
{
    const yaml_parser_t *p = &b->parser;
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        return fail_at(b, 1, 1, "out of memory while parsing YAML");
    case YAML_READER_ERROR: {
        unsigned line, col;
        offset_to_position(b->text, b->len, p->problem_offset, &line, &col);
        if (p->problem_value >= 0)
            return fail_at(b, line, col, "invalid input: %s (byte 0x%02x)",
                           p->problem ? p->problem : "unreadable", (unsigned)p->problem_value);
        return fail_at(b, line, col, "invalid input: %s", p->problem ? p->problem : "unreadable");
    }
    default: {
        if (explain_brace(b)) return -1;
        const char *problem = p->problem ? p->problem : "unknown problem";
        if (p->context)
            return fail_at(b, line_of(p->problem_mark), col_of(p->problem_mark),
                           "YAML syntax error: %s (%s at line %u)", problem, p->context,
                           line_of(p->context_mark));
        return fail_at(b, line_of(p->problem_mark), col_of(p->problem_mark),
                       "YAML syntax error: %s", problem);
    }
    }
}

static int next_event(struct builder *b, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&b->parser, ev)) return fail_from_parser(b);
    return 0;
}

static int reject_anchor_and_tag(struct builder *b, yaml_mark_t mark, const yaml_char_t *anchor,
                                 const yaml_char_t *tag)
{
    if (anchor)
        return fail_at(b, line_of(mark), col_of(mark),
                       "anchor &%s: anchors and aliases are not supported (write the value out)",
                       (const char *)anchor);
    if (tag)
        return fail_at(b, line_of(mark), col_of(mark),
                       "tag %s: YAML tags are not supported (write a plain value)",
                       (const char *)tag);
    return 0;
}

void ytree_free(struct ynode *node)
{
    if (!node) return;
    for (size_t i = 0; node->items && i < node->n; i++) ytree_free(node->items[i]);
    for (size_t i = 0; node->pairs && i < node->n; i++) {
        ytree_free(node->pairs[i].key);
        ytree_free(node->pairs[i].value);
    }
    free(node->items);
    free(node->pairs);
    free(node->text);
    free(node);
}

static struct ynode *new_node(enum ynode_kind kind, yaml_mark_t mark)
{
    struct ynode *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->line = line_of(mark);
    n->col = col_of(mark);
    return n;
}

/* Returns `array` (of *cap elements of `size` bytes) reallocated to twice the
 * room, or NULL (the old array still valid) when memory is out. */
static void *grow(void *array, size_t *cap, size_t size)
{
    size_t new_cap = *cap ? *cap * 2 : 4;
    void *p = realloc(array, new_cap * size);
    if (p) *cap = new_cap;
    return p;
}

static int build_node(struct builder *b, yaml_event_t *ev, int depth, struct ynode **out);

static int build_scalar(struct builder *b, yaml_event_t *ev, struct ynode **out)
{
    struct ynode *n = new_node(YN_SCALAR, ev->start_mark);
    if (!n) return fail_at(b, line_of(ev->start_mark), col_of(ev->start_mark), "out of memory");
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    n->len = ev->data.scalar.length;
    n->text = malloc(n->len + 1);
    if (!n->text) {
        ytree_free(n);
        return fail_at(b, line_of(ev->start_mark), col_of(ev->start_mark), "out of memory");
    }
    memcpy(n->text, ev->data.scalar.value, n->len);
    n->text[n->len] = '\0';
    *out = n;
    return 0;
}

static int build_sequence(struct builder *b, struct ynode *seq, int depth)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        if (next_event(b, &ev) < 0) return -1;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        yaml_mark_t mark = ev.start_mark;
        struct ynode *item;
        if (build_node(b, &ev, depth + 1, &item) < 0) return -1;
        if (seq->n == cap) {
            struct ynode **items = grow(seq->items, &cap, sizeof *items);
            if (!items) {
                ytree_free(item);
                return fail_at(b, line_of(mark), col_of(mark), "out of memory");
            }
            seq->items = items;
        }
        seq->items[seq->n++] = item;
    }
}

static int build_mapping(struct builder *b, struct ynode *map, int depth)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        if (next_event(b, &ev) < 0) return -1;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        yaml_mark_t mark = ev.start_mark;
        struct ynode *key, *value;
        if (build_node(b, &ev, depth + 1, &key) < 0) return -1;
        if (next_event(b, &ev) < 0 || build_node(b, &ev, depth + 1, &value) < 0) {
            ytree_free(key);
            return -1;
        }
        if (map->n == cap) {
            struct ypair *pairs = grow(map->pairs, &cap, sizeof *pairs);
            if (!pairs) {
                ytree_free(key);
                ytree_free(value);
                return fail_at(b, line_of(mark), col_of(mark), "out of memory");
            }
            map->pairs = pairs;
        }
        map->pairs[map->n++] = (struct ypair){key, value};
    }
}

/* Builds the node that starts with *ev and, for a collection, reads through its
 * end event. Always consumes (deletes) *ev. */
static int build_node(struct builder *b, yaml_event_t *ev, int depth, struct ynode **out)
{
    yaml_mark_t mark = ev->start_mark;
    const yaml_char_t *anchor = NULL, *tag = NULL;
    enum ynode_kind kind;
    int rc = -1;

    *out = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        rc = fail_at(b, line_of(mark), col_of(mark),
                     "alias *%s: anchors and aliases are not supported (write the value out)",
                     (const char *)ev->data.alias.anchor);
        yaml_event_delete(ev);
        return rc;
    case YAML_SCALAR_EVENT:
        rc = reject_anchor_and_tag(b, mark, ev->data.scalar.anchor, ev->data.scalar.tag);
        if (rc == 0) rc = build_scalar(b, ev, out);
        yaml_event_delete(ev);
        return rc;
    case YAML_SEQUENCE_START_EVENT:
        kind = YN_SEQUENCE;
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        kind = YN_MAPPING;
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
        break;
    default: /* the parser guarantees a node here; be safe anyway */
        yaml_event_delete(ev);
        return fail_at(b, line_of(mark), col_of(mark), "YAML syntax error: expected a value");
    }

    rc = reject_anchor_and_tag(b, mark, anchor, tag);
    yaml_event_delete(ev);
    if (rc < 0) return -1;
    if (depth >= YTREE_MAX_DEPTH)
        return fail_at(b, line_of(mark), col_of(mark), "nesting deeper than %d levels",
                       YTREE_MAX_DEPTH);
    struct ynode *n = new_node(kind, mark);
    if (!n) return fail_at(b, line_of(mark), col_of(mark), "out of memory");
    rc = kind == YN_SEQUENCE ? build_sequence(b, n, depth) : build_mapping(b, n, depth);
    if (rc < 0) {
        ytree_free(n);
        return -1;
    }
    *out = n;
    return 0;
}

/* Stream := STREAM-START [DOCUMENT-START node DOCUMENT-END] STREAM-END. */
static int build_stream(struct builder *b, struct ynode **root)
{
    yaml_event_t ev;
    if (next_event(b, &ev) < 0) return -1;
    yaml_event_delete(&ev); /* STREAM-START */
    if (next_event(b, &ev) < 0) return -1;
    if (ev.type == YAML_STREAM_END_EVENT) { /* nothing but comments and blanks */
        yaml_event_delete(&ev);
        return 0;
    }
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if (next_event(b, &ev) < 0 || build_node(b, &ev, 0, root) < 0) return -1;
    if (next_event(b, &ev) < 0) return -1;
    yaml_event_delete(&ev); /* DOCUMENT-END */
    if (next_event(b, &ev) < 0) return -1;
    yaml_mark_t mark = ev.start_mark;
    bool another = ev.type == YAML_DOCUMENT_START_EVENT;
    yaml_event_delete(&ev);
    if (another)
        return fail_at(b, line_of(mark), col_of(mark),
                       "a second YAML document (a configuration is a single document)");
    return 0;
}

int ytree_load(const char *text, size_t len, struct ynode **root, struct ytree_error *err)
{
    struct builder b = {.text = text, .len = len, .err = err};
    *root = NULL;
    if (!yaml_parser_initialize(&b.parser)) {
        err->line = err->col = 1;
        snprintf(err->msg, sizeof err->msg, "out of memory while parsing YAML");
        return -1;
    }
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    int rc = build_stream(&b, root);
    yaml_parser_delete(&b.parser);
    if (rc < 0) {
        ytree_free(*root);
        *root = NULL;
    }
    return rc;
}
