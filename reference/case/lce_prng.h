/* lce_prng.h — counter-based random numbers: any element of any tensor can be regenerated from
 * (seed, stream, index) alone, on any machine, in any order. The mixer is SplitMix64's finalizer
 * applied to a combination of the three words, so a value never depends on how many were drawn
 * before it. */
#ifndef LCE_PRNG_H
#define LCE_PRNG_H

#include <stddef.h>
#include <stdint.h>

uint64_t lce_rand_u64(uint64_t seed, uint64_t stream, uint64_t index);
double lce_rand_uniform(uint64_t seed, uint64_t stream, uint64_t index); /* in (0, 1), 53 bits */
double lce_rand_normal(uint64_t seed, uint64_t stream, uint64_t index);  /* mean 0, variance 1, |x| < 3.47 */
uint64_t lce_rand_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound); /* [0, bound) */

/* 64-bit FNV-1a of size bytes, continuing from h (LCE_FNV1A_OFFSET to start): a fingerprint of bytes
 * (tensors, results, tokens, fuzz inputs) for equality tests, not a random number. */
#define LCE_FNV1A_OFFSET 0xcbf29ce484222325ull
uint64_t lce_fnv1a(uint64_t h, const void *data, size_t size);

#endif
