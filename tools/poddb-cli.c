/* poddb-cli: call stored procedures on a poddb-server, once from the command
 * line (`poddb-cli --socket PATH call PROC ARGS...`) or from a shell that reads
 * commands from the terminal (GNU readline, with history) or from a pipe. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "conf/config.h"
#include "net/proto.h"
#include "poddb/client.h"
#include "util/json.h"

/* Exit statuses (documented in the usage text). */
enum {
    CLI_OK = 0,
    CLI_FAILED = 1,    /* the procedure returned a negative status */
    CLI_USAGE = 2,     /* bad command line, arguments or config */
    CLI_TRANSPORT = 2, /* cannot connect, connection lost, timeout */
    CLI_OUTCOME = 3,   /* not found / exists */
    CLI_QUIT = -1,     /* internal: the shell was told to stop */
    CLI_HELP = -2,     /* internal: --help was printed */
};

#define MAX_ARGS 65535      /* the protocol's u16 nargs */
#define HISTORY_LINES 1000

static const char usage_text[] =
    "usage: poddb-cli [OPTIONS] call PROC [ARG ...]\n"
    "       poddb-cli [OPTIONS]                  (a shell: commands from stdin)\n"
    "\n"
    "Calls stored procedures on a poddb-server. With a command it makes one call\n"
    "and prints the result. Without one it starts a shell: on a terminal with line\n"
    "editing and history (~/.poddb_history), otherwise reading one command per line\n"
    "from stdin (for scripts).\n"
    "\n"
    "Server (one of):\n"
    "  -s, --socket PATH   the server's Unix socket (or tcp:HOST:PORT)\n"
    "  -c, --conf FILE     the pod's YAML config: call the server of host N\n"
    "  -H, --host N        with --conf: the host, 0 .. hosts-1 (default 0)\n"
    "      --token-file FILE\n"
    "                      with tcp:HOST:PORT: the file holding the host's token\n"
    "                      (its hosts[].tcp_token_file), given first on the\n"
    "                      connection; without it $POD_TOKEN_FILE (a file) or\n"
    "                      $POD_TOKEN (the token) is used. A TCP listener refuses\n"
    "                      every call without the token; the Unix socket needs none\n"
    "\n"
    "Options:\n"
    "  -j, --json          print each result as one JSON object on one line\n"
    "  -t, --timeout MS    give up waiting for a reply after MS milliseconds\n"
    "                      (0, the default: wait forever)\n"
    "  -e, --early         ask for the reply as soon as the transaction committed\n"
    "                      in memory, before it is durable\n"
    "  -h, --help          this text\n"
    "Options go before the command: every word after PROC is an argument.\n"
    "\n"
    "Arguments are typed like this:\n"
    "  42, -7              an integer (int64)\n"
    "  1.5, -2e-3, .5      a number with '.' or an exponent: a double\n"
    "  anything else       bytes (a string): users, alice, '{\"age\":3}'\n"
    "  i:42   f:1.5        explicitly an int64 / a double (f:inf, f:nan work)\n"
    "  s:42                explicitly a string (here the two characters \"42\")\n"
    "  x:deadbeef          bytes in hex (x:0xdeadbeef too; x: is empty bytes)\n"
    "  null:               null\n"
    "\n"
    "Output: one line per row, values separated by tabs. Integers in decimal;\n"
    "doubles in the shortest form that reads back as the same double (with \".0\"\n"
    "when it would look like an integer); bytes as text when they are printable\n"
    "UTF-8, otherwise 0x and hex digits; null as NULL. A call that returns no\n"
    "values prints nothing (the terminal shell prints \"(ok)\"); rows without values\n"
    "are left out, here and in --json. An outcome prints \"(not found)\" or\n"
    "\"(exists)\" after any rows. --json prints\n"
    "  {\"status\":\"ok\",\"code\":0,\"rows\":[[...],...]}\n"
    "with bytes that are not printable UTF-8 as {\"hex\":\"...\"}, and an error as\n"
    "  {\"status\":\"invalid argument\",\"code\":-3,\"message\":\"...\"}\n"
    "\n"
    "Shell commands:\n"
    "  call PROC [ARG ...]   or just   PROC [ARG ...]\n"
    "  help                  a summary\n"
    "  quit, exit            leave (as does end of input)\n"
    "  Words are separated by blanks; \"double quotes\" group words (\"\" is an empty\n"
    "  argument) and allow the escapes \\\" \\\\ \\n \\t \\r. Quoting does not change\n"
    "  the type: \"42\" is an integer, s:42 a string. Lines starting with # are\n"
    "  ignored. Errors are printed and the shell goes on.\n"
    "\n"
    "Exit status:\n"
    "  0  the call succeeded\n"
    "  1  the procedure failed (conflict, aborted, invalid argument, ...); stderr\n"
    "     gets \"poddb-cli: PROC: STATUS: MESSAGE\"; with --json the error is the\n"
    "     JSON object, on stdout\n"
    "  2  usage error, bad argument or config, or a transport error (cannot\n"
    "     connect, connection lost, timeout, the token refused)\n"
    "  3  an outcome: the key was not found, or exists already\n"
    "  The shell exits 0 on a terminal; reading a pipe it exits with the status of\n"
    "  the last command that did not return 0 (0 if none). Either way it exits 2\n"
    "  when it cannot connect at the start.\n"
    "\n"
    "Examples:\n"
    "  poddb-cli --socket /tmp/poddb-default-0.sock call sys.ping\n"
    "  poddb-cli --socket /tmp/poddb-default-0.sock call kv.put kv alice '{\"age\":3}'\n"
    "  poddb-cli --conf conf/pod.yaml --host 1 --json call kv.get kv alice\n"
    "  poddb-cli -s /tmp/poddb-default-0.sock call kv.put kv s:42 x:00ff\n"
    "  poddb-cli -s tcp:127.0.0.1:7000 --token-file ~/.poddb-token call sys.ping\n"
    "  printf 'sys.ping\\nkv.get kv alice\\n' | poddb-cli -c conf/pod.yaml\n"
    "(kv.* take a table of the config, kv in conf/pod.yaml, then keys and values that\n"
    "must be bytes: write a key that looks like a number as s:42.)\n";

static const char shell_help_text[] =
    "  call PROC [ARG ...]  or  PROC [ARG ...]   call a procedure\n"
    "  help                                      this text\n"
    "  quit, exit, Ctrl-D                        leave\n"
    "Arguments: 42 int64, 1.5 double, other words bytes; i:N f:X s:TEXT x:HEX null:\n"
    "force a type. \"double quotes\" group words, with \\\" \\\\ \\n \\t \\r escapes.\n";

struct cli {
    char address[POD_PATH_MAX];
    const char *token_file; /* --token-file: given on a TCP connection first */
    bool json;
    int timeout_ms;
    unsigned call_flags;
    bool terminal;      /* the interactive readline shell */
    pod_client *client; /* NULL until connected, and after a transport error */
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("poddb-cli: out of memory\n", stderr);
        exit(CLI_TRANSPORT);
    }
    return p;
}

/* Where to look after a usage error: the shell has its own help. */
static const char *usage_hint = "Try 'poddb-cli --help'.";

static int usage_error(const char *what, const char *detail)
{
    fprintf(stderr, "poddb-cli: %s%s%s\n%s\n", what, detail ? ": " : "", detail ? detail : "",
            usage_hint);
    return CLI_USAGE;
}

/* ---- options ------------------------------------------------------------- */

struct options {
    const char *socket;
    const char *conf;
    const char *host; /* as written */
};

static int parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s)) return -1;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* The socket path of host `host` in the pod config `path`. */
static int address_from_conf(struct cli *cli, const char *path, const char *host)
{
    long h = 0;
    if (host && parse_int(host, 0, POD_MAX_HOSTS - 1, &h) != 0)
        return usage_error("--host: not a host number", host);
    struct pod_config *conf = xmalloc(sizeof *conf);
    pod_err err = {{0}};
    int rc = CLI_OK;
    if (pod_config_load(path, conf, &err) != 0) {
        fprintf(stderr, "poddb-cli: %s\n", err.msg);
        rc = CLI_USAGE;
    } else if (h >= conf->nhosts) {
        fprintf(stderr, "poddb-cli: --host %ld: %s has hosts 0..%d\n", h, path, conf->nhosts - 1);
        rc = CLI_USAGE;
    } else {
        snprintf(cli->address, sizeof cli->address, "%s", conf->hosts[h].socket_path);
    }
    free(conf);
    return rc;
}

static int resolve_address(struct cli *cli, const struct options *o)
{
    if (o->socket && (o->conf || o->host))
        return usage_error("--socket and --conf/--host are exclusive", NULL);
    if (o->host && !o->conf) return usage_error("--host needs --conf FILE", NULL);
    if (o->conf) return address_from_conf(cli, o->conf, o->host);
    if (!o->socket) return usage_error("no server: give --socket PATH or --conf FILE", NULL);
    if (!*o->socket || strlen(o->socket) >= sizeof cli->address)
        return usage_error("--socket: bad path", o->socket);
    snprintf(cli->address, sizeof cli->address, "%s", o->socket);
    return CLI_OK;
}

/* --token-file is for a TCP address, and wins over $POD_TOKEN_FILE and
 * $POD_TOKEN (the client library reads those when it connects). */
static int check_token_file(struct cli *cli)
{
    if (!cli->token_file) return CLI_OK;
    if (strncmp(cli->address, "tcp:", 4) != 0)
        return usage_error("--token-file is for a tcp:HOST:PORT server (a Unix socket needs no "
                           "token)", cli->token_file);
    unsetenv("POD_TOKEN_FILE");
    unsetenv("POD_TOKEN");
    return CLI_OK;
}

enum { OPT_TOKEN_FILE = 1000 };

static int parse_options(int argc, char **argv, struct cli *cli)
{
    static const struct option longopts[] = {
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"socket", required_argument, NULL, 's'}, {"conf", required_argument, NULL, 'c'},
        {"host", required_argument, NULL, 'H'},   {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'}, {"early", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    struct options o = {0};
    long timeout;
    int ch;
    opterr = 0; /* our own messages */
    /* '+': stop at the first non-option, so "call p -5" passes -5 on. */
    while ((ch = getopt_long(argc, argv, "+:s:c:H:jt:eh", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': o.socket = optarg; break;
        case 'c': o.conf = optarg; break;
        case 'H': o.host = optarg; break;
        case OPT_TOKEN_FILE: cli->token_file = optarg; break;
        case 'j': cli->json = true; break;
        case 'e': cli->call_flags |= POD_CALL_EARLY_REPLY; break;
        case 't':
            if (parse_int(optarg, 0, INT_MAX, &timeout) != 0)
                return usage_error("--timeout: not a number of milliseconds", optarg);
            cli->timeout_ms = (int)timeout;
            break;
        case 'h': fputs(usage_text, stdout); return CLI_HELP;
        case ':': return usage_error("option needs a value", argv[optind - 1]);
        default: {
            /* A long option as written ("--json=1", "--h"), else the letter. */
            const char *bad = argv[optind - 1];
            char opt[3] = {'-', (char)optopt, '\0'};
            if (strncmp(bad, "--", 2) != 0 && optopt) bad = opt;
            return usage_error("bad or unknown option", bad);
        }
        }
    }
    int rc = resolve_address(cli, &o);
    return rc == CLI_OK ? check_token_file(cli) : rc;
}

/* ---- arguments ------------------------------------------------------------- */

struct call_args {
    int n;
    pod_value *v;
    unsigned char **owned; /* per value: heap bytes to free, or NULL */
};

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A full-match int64 (decimal, optional sign, no blanks). */
static bool to_i64(const char *s, int64_t *out)
{
    char *end;
    if (!(isdigit((unsigned char)*s) || *s == '-' || *s == '+')) return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *out = (int64_t)v;
    return true;
}

/* A full-match double that did not overflow. */
static bool to_f64(const char *s, double *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return false;
    if (errno == ERANGE && isinf(v)) return false;
    *out = v;
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Hex digits (optionally after 0x) to heap bytes. */
static unsigned char *from_hex(const char *s, uint32_t *len)
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    size_t n = strlen(s);
    if (n % 2 || n / 2 > UINT32_MAX) return NULL;
    unsigned char *out = xmalloc(n / 2);
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = (uint32_t)(n / 2);
    return out;
}

static bool to_bytes(const char *s, pod_value *v)
{
    size_t n = strlen(s);
    if (n > UINT32_MAX) return false;
    *v = pod_v_bytes(s, (uint32_t)n);
    return true;
}

/* Only digits, signs, '.', 'e': worth trying as a number (not "inf", "0x1p3"). */
static bool looks_numeric(const char *s)
{
    bool digit = false;
    for (; *s; s++) {
        if (isdigit((unsigned char)*s)) digit = true;
        else if (!strchr("+-.eE", *s)) return false;
    }
    return digit;
}

/* An argument without a prefix: int64, double, or else bytes. */
static bool bare_value(const char *s, pod_value *v)
{
    int64_t i;
    double d;
    if (looks_numeric(s) && to_i64(s, &i)) *v = pod_v_i64(i);
    else if (looks_numeric(s) && strpbrk(s, ".eE") && to_f64(s, &d)) *v = pod_v_f64(d);
    else return to_bytes(s, v);
    return true;
}

/* Type one argument. Returns NULL, or what is wrong with it. */
static const char *parse_arg(const char *s, pod_value *v, unsigned char **owned)
{
    int64_t i;
    double d;
    uint32_t len;
    *owned = NULL;
    if (has_prefix(s, "i:")) {
        if (!to_i64(s + 2, &i)) return "not a 64-bit integer";
        *v = pod_v_i64(i);
    } else if (has_prefix(s, "f:")) {
        if (!to_f64(s + 2, &d)) return "not a double";
        *v = pod_v_f64(d);
    } else if (has_prefix(s, "s:")) {
        if (!to_bytes(s + 2, v)) return "too long";
    } else if (has_prefix(s, "x:")) {
        if (!(*owned = from_hex(s + 2, &len))) return "not hex bytes (pairs of digits 0-9a-f)";
        *v = pod_v_bytes(*owned, len);
    } else if (has_prefix(s, "null:")) {
        if (s[5]) return "null: takes no value";
        *v = (pod_value){.type = POD_T_NULL};
    } else if (!bare_value(s, v)) {
        return "too long";
    }
    return NULL;
}

static void args_free(struct call_args *a)
{
    for (int i = 0; i < a->n; i++) free(a->owned[i]);
    free(a->owned);
    free(a->v);
}

/* 0, or CLI_USAGE after printing which argument is bad. */
static int args_build(struct call_args *a, const char *proc, int n, char **words)
{
    if (n > MAX_ARGS) {
        fprintf(stderr, "poddb-cli: %s: %d arguments, at most %d\n", proc, n, MAX_ARGS);
        return CLI_USAGE;
    }
    a->n = 0;
    a->v = xmalloc((size_t)n * sizeof *a->v);
    a->owned = xmalloc((size_t)n * sizeof *a->owned);
    for (; a->n < n; a->n++) {
        const char *why = parse_arg(words[a->n], &a->v[a->n], &a->owned[a->n]);
        if (why) {
            fprintf(stderr, "poddb-cli: %s: argument %d '%s': %s\n", proc, a->n + 1,
                    words[a->n], why);
            args_free(a);
            return CLI_USAGE;
        }
    }
    return CLI_OK;
}

/* ---- output ------------------------------------------------------------------ */

/* The length of the valid UTF-8 character at p (n bytes left), or 0. */
static size_t utf8_char(const unsigned char *p, size_t n, uint32_t *cp_out)
{
    unsigned c = p[0];
    uint32_t cp, min;
    size_t extra;
    if (c < 0x80) extra = 0, cp = c, min = 0;
    else if ((c & 0xe0) == 0xc0) extra = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) extra = 2, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) extra = 3, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (n <= extra) return 0;
    for (size_t k = 1; k <= extra; k++) {
        if ((p[k] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    *cp_out = cp;
    return extra + 1;
}

/* Valid UTF-8 without control characters (C0, DEL, C1): safe to print. */
static bool printable_utf8(const unsigned char *p, size_t n)
{
    for (size_t i = 0, k; i < n; i += k) {
        uint32_t cp;
        if (!(k = utf8_char(p + i, n - i, &cp))) return false;
        if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return false;
    }
    return true;
}

/* A heap copy of s with bytes that are not UTF-8 replaced by '?' (for JSON). */
static char *utf8_sanitized(const char *s)
{
    size_t n = strlen(s);
    char *out = xmalloc(n + 1);
    for (size_t i = 0, k; i < n; i += k) {
        uint32_t cp;
        if (!(k = utf8_char((const unsigned char *)s + i, n - i, &cp))) {
            out[i] = '?';
            k = 1;
        } else {
            memcpy(out + i, s + i, k);
        }
    }
    out[n] = '\0';
    return out;
}

static bool value_printable(const pod_value *v)
{
    return printable_utf8(v->u.bytes, v->len);
}

/* The shortest of %.15g..%.17g that reads back as d; ".0" if it looks integral. */
static void format_f64(double d, char *buf, size_t n)
{
    if (isnan(d)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(d)) {
        snprintf(buf, n, d < 0 ? "-inf" : "inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".e")) strncat(buf, ".0", n - strlen(buf) - 1);
}

static void print_value_text(const pod_value *v)
{
    char num[40];
    switch (v->type) {
    case POD_T_I64: printf("%" PRId64, v->u.i64); break;
    case POD_T_F64:
        format_f64(v->u.f64, num, sizeof num);
        fputs(num, stdout);
        break;
    case POD_T_BYTES:
        if (value_printable(v)) {
            fwrite(v->u.bytes, 1, v->len, stdout);
        } else {
            fputs("0x", stdout);
            for (uint32_t i = 0; i < v->len; i++)
                printf("%02x", ((const unsigned char *)v->u.bytes)[i]);
        }
        break;
    default: fputs("NULL", stdout); break;
    }
}

/* Rows with at least one value, one line each. Returns how many values. */
static long print_rows_text(const pod_reply *r)
{
    long values = 0;
    for (int row = 0; row < pod_reply_nrows(r); row++) {
        int ncols = pod_reply_ncols(r, row);
        for (int col = 0; col < ncols; col++) {
            const pod_value *v = pod_reply_value(r, row, col);
            if (col) putchar('\t');
            if (v) print_value_text(v);
        }
        if (ncols > 0) putchar('\n');
        values += ncols > 0 ? ncols : 0;
    }
    return values;
}

static void print_reply_text(const struct cli *cli, const char *proc, const pod_reply *r)
{
    int status = pod_reply_status(r);
    const char *msg = pod_reply_message(r);
    bool has_msg = msg && *msg;
    if (status < 0) {
        fprintf(stderr, "poddb-cli: %s: %s%s%s\n", proc, pod_status_name(status),
                has_msg ? ": " : "", has_msg ? msg : "");
        return;
    }
    long values = print_rows_text(r);
    if (status > 0)
        printf("(%s%s%s)\n", pod_status_name(status), has_msg ? ": " : "", has_msg ? msg : "");
    else if (values == 0 && cli->terminal)
        puts("(ok)");
}

static void json_bytes(struct json_writer *w, const pod_value *v)
{
    const unsigned char *p = v->u.bytes;
    char *s;
    if (value_printable(v)) { /* no NUL inside: a C string */
        s = xmalloc((size_t)v->len + 1);
        memcpy(s, p, v->len);
        s[v->len] = '\0';
        json_str(w, s);
    } else {
        s = xmalloc((size_t)v->len * 2 + 1);
        for (uint32_t i = 0; i < v->len; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
        s[(size_t)v->len * 2] = '\0';
        json_obj_begin(w);
        json_kv_str(w, "hex", s);
        json_obj_end(w);
    }
    free(s);
}

static void json_value(struct json_writer *w, const pod_value *v)
{
    if (!v) {
        json_null(w);
        return;
    }
    switch (v->type) {
    case POD_T_I64: json_i64(w, v->u.i64); break;
    case POD_T_F64: json_f64(w, v->u.f64); break;
    case POD_T_BYTES: json_bytes(w, v); break;
    default: json_null(w); break;
    }
}

static void json_rows(struct json_writer *w, const pod_reply *r)
{
    json_key(w, "rows");
    json_arr_begin(w);
    for (int row = 0; row < pod_reply_nrows(r); row++) {
        int ncols = pod_reply_ncols(r, row);
        if (ncols <= 0) continue; /* a result always has a first row, maybe empty */
        json_arr_begin(w);
        for (int col = 0; col < ncols; col++) json_value(w, pod_reply_value(r, row, col));
        json_arr_end(w);
    }
    json_arr_end(w);
}

static void print_reply_json(const pod_reply *r)
{
    struct json_writer w;
    int status = pod_reply_status(r);
    const char *msg = pod_reply_message(r);
    json_init(&w, stdout);
    json_obj_begin(&w);
    json_kv_str(&w, "status", pod_status_name(status));
    json_kv_i64(&w, "code", status);
    if (status < 0 || (msg && *msg)) {
        char *clean = utf8_sanitized(msg ? msg : "");
        json_kv_str(&w, "message", clean);
        free(clean);
    }
    if (status >= 0) json_rows(&w, r);
    json_obj_end(&w);
    putchar('\n');
}

/* ---- calls -------------------------------------------------------------------- */

static int cli_connect(struct cli *cli)
{
    char err[256] = "";
    if (cli->client) return CLI_OK;
    cli->client = pod_client_connect(cli->address, err, sizeof err);
    if (!cli->client) {
        if (*err && strstr(err, cli->address)) /* the library's message names it */
            fprintf(stderr, "poddb-cli: %s\n", err);
        else
            fprintf(stderr, "poddb-cli: cannot connect to %s: %s\n", cli->address,
                    *err ? err : "unknown error");
        return CLI_TRANSPORT;
    }
    if (cli->timeout_ms > 0) pod_client_set_timeout(cli->client, cli->timeout_ms);
    if (cli->token_file && pod_client_auth_file(cli->client, cli->token_file) != POD_OK) {
        fprintf(stderr, "poddb-cli: %s: %s\n", cli->address, pod_client_error(cli->client));
        pod_client_close(cli->client);
        cli->client = NULL;
        return CLI_TRANSPORT;
    }
    return CLI_OK;
}

/* After a transport error the connection is unusable (a late reply could
 * still arrive on it): drop it; the shell reconnects for the next command. */
static void cli_disconnect(struct cli *cli)
{
    if (cli->client) pod_client_close(cli->client);
    cli->client = NULL;
}

static int call_and_print(struct cli *cli, const char *proc, const struct call_args *a)
{
    pod_reply *r = pod_client_call_flags(cli->client, proc, a->v, a->n, cli->call_flags);
    if (!r) {
        const char *why = pod_client_error(cli->client);
        fprintf(stderr, "poddb-cli: %s: transport error: %s\n", proc,
                why && *why ? why : "unknown error");
        cli_disconnect(cli);
        return CLI_TRANSPORT;
    }
    int status = pod_reply_status(r);
    if (cli->json) print_reply_json(r);
    else print_reply_text(cli, proc, r);
    pod_reply_free(r);
    return status == POD_OK ? CLI_OK : status > 0 ? CLI_OUTCOME : CLI_FAILED;
}

static int run_call(struct cli *cli, const char *proc, int nargs, char **words)
{
    struct call_args a;
    if (!*proc) return usage_error("empty procedure name", NULL);
    if (strlen(proc) > UINT16_MAX) return usage_error("procedure name too long", NULL);
    if (args_build(&a, proc, nargs, words) != CLI_OK) return CLI_USAGE;
    int rc = cli_connect(cli);
    if (rc == CLI_OK) rc = call_and_print(cli, proc, &a);
    args_free(&a);
    fflush(stdout);
    return rc;
}

/* ---- the shell ------------------------------------------------------------------ */

static char unescape(char c)
{
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    default: return 0;
    }
}

/* Split line in place into words: blanks separate, "..." groups (with
 * escapes). Returns the count, or -1 after printing what is wrong. */
static int split_words(char *line, char **words)
{
    char *r = line, *w = line;
    int n = 0;
    for (;;) {
        while (isspace((unsigned char)*r)) r++;
        if (!*r) return n;
        words[n++] = w;
        bool quoted = false;
        while (*r && (quoted || !isspace((unsigned char)*r))) {
            if (*r == '"') {
                quoted = !quoted;
                r++;
            } else if (quoted && *r == '\\' && r[1]) { /* a final \ leaves the quote open */
                char c = unescape(r[1]);
                if (!c) {
                    fprintf(stderr, "poddb-cli: unknown escape \\%c (use \\\\ for a backslash)\n",
                            r[1]);
                    return -1;
                }
                *w++ = c;
                r += 2;
            } else {
                *w++ = *r++;
            }
        }
        if (quoted) {
            fputs("poddb-cli: unterminated quote\n", stderr);
            return -1;
        }
        if (*r) r++; /* the blank after the word; w stays behind r */
        *w++ = '\0';
    }
}

static int run_words(struct cli *cli, int n, char **words)
{
    if (n == 0) return CLI_OK;
    if (!strcmp(words[0], "quit") || !strcmp(words[0], "exit")) return CLI_QUIT;
    if (!strcmp(words[0], "help")) {
        fputs(shell_help_text, stdout);
        return CLI_OK;
    }
    if (!strcmp(words[0], "call")) {
        if (n < 2) return usage_error("call: missing procedure name", NULL);
        return run_call(cli, words[1], n - 2, words + 2);
    }
    return run_call(cli, words[0], n - 1, words + 1);
}

/* One shell line (modified in place): a status, or CLI_QUIT. */
static int run_line(struct cli *cli, char *line)
{
    const char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '#' || !*p) return CLI_OK;
    char **words = xmalloc((strlen(line) / 2 + 1) * sizeof *words);
    int n = split_words(line, words);
    int rc = n < 0 ? CLI_USAGE : run_words(cli, n, words);
    free(words);
    fflush(stdout);
    return rc;
}

/* Commands from a pipe or file, without readline. */
static int shell_stream(struct cli *cli)
{
    char *line = NULL;
    size_t cap = 0;
    int last = CLI_OK;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        int rc = run_line(cli, line);
        if (rc == CLI_QUIT) break;
        if (rc != CLI_OK) last = rc;
    }
    free(line);
    return last;
}

static bool history_file(char *buf, size_t n)
{
    const char *home = getenv("HOME");
    if (!home || !*home) return false;
    return (size_t)snprintf(buf, n, "%s/.poddb_history", home) < n;
}

static void remember(const char *line, const char *path)
{
    const char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return;
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && !strcmp(last->line, line)) return;
    add_history(line);
    /* Save as we go (Ctrl-C must not lose it); create the file if needed.
     * A history that cannot be saved is not an error. */
    if (path && append_history(1, path) != 0) write_history(path);
}

/* The interactive shell on a terminal. */
static int shell_terminal(struct cli *cli)
{
    char path[PATH_MAX];
    const char *hist = history_file(path, sizeof path) ? path : NULL;
    char *line;
    bool quit = false;
    rl_readline_name = "poddb";
    rl_bind_key('\t', rl_insert); /* no file name completion */
    using_history();
    stifle_history(HISTORY_LINES);
    if (hist) read_history(hist);
    printf("poddb-cli: connected to %s; type help for help, quit to leave.\n", cli->address);
    while ((line = readline("poddb> ")) != NULL) {
        remember(line, hist);
        int rc = run_line(cli, line);
        free(line);
        if (rc == CLI_QUIT) {
            quit = true;
            break;
        }
    }
    if (!quit) putchar('\n'); /* end of input: leave the terminal's prompt on a new line */
    if (hist) history_truncate_file(hist, HISTORY_LINES);
    clear_history();
    return CLI_OK;
}

static int run_shell(struct cli *cli)
{
    cli->terminal = isatty(STDIN_FILENO);
    usage_hint = "Type 'help' for help.";
    if (cli_connect(cli) != CLI_OK) return CLI_TRANSPORT;
    return cli->terminal ? shell_terminal(cli) : shell_stream(cli);
}

static int run_command(struct cli *cli, int argc, char **argv)
{
    if (strcmp(argv[0], "call") != 0) return usage_error("unknown command", argv[0]);
    if (argc < 2) return usage_error("call: missing procedure name", NULL);
    return run_call(cli, argv[1], argc - 2, argv + 2);
}

int main(int argc, char **argv)
{
    struct cli cli = {0};
    int rc = parse_options(argc, argv, &cli);
    if (rc == CLI_HELP) return CLI_OK;
    if (rc != CLI_OK) return rc;
    if (optind < argc) rc = run_command(&cli, argc - optind, argv + optind);
    else rc = run_shell(&cli);
    cli_disconnect(&cli);
    return rc;
}
