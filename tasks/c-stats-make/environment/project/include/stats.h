/* Summary statistics over an array of doubles. */

typedef struct summary {
    size_t n;
    double mean;
    double median;
    double stddev; /* population standard deviation */
    double min;
    double max;
} summary_t;

/* Fills *out from values[0..n); values is sorted in place. Returns 0, or -1 when n == 0. */
int summarize(double *values, size_t n, summary_t *out);
