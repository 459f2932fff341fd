/* Reading numbers from a stream. */
#include <stdio.h>
#include "stats.h"

/* Reads whitespace-separated numbers from fp into a growing array.
 * Returns the count and stores the malloc'd array in *values (caller frees);
 * returns (size_t)-1 on a token that is not a number, with the token's 1-based
 * position in *bad_token. */
size_t read_numbers(FILE *fp, double **values, size_t *bad_token);
