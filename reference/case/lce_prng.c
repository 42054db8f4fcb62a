/* lce_prng.c — counter-based random numbers (see lce_prng.h). */
#include "lce_prng.h"


/* SplitMix64's output function: a bijective avalanche mixer. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The two mixes that depend on (seed, stream) only, and the last one per index: lce_rand_u64 is
 * index_mix(stream_key(seed, stream), index), split so that a caller drawing several indices of one
 * stream mixes its key once. */
static inline uint64_t stream_key(uint64_t seed, uint64_t stream) {
  const uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
  return mix64(h ^ (stream * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
}

static inline uint64_t index_mix(uint64_t key, uint64_t index) {
  return mix64(key ^ (index * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull));
}

static inline double uniform_of(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1p-53; }

uint64_t lce_rand_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  return index_mix(stream_key(seed, stream), index);
}

double lce_rand_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return uniform_of(lce_rand_u64(seed, stream, index));
}

double lce_rand_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  /* Irwin–Hall sum of four uniforms, standardized. Only +, - and * are used, never libm's log or
   * cos, whose last bits differ between C libraries: the value is bit-identical on every IEEE
   * machine, which is what lets a case id regenerate its tensors anywhere. Tails end at ±3.46. */
  const uint64_t key = stream_key(seed, stream);
  double s = 0.0;
  for (uint64_t j = 0; j < 4; j++) s += uniform_of(index_mix(key, 4 * index + j));
  return (s - 2.0) * 1.7320508075688772;
}

uint64_t lce_rand_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound) {
  if (bound == 0) return 0;
  /* Multiply-shift reduction; the bias (< bound / 2^64) is irrelevant for test generation. */
  return (uint64_t)(((unsigned __int128)lce_rand_u64(seed, stream, index) * bound) >> 64);
}

uint64_t lce_fnv1a(uint64_t h, const void *data, size_t size) {
  const unsigned char *p = data;
  for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
