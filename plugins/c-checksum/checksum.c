// warren plugin in C: checksums of files under the granted directories.
//
// Tool: checksum {path, algorithm?}  algorithm: "crc32" (default), "adler32" or "fnv1a64".
// Build: ./build.sh (clang + wasi-libc, wit-bindgen C bindings, then
// `warren plugin componentize` with the WASI preview1 reactor adapter).

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#define MAX_STRING 4096

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"Guest path of the file, e.g. /data/a.bin\"},"
    "\"algorithm\":{\"type\":\"string\",\"enum\":[\"crc32\",\"adler32\",\"fnv1a64\"],\"default\":\"crc32\"}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}";

void exports_warren_plugin_tool_list_tools(exports_warren_plugin_tool_list_tool_spec_t *ret) {
    ret->len = 1;
    ret->ptr = calloc(1, sizeof(exports_warren_plugin_tool_tool_spec_t));
    plugin_string_dup(&ret->ptr[0].name, "checksum");
    plugin_string_dup(&ret->ptr[0].description,
                      "Checksum a file (crc32, adler32 or fnv1a64) and report its size.");
    plugin_string_dup(&ret->ptr[0].input_schema, SCHEMA);
}

static bool fail(exports_warren_plugin_tool_tool_error_t *err, uint8_t tag, const char *message) {
    err->tag = tag;
    plugin_string_dup(tag == EXPORTS_WARREN_PLUGIN_TOOL_TOOL_ERROR_INVALID_INPUT ? &err->val.invalid_input
                                                                                 : &err->val.failed,
                      message);
    return false;
}

// Finds the string value of `key` in a flat JSON object; handles \" and \\ escapes.
// Returns 1 when found, 0 when absent, -1 when present but not a usable string.
static int json_string(const char *json, size_t len, const char *key, char *out) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    size_t plen = strlen(pattern);
    for (size_t i = 0; i + plen <= len; i++) {
        if (memcmp(json + i, pattern, plen) != 0) continue;
        size_t j = i + plen;
        while (j < len && (json[j] == ' ' || json[j] == '\t' || json[j] == '\n' || json[j] == '\r')) j++;
        if (j >= len || json[j] != ':') continue;
        j++;
        while (j < len && (json[j] == ' ' || json[j] == '\t' || json[j] == '\n' || json[j] == '\r')) j++;
        if (j >= len || json[j] != '"') return -1;
        size_t o = 0;
        for (j++; j < len && json[j] != '"'; j++) {
            char c = json[j];
            if (c == '\\' && j + 1 < len) {
                c = json[++j];
                if (c == 'n') c = '\n';
                else if (c == 't') c = '\t';
                else if (c != '"' && c != '\\' && c != '/') return -1;
            }
            if (o + 1 >= MAX_STRING) return -1;
            out[o++] = c;
        }
        if (j >= len) return -1;
        out[o] = '\0';
        return 1;
    }
    return 0;
}

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

bool exports_warren_plugin_tool_call_tool(plugin_string_t *name, plugin_string_t *arguments, plugin_string_t *ret,
                                          exports_warren_plugin_tool_tool_error_t *err) {
    if (name->len != 8 || memcmp(name->ptr, "checksum", 8) != 0) {
        return fail(err, EXPORTS_WARREN_PLUGIN_TOOL_TOOL_ERROR_INVALID_INPUT, "unknown tool");
    }
    static char path[MAX_STRING], algorithm[MAX_STRING];
    const char *json = (const char *)arguments->ptr;
    if (json_string(json, arguments->len, "path", path) != 1) {
        return fail(err, EXPORTS_WARREN_PLUGIN_TOOL_TOOL_ERROR_INVALID_INPUT, "`path` must be a string");
    }
    int has_algorithm = json_string(json, arguments->len, "algorithm", algorithm);
    if (has_algorithm < 0) {
        return fail(err, EXPORTS_WARREN_PLUGIN_TOOL_TOOL_ERROR_INVALID_INPUT, "`algorithm` must be a string");
    }
    if (has_algorithm == 0) strcpy(algorithm, "crc32");
    int kind = strcmp(algorithm, "crc32") == 0 ? 0 : strcmp(algorithm, "adler32") == 0 ? 1
             : strcmp(algorithm, "fnv1a64") == 0 ? 2 : -1;
    if (kind < 0) {
        return fail(err, EXPORTS_WARREN_PLUGIN_TOOL_TOOL_ERROR_INVALID_INPUT,
                    "`algorithm` must be crc32, adler32 or fnv1a64");
    }
    FILE *file = fopen(path, "rb");
    if (!file) {
        char message[MAX_STRING + 128];
        if (errno == EACCES || errno == EPERM || errno == ENOTCAPABLE) {
            snprintf(message, sizeof message, "denied: %s is not reachable with this profile's file capabilities", path);
        } else {
            snprintf(message, sizeof message, "%s: %s", path, strerror(errno));
        }
        return fail(err, EXPORTS_WARREN_PLUGIN_TOOL_TOOL_ERROR_FAILED, message);
    }
    crc_init();
    uint32_t crc = 0xFFFFFFFFu, a = 1, b = 0;
    uint64_t fnv = 0xcbf29ce484222325ull, size = 0;
    unsigned char buffer[65536];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, file)) > 0) {
        for (size_t i = 0; i < n; i++) {
            crc = crc_table[(crc ^ buffer[i]) & 0xFF] ^ (crc >> 8);
            a = (a + buffer[i]) % 65521;
            b = (b + a) % 65521;
            fnv = (fnv ^ buffer[i]) * 0x100000001b3ull;
        }
        size += n;
    }
    fclose(file);
    char out[MAX_STRING + 128];
    if (kind == 0) snprintf(out, sizeof out, "crc32 %08x  %llu bytes  %s", crc ^ 0xFFFFFFFFu, (unsigned long long)size, path);
    else if (kind == 1) snprintf(out, sizeof out, "adler32 %08x  %llu bytes  %s", (b << 16) | a, (unsigned long long)size, path);
    else snprintf(out, sizeof out, "fnv1a64 %016llx  %llu bytes  %s", (unsigned long long)fnv, (unsigned long long)size, path);
    plugin_string_dup(ret, out);
    return true;
}
