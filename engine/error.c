#include "tn-internal.h"

#include <stdio.h>
#include <string.h>

int tn_vfail(tn_error *err, int code, const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        /* One line: a message never carries a newline from its arguments. */
        for (char *c = err->message; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
    }
    return code;
}

int tn_fail(tn_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tn_vfail(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void tn_error_clear(tn_error *err) {
    if (err) {
        err->code = TN_OK;
        err->message[0] = '\0';
    }
}

const char *tn_status_name(int status) {
    switch (status) {
    case TN_OK: return "ok";
    case TN_ERR_IO: return "i/o error";
    case TN_ERR_FORMAT: return "bad format";
    case TN_ERR_UNSUPPORTED: return "unsupported";
    case TN_ERR_INVALID: return "invalid argument";
    case TN_ERR_NOMEM: return "out of memory";
    case TN_ERR_OVERFLOW: return "does not fit";
    case TN_ERR_CANCELLED: return "cancelled";
    case TN_ERR_NOT_FOUND: return "not found";
    default: return "unknown error";
    }
}
