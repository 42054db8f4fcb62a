/* lce_converge.h — what a subject's gradient errors do to training: a small language model whose head
 * is the subject's FLCE, trained twice from the same start, once with the subject's gradients and once
 * with the reference's, and the two runs compared step by step.
 *
 * The model is a bigram LM: token x's embedding row E[x] is the hidden state, the head's weight W (E
 * itself when tied) gives the logits, the label is the next token. The data is a seeded token stream
 * from a Markov chain whose next-token law is Zipf-like (p(rank r) ∝ (r + 1)^-1.1 over a per-token
 * rotation of the vocab), so there is something to learn and the loss falls from ~log V. Parameters are
 * kept in double; each step they are rounded to the case's dtype for the subject and the reference, the
 * gradient is assembled (the weight's from the head, the embedding's from d_hidden scattered by token,
 * both when tied) and applied by plain SGD.
 *
 * Every eval_every steps, with θ_A the parameters trained by the subject's gradients and θ_B those
 * trained by the reference's:
 *   loss_a, loss_b   the exact loss (reference) at θ_A and at θ_B, on a held-out batch
 *   gap              (loss_a − loss_b) / loss_b
 *   drift            ‖θ_A − θ_B‖ / ‖θ_B − θ_0‖ (0 at step 0): how far apart the runs are, relative to
 *                    how far training has moved
 *   cosine, relerr   of the subject's gradient g against the reference's r, both at θ_A
 *   bias             (g − r)·r / ‖r‖²: the coherent part of the error, a scale of the whole step
 *                    (negative: the subject's steps are shorter; what slowed training in the seed bug)
 *   relerr_hidden    ‖g − r‖ / ‖r‖ of d_hidden alone (the head's input gradient, before it is scattered
 *                    into the embedding rows)
 *   relerr_head      the same of the head weight's gradient alone, on the rows d_hidden does not touch:
 *                    untied, all of W; tied, the rows of E that are not a token of the batch
 * The parts matter at a realistic head: d_hidden is n·H numbers against the head's V·H, and its share
 * of ‖r‖ falls with V/n, so an error of d_hidden alone (the seed bug's bf16 accumulation) is diluted in
 * the whole gradient's relerr (64 x 1024 x 16384: 2.0x a correct subject's there, d_hidden's 4.5x).
 * This is a training loop over steps, not a loop over cases: each step's tensors come from the model,
 * and the subject and reference run through their ordinary interfaces (lce_subject_run,
 * lce_reference_prepare). */
#ifndef LCE_CONVERGE_H
#define LCE_CONVERGE_H

#include "lce_reference.h"
#include "lce_subject.h"

typedef struct lce_converge_config {
  const lce_subject *subject;
  const lce_reference_tier *tier; /* NULL: tier 1 (fast) */
  lce_dtype dtype;
  int tied;
  int64_t n, h, v, vocab_chunk; /* tokens per step, hidden size, vocab, vocab rows per chunk */
  int steps;
  int eval_every; /* evaluate (held-out loss, drift, gradient agreement) every this many steps */
  double lr;
  uint64_t seed;
  /* Progress (may be NULL): after every step with phase NULL and the reference run's loss on the
   * step's batch; before each long part of a step (a reference or subject evaluation, the setup) with
   * phase naming it and loss_b NaN, since at a production-sized head each part takes seconds. */
  void (*progress)(void *ctx, int step, int steps, const char *phase, double loss_b);
  void *ctx;
} lce_converge_config;

typedef struct lce_converge_step {
  int step;                 /* updates done before this evaluation */
  double loss_a, loss_b;    /* on the held-out batch */
  double gap, drift;
  int has_gradient;         /* the gradient agreement was measured (not at the last step) */
  double cosine, relerr, bias, relerr_hidden, relerr_head;
} lce_converge_step;

typedef struct lce_converge_result {
  lce_converge_step *eval; /* [nevals]: at steps 0, eval_every, 2 eval_every, …, and the last */
  int nevals, steps;
  double min_cosine, max_relerr, max_relerr_hidden, max_relerr_head; /* over the steps with a gradient */
  double seconds;
} lce_converge_result;

/* The defaults of `lcecheck converge`: bf16, untied, N 64, H 32, V 256 in 64 vocab chunks of 4, 60
 * steps evaluated every 10, lr 4, seed 1, tier 1 (lcecheck converge's default lr is 2N/H: 4 here). */
lce_converge_config lce_converge_defaults(void);
/* The case each step runs (mean reduction, nothing ignored, no prior gradient): its id names the run. */
lce_case lce_converge_case(const lce_converge_config *cfg);
/* Runs both trainings. Errors: a subject or reference failure at some step (the message names it),
 * bad configuration (LCE_EINVAL), memory. */
lce_code lce_converge_run(const lce_converge_config *cfg, lce_converge_result *res, lce_status *st);
void lce_converge_free(lce_converge_result *res);

#endif
