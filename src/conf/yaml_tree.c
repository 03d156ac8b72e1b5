/* libyaml events -> struct ynode tree (see yaml_tree.h). */
#include "conf/yaml_tree.h"

#include <stdarg.h>
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
