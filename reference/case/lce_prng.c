/* lce_prng.c — counter-based random numbers (see lce_prng.h). */
#include "lce_prng.h"


/* SplitMix64's output function: a bijective avalanche mixer. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t lce_rand_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ (stream * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
  return mix64(h ^ (index * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull));
}

double lce_rand_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return ((double)(lce_rand_u64(seed, stream, index) >> 11) + 0.5) * 0x1p-53;
}

double lce_rand_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  /* Irwin–Hall sum of four uniforms, standardized. Only +, - and * are used, never libm's log or
   * cos, whose last bits differ between C libraries: the value is bit-identical on every IEEE
   * machine, which is what lets a case id regenerate its tensors anywhere. Tails end at ±3.46. */
  double s = 0.0;
  for (uint64_t j = 0; j < 4; j++) s += lce_rand_uniform(seed, stream, 4 * index + j);
  return (s - 2.0) * 1.7320508075688772;
}

uint64_t lce_rand_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound) {
  if (bound == 0) return 0;
  /* Multiply-shift reduction; the bias (< bound / 2^64) is irrelevant for test generation. */
  return (uint64_t)(((unsigned __int128)lce_rand_u64(seed, stream, index) * bound) >> 64);
}
