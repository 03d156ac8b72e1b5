/* A small in-memory tree of one YAML document, built from libyaml events, so
 * the config schema can look keys up in any order and still report the line
 * and column of every key and value. Internal to src/conf/.
 *
 * Deliberately restricted: anchors, aliases and tags are rejected (a config
 * has no use for them and aliases can build cycles), nesting is limited, and a
 * stream must hold at most one document. */
#ifndef PODDB_CONF_YAML_TREE_H
#define PODDB_CONF_YAML_TREE_H

#include <stdbool.h>
#include <stddef.h>

enum ynode_kind { YN_SCALAR, YN_SEQUENCE, YN_MAPPING };

struct ynode;

struct ypair {
    struct ynode *key;
    struct ynode *value;
};

struct ynode {
    enum ynode_kind kind;
    unsigned line, col;    /* 1-based position of the node's first character */
    bool plain;            /* scalar written without quotes or block style */
    char *text;            /* scalar value, NUL-terminated */
    size_t len;            /* bytes of text (a quoted "\0" makes strlen differ) */
    size_t n;              /* entries of a sequence, pairs of a mapping */
    struct ynode **items;  /* sequence entries */
    struct ypair *pairs;   /* mapping pairs, in file order */
};

struct ytree_error {
    unsigned line, col;    /* 1-based */
    char msg[320];
};

/* Parses `text`. Returns 0 and *root (NULL for a stream with no document), or
 * -1 with err filled. Free the tree with ytree_free. */
int ytree_load(const char *text, size_t len, struct ynode **root, struct ytree_error *err);

void ytree_free(struct ynode *node);

#endif
