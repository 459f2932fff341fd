#include <math.h>
#include <stdlib.h>
#include "stats.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int summarize(double *values, size_t n, summary_t *out) {
    if (n == 0) return -1;
    qsort(values, n, sizeof *values, cmp_double);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += values[i];
    double mean = sum / (double)n;
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) sq += (values[i] - mean) * (values[i] - mean);
    out->n = n;
    out->mean = mean;
    out->median = (n % 2) ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
    out->stddev = sqrt(sq / (double)n);
    out->min = values[0];
    out->max = values[n - 1];
    return 0;
}
