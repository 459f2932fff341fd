#include <stdio.h>
#include <stdlib.h>
#include "stats.h"
#include "parse.h"

int main(void) {
    double *values = NULL;
    size_t bad = 0;
    size_t n = read_numbers(stdin, &values, &bad);
    if (n == (size_t)-1) {
        fprintf(stderr, "stats: token %zu is not a number\n", bad);
        return 2;
    }
    summary_t s;
    if (summarize(values, n, &s) != 0) {
        printf("n=0\n");
        free(values);
        return 0;
    }
    printf("n=%zu mean=%.3f median=%.3f stddev=%.3f min=%.3f max=%.3f\n",
           s.n, s.mean, s.median, s.stddev, s.min, s.max);
    free(values);
    return 0;
}
