#include <stdlib.h>
#include <string.h>
#include "parse.h"

size_t read_numbers(FILE *fp, double **values, size_t *bad_token) {
    size_t n = 0, cap = 16;
    double *buf = malloc(cap * sizeof *buf);
    char tok[128];
    if (!buf) return (size_t)-1;
    while (fscanf(fp, "%127s", tok) == 1) {
        char *end;
        double v = strtod(tok, &end);
        if (end == tok || *end != '\0') {
            free(buf);
            *bad_token = n + 1;
            return (size_t)-1;
        }
        if (n == cap) {
            cap *= 2;
            double *grown = realloc(buf, cap * sizeof *buf);
            if (!grown) { free(buf); return (size_t)-1; }
            buf = grown;
        }
        buf[n++] = v;
    }
    *values = buf;
    return n;
}
