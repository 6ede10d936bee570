/* fast's greedy decoder, compiled: the same bit logic as blocks.BlockIndex.find/occupy
 * and fast.pack, for horizons of at most 63 steps (one uint64 word per aligned block).
 *
 * Layout: every block size k = 2**l (l = 0 .. levels-1) has count[l] aligned blocks whose
 * busy words sit at words[offset[l] .. offset[l] + count[l]). Bit t set: some GPU of the
 * block is busy at step t. The Python fallback in fast.py is the reference; a test holds
 * the two to the same spots and value on random scenarios.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    uint64_t *words;
    const int64_t *offset;
    const int64_t *count;
    int levels;
    int64_t *spare; /* GPUs per step batch may still take; NULL: no reservation */
    int T;
    double spill; /* >= 0: a job may take reserved GPUs, each step priced at this */
    int gap; /* best fit by the free stretch a run fills first (gap_score), then the buddy */
} State;

static inline uint64_t span(int start, int end) {
    return end > start ? (((uint64_t)1 << (end - start)) - 1) << start : 0;
}

/* Bits set in x. The build targets baseline x86-64 (no POPCNT instruction), where
 * __builtin_popcountll is a call into libgcc: this inline form costs a dozen operations. */
static inline int popcount64(uint64_t x) {
#ifdef __POPCNT__
    return __builtin_popcountll(x);
#else
    x -= (x >> 1) & 0x5555555555555555ULL;
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* The first block from i on whose word has none of `busy`'s bits (n if none): four
 * blocks a test, the scan find spends most of its time in at 64 GPUs. */
static inline int64_t next_free(const uint64_t *w, int64_t n, int64_t i, uint64_t busy) {
    for (; i + 4 <= n; i += 4)
        if (!((w[i] & busy) && (w[i + 1] & busy) && (w[i + 2] & busy) && (w[i + 3] & busy)))
            break;
    for (; i < n; i++)
        if (!(w[i] & busy)) return i;
    return n;
}

/* Where a block's busy stretches are many (fragmented layouts: real replans at 12-16
 * GPUs crossed a dozen a block), find's hops give way to a run search after this many.
 * The search costs about six hops (log2 of the window, in shifts): at 2 the real 16-GPU
 * replans ran a little faster still (8.3 against 9.5 ms), but the 1024-GPU scale case
 * (48 steps, long windows, few stretches) took 23% more instructions; at 6, 7% (and
 * 0.3-1.5% at 8, 64 and 256 GPUs). */
#ifndef HOPS_BEFORE_RUNS
#define HOPS_BEFORE_RUNS 6
#endif

/* The earliest s in [from, T) whose steps [s, min(s + window, T)) are all free in `word`
 * (T if none): the starts of free runs of `window` steps, by shifts that double the run
 * (steps past the horizon count as free, bits past 63 too: a run may pass the end). */
static inline int earliest_run(uint64_t word, uint64_t horizon, int window, int from, int T) {
    uint64_t runs = ~word | ~horizon;
    for (int have = 1; have < window;) {
        const int sh = have < window - have ? have : window - have;
        runs &= (runs >> sh) | (~0ULL << (64 - sh));
        have += sh;
    }
    runs &= span(from, T);
    return runs ? __builtin_ctzll(runs) : T;
}

/* The gap rule's score of block i for a run over [start, end): how tightly the run fills
 * the block's free stretch (the steps from its end to the block's next busy step, past the
 * horizon if none), then the buddy's busy steps over the run. A run that ends where a
 * later job's block begins leaves no hole in it. */
static inline int64_t gap_score(const uint64_t *w, int64_t n, int64_t i, int start, int end,
                                uint64_t also_busy, int T) {
    const int64_t buddy = i ^ 1;
    const int busy = buddy < n ? popcount64((w[buddy] | also_busy) & span(start, end))
                               : end - start;
    const uint64_t after = (w[i] | also_busy) & span(end, T);
    const int slack = (after ? __builtin_ctzll(after) : T + 1) - end;
    return (int64_t)(64 - slack) * 64 + busy;
}

/* find by the gap rule: the earliest start over every block (earliest_run's), then among
 * the blocks free from there gap_score's best, ties lowest. Kept apart from find, whose
 * default path it would slow: the rule runs in refinement runs only. */
__attribute__((noinline)) static int find_gap(const State *s, int level, int length,
                                              int earliest, uint64_t also_busy,
                                              int64_t *block) {
    const int T = s->T;
    const uint64_t *w = s->words + s->offset[level];
    const int64_t n = s->count[level];
    const int window = length < T ? length : T;
    const int run_length = window > 0 ? window : 1;
    const uint64_t horizon = span(0, T);
    const int first = earliest > 0 ? earliest : 0;
    int best_start = T;
    int64_t best = -1, best_score = -1;
    for (int64_t i = 0; i < n; i++) {
        const int start = earliest_run(w[i] | also_busy, horizon, run_length, first, T);
        if (start >= T || start > best_start) continue;
        const int end = start + length < T ? start + length : T;
        const int64_t score = gap_score(w, n, i, start, end, also_busy, T);
        if (start < best_start || score > best_score) {
            best_start = start;
            best = i;
            best_score = score;
        }
    }
    if (best < 0) return -1;
    *block = best;
    return best_start;
}

/* Earliest start >= earliest with a free aligned block of 2**level GPUs for `length`
 * steps (a run may pass the horizon's end), then the block: with best_fit the one whose
 * buddy is busiest over the run (with the state's `gap`, gap_score's best), ties lowest.
 * Returns the start, or -1. */
static int find(const State *s, int level, int length, int earliest, uint64_t also_busy,
                int best_fit, int64_t *block) {
    const int T = s->T;
    if (level >= s->levels || s->count[level] == 0 || earliest >= T) return -1;
    if (best_fit && s->gap) return find_gap(s, level, length, earliest, also_busy, block);
    const uint64_t *w = s->words + s->offset[level];
    const int64_t n = s->count[level];
    const int window = length < T ? length : T;
    const uint64_t horizon = span(0, T);
    const int first = earliest > 0 ? earliest : 0;
    /* A start s fits when the block is free over [s, min(s + window, T)) (a run passing
     * the horizon's end needs only its steps inside it; a zero length still needs step s
     * free, in the hops and the run search alike): the bits of that window are
     * (run_bits << s) & horizon, bits at or past T falling off or masked away. */
    const int run_length = window > 0 ? window : 1;
    const uint64_t run_bits = span(0, run_length);
    int64_t best = -1;
    int best_busy = -1;
    /* Most answers start at `first` (over half at 64 GPUs). Blocks free from there are
     * found first, by one test each: no hops spent on blocks that start later and lose.
     * Steps busy for every block (also_busy) there rule the start out for all at once. */
    const uint64_t at_first = (run_bits << first) & horizon;
    if (!(also_busy & at_first)) {
        const int end = first + length < T ? first + length : T;
        const uint64_t run = span(first, end);
        for (int64_t i = 0; (i = next_free(w, n, i, at_first)) < n; i++) {
            if (!best_fit) {
                *block = i;
                return first;
            }
            const int64_t buddy = i ^ 1;
            /* a buddy free at `first` is free over the whole run (the same steps, when the
             * length is at least 1; none when it is 0): busy 0, which only a first block
             * takes, so its popcount is not spent */
            if (best >= 0 && buddy < n && !(w[buddy] & at_first)) continue;
            const int busy = buddy < n ? popcount64((w[buddy] | also_busy) & run) : end - first;
            if (busy > best_busy) {
                best = i;
                best_busy = busy;
                if (busy == end - first) break; /* busy throughout: none beats it */
            }
        }
        if (best >= 0) {
            *block = best;
            return first;
        }
    }
    /* Here no block fits at `first`: each block's earliest start is searched by hops. */
    int best_start = T;
    /* Once a start is found, a block can only match or beat it with a run from some
     * s in [first, best_start], and every such run covers [best_start, first + window):
     * a block busy there is skipped without the run search (the same answer). */
    const int cover_end = first + window < T ? first + window : T;
    uint64_t must_free = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t word = w[i] | also_busy;
        if (word & must_free) continue;
        /* The earliest fitting start, by hops: a start whose window is busy cannot fit
         * before the step after the window's last busy step, so the search jumps there
         * (one hop per busy stretch crossed; most blocks at scale need one or two). A
         * start past best_start cannot win: given up. Past HOPS_BEFORE_RUNS hops the
         * block is fragmented, and the run search (log2(window) shifts) ends it. */
        int start = first;
        uint64_t clash = word & (run_bits << start) & horizon;
        for (int hopped = 0; clash; hopped++) {
            if (hopped == HOPS_BEFORE_RUNS) {
                start = earliest_run(word, horizon, run_length, start, T);
                break;
            }
            start = 64 - __builtin_clzll(clash);
            if (start > best_start) break;
            clash = word & (run_bits << start) & horizon;
        }
        if (start > best_start || start >= T) continue;
        int busy = 0;
        if (best_fit) {
            int end = start + length < T ? start + length : T;
            int64_t buddy = i ^ 1;
            busy = buddy < n ? popcount64((w[buddy] | also_busy) & span(start, end))
                             : end - start;
        }
        if (start < best_start || busy > best_busy) {
            best_start = start;
            best = i;
            best_busy = busy;
            must_free = span(start, cover_end);
        }
    }
    if (best < 0) return -1;
    *block = best;
    return best_start;
}

static void occupy(State *s, int64_t first, int64_t gpus, int start, int end) {
    const uint64_t bits = span(start, end);
    for (int l = 0; l < s->levels; l++) { /* blocks of 2**l: shifts, not divisions */
        uint64_t *w = s->words + s->offset[l];
        if (((int64_t)1 << l) <= gpus) {
            for (int64_t i = first >> l; i < (first + gpus) >> l; i++) w[i] |= bits;
        } else if ((first >> l) < s->count[l]) {
            w[first >> l] |= bits;
        }
    }
}

/* The steps whose spare is below g, one bit each (T <= 63): where a job of g GPUs cannot
 * run without taking reserved ones. spare[t] < g is the sign of spare[t] - g (no
 * overflow: both are GPU counts), read two steps at a time where SSE2 is there. */
static inline uint64_t short_of(const int64_t *spare, int T, int64_t g) {
    uint64_t out = 0;
    int t = 0;
#ifdef __SSE2__
    const __m128i gv = _mm_set1_epi64x(g);
    for (; t + 2 <= T; t += 2) {
        const __m128i d = _mm_sub_epi64(_mm_loadu_si128((const __m128i *)(spare + t)), gv);
        out |= (uint64_t)_mm_movemask_pd(_mm_castsi128_pd(d)) << t;
    }
#endif
    for (; t < T; t++) out |= ((uint64_t)(spare[t] - g) >> 63) << t;
    return out;
}

#define GET(buf, fmt_obj, writable)                                                        \
    (PyObject_GetBuffer((fmt_obj), &(buf), (writable) ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS \
                                                      : PyBUF_C_CONTIGUOUS) == 0)

typedef struct {
    const int64_t *gpus, *length, *arrival;
    const double *weight, *decay;
} Jobs;

/* What job i's run from `start` earns (cut at the horizon). */
static inline double run_value(const Jobs *j, int64_t i, int start, int T) {
    const int end = start + j->length[i] < T ? start + (int)j->length[i] : T;
    return j->weight[i] * (j->decay[end] - j->decay[start]);
}

/* The same net of the reserved GPU-steps it takes, at `spill` each (`lack`: their running
 * sum per step). */
static inline double spill_value(const Jobs *j, int64_t i, int start, int T, const double *lack,
                                 double spill) {
    const int end = start + j->length[i] < T ? start + (int)j->length[i] : T;
    return run_value(j, i, start, T) - spill * (lack[end] - lack[start]);
}

/* The greedy pass: each job of order[0..n) at its earliest feasible start; what they earn
 * is added to `value` one job at a time (a pass resumed from a saved prefix with that
 * prefix's sum adds in the order a whole pass would: the same double, bit for bit). */
/* With `rem` (pack_above's bounds), the pass stops (-INFINITY) before job p once value +
 * rem[p] is below `floor`: one loop, no call per job. */
static double pack_on(State *s, const Jobs *j, const int64_t *order, Py_ssize_t n,
                      int best_fit, int *bound, int64_t *out_start, int64_t *out_first,
                      double value, const double *rem, double floor) {
    const int T = s->T;
    for (Py_ssize_t p = 0; p < n; p++) {
        if (rem && value + rem[p] < floor) return -INFINITY;
        const int64_t i = order[p];
        const int64_t g = j->gpus[i];
        out_start[i] = -1;
        out_first[i] = -1;
        if (g <= 0 || (g & (g - 1))) continue;
        const uint64_t short_steps = s->spare ? short_of(s->spare, T, g) : 0;
        int64_t block;
        int earliest = (int)j->arrival[i];
        if (*bound > earliest) earliest = *bound;
        const int level = __builtin_ctzll((uint64_t)g);
        int start = find(s, level, (int)j->length[i], earliest, short_steps, best_fit, &block);
        if (s->spare && s->spill >= 0 && short_steps && (start < 0 || start > earliest)) {
            /* Worth the reserved GPUs it takes? Each earlier start on GPUs realtime would
             * miss, earliest first, while a run from there still earns more than the best
             * so far (a later start earns less): the one whose value net of its deficit is
             * most. The deficit is the window's alone, so a start that cannot beat the
             * best is passed over without a block search. */
            const int kept = start;
            double best = kept >= 0 ? run_value(j, i, kept, T) : 0;
            double lack[65]; /* reserved GPU-steps a run takes up to each step (T <= 63) */
            int have_lack = 0; /* summed once a start is worth weighing: most jobs stop first */
            int from = earliest;
            while (from < T && (kept < 0 || from < kept)) {
                if (run_value(j, i, from, T) <= best) break;
                if (!have_lack) {
                    lack[0] = 0;
                    for (int t = 0; t < T; t++)
                        lack[t + 1] = lack[t] + (s->spare[t] < g ? (double)(g - (s->spare[t] > 0 ? s->spare[t] : 0)) : 0);
                    have_lack = 1;
                }
                double take = spill_value(j, i, from, T, lack, s->spill);
                if (take <= best) {
                    from++;
                    continue;
                }
                int64_t over_block;
                int over = find(s, level, (int)j->length[i], from, 0, best_fit, &over_block);
                if (over < 0 || (kept >= 0 && over >= kept)) break;
                if (over > from) take = spill_value(j, i, over, T, lack, s->spill);
                if (take > best) {
                    best = take;
                    start = over;
                    block = over_block;
                }
                from = over + 1;
            }
        }
        if (start < 0) continue;
        int end = start + j->length[i] < T ? start + (int)j->length[i] : T;
        occupy(s, block * g, g, start, end);
        if (s->spare)
            for (int t = start; t < end; t++) s->spare[t] -= g;
        value += j->weight[i] * (j->decay[end] - j->decay[start]);
        out_start[i] = start;
        out_first[i] = block * g;
        if (*bound >= 0) *bound = start;
    }
    return value;
}

static double pack_run(State *s, const Jobs *j, const int64_t *order, Py_ssize_t n,
                       int best_fit, int *bound, int64_t *out_start, int64_t *out_first) {
    return pack_on(s, j, order, n, best_fit, bound, out_start, out_first, 0.0, NULL, 0.0);
}

/* Buffers 0..11: words, offset, count, spare|None, order, gpus, length, arrival, weight,
 * decay, start, first. */
static const int WRITABLE[12] = {1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1};

static int get_buffers(PyObject **o, Py_buffer *b, int *got) {
    for (*got = 0; *got < 12; (*got)++) {
        if (*got == 3 && o[3] == Py_None) {
            b[3].buf = NULL;
            b[3].obj = NULL;
            continue;
        }
        if (!GET(b[*got], o[*got], WRITABLE[*got])) return 0;
    }
    return 1;
}

static void release(Py_buffer *b, int got) {
    for (int i = 0; i < got; i++)
        if (b[i].obj) PyBuffer_Release(&b[i]);
}

/* pack(words, offset, count, spare|None, order, gpus, length, arrival, weight, decay,
 *      start, first, best_fit, bound, spill[, None, None, gap]) -> (value, bound). Places
 * the jobs of `order` greedily, each at its earliest feasible start; writes start[i],
 * first[i] (-1: left out) and updates words and spare. bound >= 0 is fifo's rule: no
 * start before the last placed job's (the new bound is returned); -1 leaves starts free.
 * `gap`: the best fit by the gap rule (State.gap); every entry below takes it last. */
/* pack's and best_of's arguments: the twelve buffers, best_fit, bound and spill, then
 * best_of's outputs and gap (optional); 0 with the error set and nothing held. */
static int pack_args(PyObject *args, const char *format, Py_buffer *b, int *got,
                     int *best_fit, int *bound, double *spill, PyObject **extra, int *gap) {
    PyObject *o[12];
    /* `extra`: two more objects for a format that takes them (best_of's), else unread */
    if (!PyArg_ParseTuple(args, format, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &o[9], &o[10], &o[11], best_fit, bound, spill,
                          &extra[0], &extra[1], gap))
        return 0;
    if (!get_buffers(o, b, got)) {
        release(b, *got);
        return 0;
    }
    return 1;
}

static PyObject *pack(PyObject *self, PyObject *args) {
    (void)self;
    int best_fit, bound, got, gap = 0;
    double spill;
    Py_buffer b[12];
    PyObject *unused[2] = {Py_None, Py_None};
    if (!pack_args(args, "OOOOOOOOOOOOpid|OOp:pack", b, &got, &best_fit, &bound, &spill, unused,
                   &gap))
        return NULL;
    State s = {(uint64_t *)b[0].buf, (const int64_t *)b[1].buf, (const int64_t *)b[2].buf,
               (int)(b[1].len / 8), (int64_t *)b[3].buf, (int)(b[9].len / 8) - 1, spill, gap};
    Jobs j = {b[5].buf, b[6].buf, b[7].buf, b[8].buf, b[9].buf};
    double value = pack_run(&s, &j, b[4].buf, b[4].len / 8, best_fit, &bound, b[10].buf,
                            b[11].buf);
    release(b, got);
    return Py_BuildValue("(di)", value, bound);
}

/* Take n buffers, C-contiguous, those whose bit is set in `writable` writable; on a
 * failure every buffer taken so far is released and 0 returned (the error set). */
static int take_buffers(PyObject **o, Py_buffer *b, int n, unsigned writable) {
    for (int got = 0; got < n; got++)
        if (!GET(b[got], o[got], (writable >> got) & 1u)) {
            for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
            return 0;
        }
    return 1;
}

static void release_all(Py_buffer *b, int n) {
    for (int k = 0; k < n; k++) PyBuffer_Release(&b[k]);
}

/* The busy words of every level above the GPUs' own, each block the OR of its halves. */
static void fill_levels(uint64_t *words, const int64_t *offset, const int64_t *count,
                        int levels) {
    for (int l = 1; l < levels; l++) {
        const uint64_t *child = words + offset[l - 1];
        uint64_t *w = words + offset[l];
        for (int64_t i = 0; i < count[l]; i++) w[i] = child[2 * i] | child[2 * i + 1];
    }
}

/* The busy words of every level from `cells` busy bytes ((T, G), C order; T <= 63). */
static void busy_words(const unsigned char *busy, Py_ssize_t cells, uint64_t *words,
                       const int64_t *offset, const int64_t *count, int levels) {
    const int64_t G = levels ? count[0] : 0;
    const int64_t T = G ? (int64_t)cells / G : 0;
    if (levels) {
        uint64_t *col = words + offset[0];
        for (int64_t g = 0; g < G; g++) col[g] = 0;
        for (int64_t t = 0; t < T && t < 64; t++) {
            const unsigned char *row = busy + t * G;
            const uint64_t bit = (uint64_t)1 << t;
            for (int64_t g = 0; g < G; g++) col[g] |= row[g] ? bit : 0;
        }
    }
    fill_levels(words, offset, count, levels);
}

/* index(busy (T, G) bool, words, offset, count): the busy words of blocks.BlockIndex from a
 * grid's busy cells, written into `words` (uint64, offset[l] + count[l] per level l):
 * bit t of a block's word is set when any of its GPUs is busy at step t (T <= 63). */
static PyObject *index_words(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO:index", &o[0], &o[1], &o[2], &o[3])) return NULL;
    Py_buffer b[4];
    if (!take_buffers(o, b, 4, 1u << 1)) return NULL;
    const unsigned char *busy = b[0].buf;
    uint64_t *words = b[1].buf;
    const int64_t *offset = b[2].buf, *count = b[3].buf;
    busy_words(busy, (Py_ssize_t)b[0].len, words, offset, count, (int)(b[2].len / 8));
    release_all(b, 4);
    Py_RETURN_NONE;
}

/* best_of(words, offset, count, spare|None, orders (O, n) int64, gpus, length, arrival,
 *         weight, decay, start, first, best_fit, -1, spill[, words_out, spare_out, gap])
 * -> (value, k): a greedy pass of each order from the state given (left unchanged); the
 * first order earning most is k, its spots written to start/first and, where given
 * (not None), the state it leaves to words_out and spare_out (the caller's fork need not
 * replay it). Returns (-inf, -1) for no order. */
/* best_of's loop: the greedy pass of each of the O orders (rows of n job indices) from
 * the state (words0, spare0; spare0 NULL: none). The first pass earning most wins: its
 * index in *won (-1: no order) and its gain in *best (-INFINITY: none), its spots written
 * into start/first (the state's on entry; jobs of no order keep theirs) and, where given,
 * its busy words and spare into words_out/spare_out. 0 with no memory. */
static int best_of_core(const uint64_t *words0, const int64_t *spare0, Py_ssize_t W, int T,
                        const int64_t *offset, const int64_t *count, int levels, const Jobs *j,
                        Py_ssize_t J, const int64_t *orders, Py_ssize_t O, Py_ssize_t n,
                        int best_fit, int gap, double spill, int64_t *start, int64_t *first,
                        uint64_t *words_out, int64_t *spare_out, double *best,
                        Py_ssize_t *won) {
    const int has_spare = spare0 != NULL;
    const size_t WS = (size_t)(W > 0 ? W : 1), TS = (size_t)(has_spare ? T : 1);
    const size_t JS = (size_t)(J > 0 ? J : 1);
    /* two states: the pass under way and the best so far (swapped, never copied) */
    uint64_t *tw = malloc(WS * 8), *bw = malloc(WS * 8);
    int64_t *tsp = malloc(TS * 8), *bsp = malloc(TS * 8), *ts = malloc(JS * 8),
            *tf = malloc(JS * 8);
    if (!tw || !bw || !tsp || !bsp || !ts || !tf) {
        free(tw), free(bw), free(tsp), free(bsp), free(ts), free(tf);
        return 0;
    }
    *best = -INFINITY;
    *won = -1;
    for (Py_ssize_t k = 0; k < O; k++) {
        memcpy(tw, words0, W * 8);
        if (has_spare) memcpy(tsp, spare0, T * 8);
        memcpy(ts, start, J * 8);
        memcpy(tf, first, J * 8);
        State st = {tw, offset, count, levels, has_spare ? tsp : NULL, T, spill, gap};
        int no_bound = -1;
        const double v = pack_run(&st, j, orders + k * n, n, best_fit, &no_bound, ts, tf);
        if (v > *best) {
            *best = v;
            *won = k;
            for (Py_ssize_t p = 0; p < n; p++) {
                const int64_t i = orders[k * n + p];
                start[i] = ts[i];
                first[i] = tf[i];
            }
            uint64_t *w = tw;
            int64_t *sp = tsp;
            tw = bw, bw = w;
            tsp = bsp, bsp = sp;
        }
    }
    if (*won >= 0) {
        if (words_out) memcpy(words_out, bw, W * 8);
        if (spare_out && has_spare) memcpy(spare_out, bsp, T * 8);
    }
    free(tw), free(bw), free(tsp), free(bsp), free(ts), free(tf);
    return 1;
}

static PyObject *best_of(PyObject *self, PyObject *args) {
    (void)self;
    int best_fit, bound, got, gap = 0;
    double spill;
    Py_buffer b[12];
    PyObject *out[2] = {Py_None, Py_None};
    if (!pack_args(args, "OOOOOOOOOOOOpid|OOp:best_of", b, &got, &best_fit, &bound, &spill,
                   out, &gap))
        return NULL;
    if (bound >= 0) {  /* fifo's order bound carries from job to job: not for a fork */
        release(b, got);
        PyErr_SetString(PyExc_ValueError, "best_of: bound must be -1");
        return NULL;
    }
    const Py_ssize_t W = b[0].len / 8, J = b[5].len / 8;
    const int T = (int)(b[9].len / 8) - 1, has_spare = b[3].buf != NULL;
    const Py_ssize_t total = b[4].len / 8;
    Py_ssize_t n = 0, O = 0;
    if (b[4].ndim == 2) {
        O = b[4].shape[0];
        n = b[4].shape[1];
    } else if (total) {
        O = 1;
        n = total;
    }
    Py_buffer ob[2];
    int outs = 0;
    for (; outs < 2; outs++) {
        if (out[outs] == Py_None) {
            ob[outs].obj = NULL;
            continue;
        }
        const Py_ssize_t want = outs == 0 ? W * 8 : (has_spare ? (Py_ssize_t)T * 8 : -1);
        if (!GET(ob[outs], out[outs], 1)) break;
        if (ob[outs].len != want) {
            PyBuffer_Release(&ob[outs]);
            PyErr_SetString(PyExc_ValueError, "best_of: words_out or spare_out mis-sized");
            break;
        }
    }
    if (outs < 2) {
        for (int k = 0; k < outs; k++)
            if (ob[k].obj) PyBuffer_Release(&ob[k]);
        release(b, got);
        return NULL;
    }
    const Jobs j = {b[5].buf, b[6].buf, b[7].buf, b[8].buf, b[9].buf};
    double best;
    Py_ssize_t won;
    const int ok = best_of_core(b[0].buf, has_spare ? b[3].buf : NULL, W, T, b[1].buf, b[2].buf,
                                (int)(b[1].len / 8), &j, J, b[4].buf, O, n, best_fit, gap, spill,
                                b[10].buf, b[11].buf, ob[0].obj ? ob[0].buf : NULL,
                                ob[1].obj ? ob[1].buf : NULL, &best, &won);
    for (int k = 0; k < 2; k++)
        if (ob[k].obj) PyBuffer_Release(&ob[k]);
    release(b, got);
    if (!ok) return PyErr_NoMemory();
    return Py_BuildValue("(dn)", best, won);
}

/* The busy words of every aligned block size from a grid of job indices (FREE < 0). */
static void words_of(const int64_t *cells, int64_t T, int64_t G, uint64_t *words,
                     const int64_t *offset, const int64_t *count, int levels) {
    if (!levels) return;
    uint64_t *col = words + offset[0];
    for (int64_t g = 0; g < G; g++) col[g] = 0;
    for (int64_t t = 0; t < T && t < 64; t++) {
        const int64_t *row = cells + t * G;
        const uint64_t bit = (uint64_t)1 << t;
        for (int64_t g = 0; g < G; g++) col[g] |= row[g] >= 0 ? bit : 0;
    }
    fill_levels(words, offset, count, levels);
}

/* Constraint 4 on a grid of job indices: every realtime job's changes per step within its
 * swap limit, step 0 against `current` (the job holding each GPU before step 0) for the
 * jobs that have current GPUs. `flips` is scratch of one int64 per job. */
static int swaps_ok(const int64_t *cells, int64_t T, int64_t G, const unsigned char *is_rt,
                    const unsigned char *has_current, const int64_t *limit,
                    const int64_t *current, int64_t J, int64_t *flips) {
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < J; i++) flips[i] = 0;
        const int64_t *row = cells + t * G, *prev = t ? cells + (t - 1) * G : current;
        for (int64_t g = 0; g < G; g++) {
            const int64_t p = prev[g], q = row[g];
            if (p == q) continue;
            if (p >= 0 && p < J && is_rt[p] && (t || has_current[p])) flips[p]++;
            if (q >= 0 && q < J && is_rt[q] && (t || has_current[q])) flips[q]++;
        }
        for (int64_t i = 0; i < J; i++)
            if (is_rt[i] && flips[i] > limit[i]) return 0;
    }
    return 1;
}

/* One hop (hops.py): block [y, y+k)'s realtime cells in steps [a, b) moved onto block
 * [x, x+k), which must be free there; at the window's inner edge a moved service holds
 * both GPUs one step, so it changes one GPU at a time. 0 if the move does not apply;
 * else `dirty` (G) marks the GPUs whose cells changed. */
static int hop_apply(const int64_t *from, int64_t *to, int64_t T, int64_t G,
                     const unsigned char *is_rt, int64_t J, int64_t k, int64_t y, int64_t x,
                     int64_t a, int64_t b, unsigned char *dirty) {
    int any = 0;
    for (int64_t t = a; t < b; t++)
        for (int64_t d = 0; d < k; d++) {
            const int64_t v = from[t * G + y + d];
            const int moves = v >= 0 && v < J && is_rt[v];
            if (moves && from[t * G + x + d] != -1) return 0;
            any |= moves;
        }
    if (!any) return 0;
    memcpy(to, from, (size_t)(T * G) * 8);
    memset(dirty, 0, (size_t)G);
    memset(dirty + x, 1, (size_t)k);
    memset(dirty + y, 1, (size_t)k);
    for (int64_t t = a; t < b; t++)
        for (int64_t d = 0; d < k; d++) {
            const int64_t v = from[t * G + y + d];
            if (v >= 0 && v < J && is_rt[v]) {
                to[t * G + x + d] = v;
                to[t * G + y + d] = -1;
            }
        }
    for (int64_t d = 0; d < k; d++) {
        if (a == 0 && b < T) { /* prefix: the service returns to y at b */
            const int64_t v = from[b * G + y + d];
            if (v >= 0 && v < J && is_rt[v] && to[(b - 1) * G + x + d] == v &&
                to[(b - 1) * G + y + d] == -1)
                to[(b - 1) * G + y + d] = v;
        } else if (a > 0) { /* suffix: the service left y for x at a */
            const int64_t v = from[(a - 1) * G + y + d];
            if (v >= 0 && v < J && is_rt[v] && to[a * G + x + d] == v &&
                to[(a - 1) * G + x + d] == -1)
                to[(a - 1) * G + x + d] = v;
        }
    }
    return 1;
}

/* The most job i can earn in a greedy pass: its reward at its best start (0 if it cannot
 * run), an upper bound on what the pass adds for it. */
static double best_reward(const Jobs *j, int64_t i, int64_t T) {
    const int64_t g = j->gpus[i], L = j->length[i];
    if (g <= 0 || (g & (g - 1))) return 0.0;
    double most = 0.0;
    for (int64_t s = j->arrival[i] > 0 ? j->arrival[i] : 0; s < T; s++) {
        const int64_t e = s + L < T ? s + L : T;
        const double v = j->weight[i] * (j->decay[e] - j->decay[s]);
        if (v > most) most = v;
    }
    return most;
}

/* A layout's worth, its busy words in `base`: the best greedy pass over the O orders of
 * `order` (rows of len). A pass stops once what it has plus the most its other jobs could
 * add (rem) falls below `need` (with a margin far above rounding): it could not reach
 * `need`, so the result is exact whenever it reaches `need` and below `need` otherwise. */
static double layout_value(State *st, const Jobs *j, const uint64_t *base, Py_ssize_t W,
                           const int64_t *order, Py_ssize_t O, Py_ssize_t len,
                           const double *rem, double need, int64_t *ts, int64_t *tf) {
    double out = -INFINITY;
    for (Py_ssize_t r = 0; r < O; r++) {
        memcpy(st->words, base, (size_t)W * 8);
        const double floor = (need > out ? need : out);
        const double margin = 1e-9 * (fabs(floor) > 1.0 ? fabs(floor) : 1.0);
        const int64_t *row = order + r * len;
        const double *tail = rem + r * (len + 1);
        double v = 0.0;
        int no_bound = -1;
        Py_ssize_t p = 0;
        for (; p < len; p++) {
            if (v + tail[p] < floor - margin) break;
            v += pack_run(st, j, row + p, 1, 1, &no_bound, ts, tf);
        }
        if (p == len && v > out) out = v;
    }
    return out;
}

/* The layouts a round has judged, by their busy words per GPU: two hops that leave the
 * same cells busy (a window past the end of the service's run moves what a shorter one
 * does) get the same greedy passes, so the second is not judged again. Open addressing;
 * the table doubles when half full. */
typedef struct {
    uint64_t *keys;  /* cap * G */
    uint64_t *hash;  /* cap; 0: empty */
    Py_ssize_t cap, used;
    int64_t G;
} Seen;

/* GPU g's share of a key's hash (splitmix64's finalizer of its word and place): a key's
 * hash is the sum of its GPUs' shares, so a move that changes a few GPUs changes the hash
 * by their shares alone, and the shares are independent (no chain of G multiplies). */
static inline uint64_t seen_share(uint64_t word, int64_t g) {
    uint64_t z = word + 0x9e3779b97f4a7c15ULL * (uint64_t)(g + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 1 if `key`, whose shares sum to `sum`, was seen already (added: 0, or -1 when out of
 * memory). */
static int seen_add(Seen *s, const uint64_t *key, uint64_t sum, int add) {
    const uint64_t h = sum ? sum : 1;
    if (s->cap) {
        Py_ssize_t k = (Py_ssize_t)(h & (uint64_t)(s->cap - 1));
        while (s->hash[k]) {
            if (s->hash[k] == h && !memcmp(s->keys + k * s->G, key, (size_t)s->G * 8))
                return 1;
            k = (k + 1) & (s->cap - 1);
        }
    }
    if (!add) return 0;
    if (2 * (s->used + 1) > s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 1024;
        uint64_t *keys = malloc((size_t)(cap * s->G > 0 ? cap * s->G : 1) * 8);
        uint64_t *hash = calloc((size_t)cap, 8);
        if (!keys || !hash) {
            free(keys), free(hash);
            return -1;
        }
        for (Py_ssize_t i = 0; i < s->cap; i++) {
            if (!s->hash[i]) continue;
            Py_ssize_t k = (Py_ssize_t)(s->hash[i] & (uint64_t)(cap - 1));
            while (hash[k]) k = (k + 1) & (cap - 1);
            hash[k] = s->hash[i];
            memcpy(keys + k * s->G, s->keys + i * s->G, (size_t)s->G * 8);
        }
        free(s->keys), free(s->hash);
        s->keys = keys, s->hash = hash, s->cap = cap;
    }
    Py_ssize_t k = (Py_ssize_t)(h & (uint64_t)(s->cap - 1));
    while (s->hash[k]) k = (k + 1) & (s->cap - 1);
    s->hash[k] = h;
    memcpy(s->keys + k * s->G, key, (size_t)s->G * 8);
    s->used++;
    return 0;
}

/* What the layout searches (hops, evacuate) share: their 13 leading arguments, cells (T,
 * G) int64, is_rt, has_current, limit, current, offset, count, orders (O, n) int64, gpus,
 * length, arrival, weight, decay; the scratch their greedy passes use; and the layouts
 * judged so far, by their busy cells. */
typedef struct {
    Py_buffer b[13];
    int64_t *cells;
    const unsigned char *is_rt, *has_current;
    const int64_t *limit, *current, *offset, *count, *order;
    int levels;
    int64_t G, J, T;
    Py_ssize_t W, O, len;
    Jobs j;
    size_t cells_n;
    State st;
    uint64_t *tw, *base;
    uint64_t *column;      /* G: each GPU's busy word in `cells` at the round's start */
    unsigned char *dirty;  /* G: the GPUs whose cells a move changed (set by the move) */
    uint64_t *share;       /* G: seen_share of each GPU's word in `column` */
    uint64_t round_sum;    /* their sum: the round's layout's hash */
    uint64_t *held, *taken; /* G: per GPU, the steps realtime holds it / it is not free,
                             * in `cells` at the round's start (hops only: hop_words) */
    uint64_t trial_sum;    /* the hash of the words in `base` (judge_words) */
    int64_t *trial, *best, *ts, *tf, *scratch;
    double *rem; /* rem[r * (len + 1) + p]: the most jobs p.. of order r could add */
    Seen seen;
    int dedupe;
} Judge;

static void judge_close(Judge *q) {
    free(q->seen.keys), free(q->seen.hash);
    free(q->tw), free(q->base), free(q->trial), free(q->best), free(q->ts), free(q->tf);
    free(q->scratch), free(q->rem), free(q->column), free(q->dirty), free(q->share);
    free(q->held), free(q->taken);
    release_all(q->b, 13);
}

/* The judge of the layouts given as `o` (the 13 leading arguments), its passes by the gap
 * rule with `gap` (State.gap); 0 with the Python error set when a buffer is wrong or
 * memory runs out. */
static int judge_open(Judge *q, PyObject **o, int gap) {
    memset(q, 0, sizeof(*q));
    if (!take_buffers(o, q->b, 13, 1u)) return 0;
    Py_buffer *b = q->b;
    q->cells = b[0].buf;
    q->is_rt = b[1].buf, q->has_current = b[2].buf;
    q->limit = b[3].buf, q->current = b[4].buf;
    q->offset = b[5].buf, q->count = b[6].buf, q->order = b[7].buf;
    q->levels = (int)(b[5].len / 8);
    q->G = b[4].len / 8, q->J = b[1].len;
    q->T = q->G ? (int64_t)(b[0].len / 8) / q->G : 0;
    q->W = q->levels ? q->offset[q->levels - 1] + q->count[q->levels - 1] : 0;
    const Py_ssize_t n = b[7].len / 8, NJ = b[8].len / 8;
    q->j = (Jobs){b[8].buf, b[9].buf, b[10].buf, b[11].buf, b[12].buf};
    q->cells_n = (size_t)(q->T * q->G > 0 ? q->T * q->G : 1);
    q->O = b[7].ndim == 2 ? b[7].shape[0] : (n ? 1 : 0);
    q->len = q->O ? n / q->O : 0;
    const size_t WS = (size_t)(q->W > 0 ? q->W : 1), NS = (size_t)(NJ > 0 ? NJ : 1);
    q->tw = malloc(WS * 8), q->base = malloc(WS * 8);
    q->column = malloc((size_t)(q->G > 0 ? q->G : 1) * 8);
    q->dirty = calloc((size_t)(q->G > 0 ? q->G : 1), 1);
    q->share = malloc((size_t)(q->G > 0 ? q->G : 1) * 8);
    q->held = malloc((size_t)(q->G > 0 ? q->G : 1) * 8);
    q->taken = malloc((size_t)(q->G > 0 ? q->G : 1) * 8);
    q->trial = malloc(q->cells_n * 8), q->best = malloc(q->cells_n * 8);
    q->ts = malloc(NS * 8), q->tf = malloc(NS * 8);
    q->scratch = malloc((size_t)(q->J > 0 ? q->J : 1) * 8);
    q->rem = malloc((size_t)(q->O * (q->len + 1) > 0 ? q->O * (q->len + 1) : 1) *
                    sizeof(double));
    if (!q->tw || !q->base || !q->trial || !q->best || !q->ts || !q->tf || !q->scratch ||
        !q->rem || !q->column || !q->dirty || !q->share || !q->held || !q->taken) {
        judge_close(q);
        PyErr_NoMemory();
        return 0;
    }
    q->st = (State){q->tw, q->offset, q->count, q->levels, NULL, (int)q->T, -1.0, gap};
    for (Py_ssize_t r = 0; r < q->O; r++) {
        double *tail = q->rem + r * (q->len + 1);
        tail[q->len] = 0.0;
        for (Py_ssize_t p = q->len - 1; p >= 0; p--)
            tail[p] = tail[p + 1] + best_reward(&q->j, q->order[r * q->len + p], q->T);
    }
    q->seen = (Seen){NULL, NULL, 0, 0, q->G};
    /* with the busy words at hand the look-up costs a hash of G words, against a pass
     * of up to len block searches: a fifth of the evacuation's moves at 64 GPUs, a third
     * at 16, leave cells busy that an earlier move did */
    q->dedupe = q->levels > 0;
    return 1;
}

/* The best greedy pass over the orders on `grid`, exact (no floor). */
static double judge_value(Judge *q, const int64_t *grid) {
    words_of(grid, q->T, q->G, q->base, q->offset, q->count, q->levels);
    return layout_value(&q->st, &q->j, q->base, q->W, q->order, q->O, q->len, q->rem,
                        -INFINITY, q->ts, q->tf);
}

/* q->trial's busy words into q->base, the words words_of would give: a move changes the
 * cells of a few GPUs (`dirty`), so only their words are read again from the grid, the
 * rest are the round's `column`; and the words' hash into trial_sum. */
static void judge_words(Judge *q) {
    if (!q->levels) return;
    uint64_t *col = q->base + q->offset[0];
    const int64_t T = q->T < 64 ? q->T : 64, G = q->G;
    uint64_t sum = q->round_sum;
    for (int64_t g = 0; g < G; g++) {
        if (!q->dirty[g]) {
            col[g] = q->column[g];
            continue;
        }
        uint64_t w = 0;
        for (int64_t t = 0; t < T; t++) /* bit t: the cell's sign bit clear (busy) */
            w |= ((uint64_t)~q->trial[t * G + g] >> 63) << t;
        col[g] = w;
        if (w != q->column[g]) sum += seen_share(w, g) - q->share[g];
    }
    q->trial_sum = sum;
    fill_levels(q->base, q->offset, q->count, q->levels);
}

/* Whether the busy words in q->base (level 0: one per GPU; their hash in trial_sum) were
 * judged already (1), or not (0; then added if `add`); -1 out of memory. Always 0 without
 * dedupe. */
static int judge_seen(Judge *q, int add) {
    if (!q->dedupe) return 0;
    return seen_add(&q->seen, q->base + q->offset[0], q->trial_sum, add);
}

/* A new round from `grid`: its GPUs' busy words (with their hash) kept for the moves, and
 * nothing judged yet but `grid` itself. 0 out of memory. */
static int judge_round(Judge *q, const int64_t *grid) {
    q->seen.used = 0;
    if (q->seen.hash) memset(q->seen.hash, 0, (size_t)q->seen.cap * 8);
    if (!q->levels) return 1;
    words_of(grid, q->T, q->G, q->base, q->offset, q->count, 1);
    memcpy(q->column, q->base + q->offset[0], (size_t)q->G * 8);
    q->round_sum = 0;
    for (int64_t g = 0; g < q->G; g++) q->round_sum += q->share[g] = seen_share(q->column[g], g);
    q->trial_sum = q->round_sum;
    return judge_seen(q, 1) >= 0;
}

/* q->trial judged against the best so far, `top`: kept (1: copied into q->best, `top`
 * raised) where its best pass earns more than top + 1e-9 and it keeps every swap limit;
 * else 0; -1 out of memory. A layout with busy cells judged already is skipped (it earns
 * no more than top); only a pass above top + 1e-9 can be kept, so the rest stop early. */
static int judge_trial(Judge *q, double *top) {
    judge_words(q);
    const int seen = judge_seen(q, 0);
    if (seen) return seen < 0 ? -1 : 0;
    const double v = layout_value(&q->st, &q->j, q->base, q->W, q->order, q->O, q->len,
                                  q->rem, *top + 1e-9, q->ts, q->tf);
    const int better = v > *top + 1e-9;
    const int legal = better && swaps_ok(q->trial, q->T, q->G, q->is_rt, q->has_current,
                                         q->limit, q->current, q->J, q->scratch);
    if (legal) {
        *top = v;
        memcpy(q->best, q->trial, q->cells_n * 8);
    }
    /* seen, unless it paid but broke a swap limit: another move leaving the same cells
     * busy may keep the limits */
    if (!better || legal)
        if (judge_seen(q, 1) < 0) return -1;
    return legal;
}

/* The hops' round: per GPU of `grid`, the steps realtime holds it and the steps it is not
 * free (its first 64 steps), for hop_fits. */
static void hop_words(Judge *q, const int64_t *grid) {
    const int64_t G = q->G;
    for (int64_t g = 0; g < G; g++) q->held[g] = q->taken[g] = 0;
    for (int64_t t = 0; t < q->T && t < 64; t++)
        for (int64_t g = 0; g < G; g++) {
            const int64_t v = grid[t * G + g];
            q->taken[g] |= (uint64_t)(v != -1) << t;
            q->held[g] |= (uint64_t)(v >= 0 && v < q->J && q->is_rt[v]) << t;
        }
}

/* hop_apply's test by words, a GPU's steps at once (T <= 63; longer horizons pass on to
 * hop_apply's own test): 0 where the hop moves nothing or a moved cell's target is taken. */
static inline int hop_fits(const Judge *q, int64_t k, int64_t y, int64_t x, int64_t a,
                           int64_t b) {
    if (q->T > 63) return 1;
    const uint64_t window = span((int)a, (int)b);
    uint64_t any = 0;
    for (int64_t d = 0; d < k; d++) {
        const uint64_t moves = q->held[y + d] & window;
        if (moves & q->taken[x + d]) return 0;
        any |= moves;
    }
    return any != 0;
}

/* hops(cells (T, G) int64, is_rt, has_current, limit, current, offset, count, orders
 *      (O, n) int64, gpus, length, arrival, weight, decay, largest, rounds[, stride])
 *      -> (value, kept): hops.py's search. `cells` (running and realtime placed, no batch
 * work) is updated to the best layout found: per round, of every hop of blocks of 1 ..
 * largest GPUs, prefix and suffix windows whose inner edge is 1, 1 + stride, ..., the one
 * whose best greedy pass over the orders earns most (the first on a tie) and that keeps
 * every swap limit is kept, until a round keeps nothing. */
static PyObject *hops(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[13];
    long long largest, rounds, stride = 1;
    int gap = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOLL|Lp:hops", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &largest,
                          &rounds, &stride, &gap))
        return NULL;
    if (stride < 1) {
        PyErr_SetString(PyExc_ValueError, "hops: stride must be at least 1");
        return NULL;
    }
    Judge q;
    if (!judge_open(&q, o, gap)) return NULL;
    const int64_t T = q.T, G = q.G;
    double value = judge_value(&q, q.cells);
    long long kept = 0;
    int oom = 0;
    for (long long round = 0; round < rounds && !oom; round++) {
        double top = value;
        int found = 0;
        if (!judge_round(&q, q.cells)) {
            oom = 1;
            break;
        }
        hop_words(&q, q.cells);
        for (int64_t k = 1; k <= largest && 2 * k <= G; k *= 2)
            for (int64_t y = 0; y + k <= G; y += k)
                for (int64_t x = 0; x + k <= G && !oom; x += k) {
                    if (x == y) continue;
                    for (int64_t m = 1; m < T; m += stride)
                        for (int side = 0; side < 2; side++) {
                            const int64_t a = side ? m : 0, e = side ? T : m;
                            if (!hop_fits(&q, k, y, x, a, e)) continue;
                            if (!hop_apply(q.cells, q.trial, T, G, q.is_rt, q.J, k, y, x, a,
                                           e, q.dirty))
                                continue;
                            const int got = judge_trial(&q, &top);
                            if (got < 0) oom = 1;
                            found |= got > 0;
                        }
                }
        if (!found || oom) break;
        memcpy(q.cells, q.best, q.cells_n * 8);
        value = top;
        kept++;
    }
    judge_close(&q);
    if (oom) return PyErr_NoMemory();
    return Py_BuildValue("(dL)", value, kept);
}

/* One evacuation (evac.py, rule "low"): the runs of block [first, first + k) (rows of
 * (start, end, job, GPU), the longest first, then by GPU) that window [t, T) (suffix) or
 * [0, t) touches, each moved onto the lowest GPU outside the block its job may take
 * (`owner` -1 or the job) that is free over its span. A run crossing the window's edge
 * hands its GPU over with a step on both, a service's later hand-overs staggered (two
 * steps apart at swap limit 1). 0 if the move does not apply; else `dirty` (G) marks the
 * GPUs whose cells changed. `handed`: J scratch. */
static int evac_apply(const int64_t *from, int64_t *to, int64_t T, int64_t G,
                      const int64_t *runs, int64_t R, const int64_t *limit,
                      const int64_t *owner, int64_t k, int64_t first, int64_t t, int suffix,
                      int64_t *handed, int64_t J, unsigned char *dirty) {
    int any = 0;
    for (int64_t r = 0; r < R; r++) {
        const int64_t *run = runs + 4 * r;
        if (suffix ? run[1] > t : run[0] < t) {
            any = 1;
            break;
        }
    }
    if (!any) return 0;
    memcpy(to, from, (size_t)(T * G) * 8);
    memset(dirty, 0, (size_t)G);
    for (int64_t i = 0; i < J; i++) handed[i] = 0;
    for (int64_t r = 0; r < R; r++) {
        const int64_t s = runs[4 * r], e = runs[4 * r + 1], v = runs[4 * r + 2];
        const int64_t g = runs[4 * r + 3];
        if (!(suffix ? e > t : s < t)) continue;
        const int64_t gap = limit[v] >= 2 ? 1 : 2, edge = suffix ? t - gap * handed[v]
                                                                 : t + gap * handed[v];
        int64_t a = s, b = e, fa = s, fb = e; /* the span taken, the span freed */
        if (suffix && s < edge) {
            if (edge - 1 < s || edge < 1) return 0;
            a = edge - 1, fa = edge;
            handed[v]++;
        } else if (!suffix && e > edge) {
            if (edge >= T) return 0;
            b = edge + 1, fb = edge;
            handed[v]++;
        }
        int64_t target = -1;
        for (int64_t h = 0; h < G && target < 0; h++) {
            if ((h >= first && h < first + k) || (owner[h] != -1 && owner[h] != v)) continue;
            int64_t u = a;
            while (u < b && to[u * G + h] == -1) u++;
            if (u == b) target = h;
        }
        if (target < 0) return 0;
        for (int64_t u = fa; u < fb; u++) to[u * G + g] = -1;
        for (int64_t u = a; u < b; u++) to[u * G + target] = v;
        dirty[g] = dirty[target] = 1;
    }
    return 1;
}

static int run_order(const void *x, const void *y) {
    const int64_t *p = x, *q = y; /* longest first, then by GPU, then by start */
    const int64_t lp = p[1] - p[0], lq = q[1] - q[0];
    if (lp != lq) return lp > lq ? -1 : 1;
    if (p[3] != q[3]) return p[3] < q[3] ? -1 : 1;
    return (p[0] > q[0]) - (p[0] < q[0]);
}

/* evacuate(cells (T, G) int64, is_rt, has_current, limit, current, offset, count, orders
 *          (O, n) int64, gpus, length, arrival, weight, decay, sizes int64)
 *          -> (value, found): evac.py's search with rule "low". Of every evacuation of the
 * aligned blocks of each size in `sizes`, windows [t, T) and [0, t) for t = 1 .. T - 1,
 * the one whose best greedy pass over the orders earns most (the first on a tie) and
 * that keeps every swap limit replaces `cells` (running and realtime, no batch work) if
 * it earns more than `cells` do; `found` says whether one did. */
static PyObject *evacuate(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[14];
    int gap = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOO|p:evacuate", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13],
                          &gap))
        return NULL;
    Py_buffer sb;
    if (!GET(sb, o[13], 0)) return NULL;
    Judge q;
    if (!judge_open(&q, o, gap)) {
        PyBuffer_Release(&sb);
        return NULL;
    }
    const int64_t *sizes = sb.buf;
    const Py_ssize_t S = sb.len / 8;
    const int64_t T = q.T, G = q.G;
    int64_t *runs = malloc(q.cells_n * 4 * 8); /* a block's runs: at most one per cell */
    if (!runs) {
        judge_close(&q);
        PyBuffer_Release(&sb);
        return PyErr_NoMemory();
    }
    double top = judge_value(&q, q.cells);
    const double value = top;
    int found = 0, oom = !judge_round(&q, q.cells);
    for (Py_ssize_t z = 0; z < S && !oom; z++) {
        const int64_t k = sizes[z];
        if (k < 1 || k > G) continue;
        for (int64_t first = 0; first + k <= G && !oom; first += k) {
            int64_t R = 0;
            for (int64_t g = first; g < first + k; g++)
                for (int64_t u = 0; u < T;) {
                    const int64_t v = q.cells[u * G + g];
                    if (v >= 0 && v < q.J && q.is_rt[v]) {
                        const int64_t s = u;
                        while (u < T && q.cells[u * G + g] == v) u++;
                        int64_t *row = runs + 4 * R++;
                        row[0] = s, row[1] = u, row[2] = v, row[3] = g;
                    } else {
                        u++;
                    }
                }
            if (!R) continue;
            qsort(runs, (size_t)R, 4 * sizeof(int64_t), run_order);
            for (int64_t t = 1; t < T && !oom; t++)
                for (int side = 0; side < 2 && !oom; side++) {
                    if (!evac_apply(q.cells, q.trial, T, G, runs, R, q.limit, q.current, k,
                                    first, t, side == 0, q.scratch, q.J, q.dirty))
                        continue;
                    const int got = judge_trial(&q, &top);
                    if (got < 0) oom = 1;
                    found |= got > 0;
                }
        }
    }
    if (found && !oom) memcpy(q.cells, q.best, q.cells_n * 8);
    free(runs);
    judge_close(&q);
    PyBuffer_Release(&sb);
    if (oom) return PyErr_NoMemory();
    return Py_BuildValue("(di)", found ? top : value, found);
}

/* The search's fixed inputs: the empty state (busy words, spare) and the jobs. */
typedef struct {
    const uint64_t *words0;
    const int64_t *spare0; /* NULL: no reservation */
    const int64_t *offset, *count;
    int levels, T;
    Py_ssize_t W, n, J;
    double spill;
    int gap; /* State.gap of every pass */
    Jobs j;
    const double *most; /* per job: best_reward, what a pass can add for it at most */
    double *rem;        /* scratch, n + 1: a trial's suffix_bounds */
} Search;

/* The bounds of a trial order's suffixes: rem[p] = the most order[p..n) can add. */
static double suffix_bounds(const Search *q, const int64_t *order, Py_ssize_t n) {
    double *rem = q->rem;
    rem[n] = 0.0;
    for (Py_ssize_t p = n - 1; p >= 0; p--) rem[p] = rem[p + 1] + q->most[order[p]];
    return rem[0];
}

/* pack_on for a trial that counts only if it ends above `need`: stopped (-INFINITY) once
 * what it has plus the most its other jobs could add (rem[p] for order[p..n)) is below
 * `need` by more than `margin` (far above rounding), when it could not end above `need`.
 * Otherwise the same placements and the same sum, added in the same order. */
static double pack_above(State *s, const Jobs *j, const int64_t *order, Py_ssize_t n,
                         int64_t *out_start, int64_t *out_first, double value,
                         const double *rem, double need, double margin) {
    int no_bound = -1;
    return pack_on(s, j, order, n, 1, &no_bound, out_start, out_first, value, rem,
                   need - margin);
}

/* fast.improve_order from the empty state: `cur`, `start`, `first` hold the best pass on
 * entry (worth `value`) and on return; returns the best value, or -1 with no memory. */
static double improve_core(const Search *q, int64_t *cur, int64_t *start, int64_t *first,
                           double value, long long packs, int swaps) {
    const Py_ssize_t n = q->n, J = q->J, W = q->W;
    const int T = q->T, has_spare = q->spare0 != NULL;
    const size_t WS = (size_t)(W > 0 ? W : 1), TS = (size_t)(has_spare ? T : 1);
    const size_t NS = (size_t)(n > 0 ? n : 1), JS = (size_t)(J > 0 ? J : 1);
    int64_t *trial = malloc(NS * 8), *movable = malloc(NS * 8);
    uint64_t *pw = malloc(NS * WS * 8), *tw = malloc(WS * 8);
    int64_t *ps = malloc(NS * TS * 8), *tsp = malloc(TS * 8);
    double *pv = malloc(NS * sizeof(double)), *pg = malloc(NS * sizeof(double));
    int64_t *tstart = malloc(JS * 8), *tfirst = malloc(JS * 8);
    int64_t *sstart = malloc(JS * 8), *sfirst = malloc(JS * 8);
    if (!trial || !movable || !pw || !tw || !ps || !tsp || !pv || !pg || !tstart ||
        !tfirst || !sstart || !sfirst) {
        free(trial), free(movable), free(pw), free(tw), free(ps), free(tsp);
        free(pv), free(pg), free(tstart), free(tfirst), free(sstart), free(sfirst);
        return -1.0;
    }
    const Jobs j = q->j;
    long long budget = packs * (n > 1 ? n : 1);
    while (budget > 0) {
        /* the state before each position of the current order */
        State work = {tw, q->offset, q->count, q->levels, has_spare ? tsp : NULL, T, q->spill,
                      q->gap};
        memcpy(tw, q->words0, W * 8);
        if (has_spare) memcpy(tsp, q->spare0, T * 8);
        double v = 0.0;
        int no_bound = -1;
        for (Py_ssize_t p = 0; p < n; p++) {
            memcpy(pw + p * WS, tw, W * 8);
            if (has_spare) memcpy(ps + p * TS, tsp, T * 8);
            pv[p] = v;
            pg[p] = pack_run(&work, &j, cur + p, 1, 1, &no_bound, sstart, sfirst);
            v += pg[p];
        }
        Py_ssize_t nm = 0;
        for (Py_ssize_t a = 1; a < n; a++) {
            const int64_t i = cur[a];
            if (start[i] < 0 || start[i] > j.arrival[i]) movable[nm++] = a;
        }
        int improved = 0;
        for (Py_ssize_t bpos = 0; bpos < n - 1; bpos++) {
            for (Py_ssize_t m = 0; m < nm; m++) {
                const Py_ssize_t a = movable[m];
                if (a <= bpos) continue;
                if (budget <= 0) break;
                /* two moves per (b, a): job a inserted at b, then a and b swapped */
                for (int move = 0; move < 2 && !improved; move++) {
                    if (move == 1 && (!swaps || a == bpos + 1 || budget <= 0)) break;
                    memcpy(trial, cur, n * 8);
                    if (move == 0) {
                        trial[bpos] = cur[a];
                        memcpy(trial + bpos + 1, cur + bpos, (a - bpos) * 8);
                    } else {
                        trial[bpos] = cur[a];
                        trial[a] = cur[bpos];
                    }
                    budget -= n - bpos;
                    State t = {tw, q->offset, q->count, q->levels, has_spare ? tsp : NULL, T,
                               q->spill, q->gap};
                    memcpy(tw, pw + bpos * WS, W * 8);
                    if (has_spare) memcpy(tsp, ps + bpos * TS, T * 8);
                    memcpy(tstart, start, J * 8);
                    memcpy(tfirst, first, J * 8);
                    /* Past position a the trial places cur's own jobs in cur's order. When
                     * the moved stretch [b, a] leaves the GPUs busy as cur's pass left them
                     * before a + 1 (level 0 fixes the other levels and, every placement
                     * taking free cells, the spare too), the rest is cur's pass: its
                     * earnings are added one by one as pack_run adds them and its spots
                     * copied if the trial wins, with no replay (about a fifth of the
                     * trials at 8 GPUs; almost none at 64, where the test is cheap). */
                    /* A trial that cannot beat `value` is dropped as soon as its bound
                     * says so (pack_above): the same trials kept, with fewer placements. */
                    const double all = suffix_bounds(q, trial, n);
                    const double *rem = q->rem;
                    const double need = value + 1e-9 - pv[bpos];
                    const double margin = 1e-9 * (1.0 + fabs(value) + fabs(pv[bpos]) + all);
                    double tail = pack_above(&t, &j, trial + bpos, a - bpos + 1, tstart, tfirst,
                                             0.0, rem + bpos, need, margin);
                    int same_rest = 0;
                    if (a + 1 < n && tail != -INFINITY) {
                        same_rest = !memcmp(tw, pw + (a + 1) * WS, (size_t)q->count[0] * 8);
                        if (same_rest)
                            for (Py_ssize_t p = a + 1; p < n; p++) tail += pg[p];
                        else
                            tail = pack_above(&t, &j, trial + a + 1, n - a - 1, tstart, tfirst,
                                              tail, rem + a + 1, need, margin);
                    }
                    if (pv[bpos] + tail > value + 1e-9) {
                        if (same_rest)
                            for (Py_ssize_t p = a + 1; p < n; p++) {
                                tstart[cur[p]] = sstart[cur[p]];
                                tfirst[cur[p]] = sfirst[cur[p]];
                            }
                        memcpy(cur, trial, n * 8);
                        value = pv[bpos] + tail;
                        memcpy(start, tstart, J * 8);
                        memcpy(first, tfirst, J * 8);
                        improved = 1;
                    }
                }
                if (improved) break;
            }
            if (improved || budget <= 0) break;
        }
        if (!improved) break;
    }
    free(trial), free(movable), free(pw), free(tw), free(ps), free(tsp);
    free(pv), free(pg), free(tstart), free(tfirst), free(sstart), free(sfirst);
    return value;
}

/* fast.pairs_back from the empty state: each pair of positions (a, c), a < c, the
 * front first, a before the last delayed job, sent to the back of the order together;
 * the first gain is kept,
 * polished by improve_core (`polish` packs), and the scan restarts. Returns the best
 * value, or -1 with no memory. */
static double pairs_core(const Search *q, int64_t *cur, int64_t *start, int64_t *first,
                         double value, long long budget, long long polish, int swaps) {
    const Py_ssize_t n = q->n, J = q->J, W = q->W;
    const int T = q->T, has_spare = q->spare0 != NULL;
    const size_t WS = (size_t)(W > 0 ? W : 1), TS = (size_t)(has_spare ? T : 1);
    const size_t NS = (size_t)(n > 0 ? n : 1), JS = (size_t)(J > 0 ? J : 1);
    int64_t *trial = malloc(NS * 8);
    uint64_t *pw = malloc(NS * WS * 8), *tw = malloc(WS * 8);
    int64_t *ps = malloc(NS * TS * 8), *tsp = malloc(TS * 8);
    double *pv = malloc(NS * sizeof(double));
    int64_t *tstart = malloc(JS * 8), *tfirst = malloc(JS * 8);
    int64_t *sstart = malloc(JS * 8), *sfirst = malloc(JS * 8);
    /* the running prefix of a front position's trials (below) */
    uint64_t *rw = malloc(WS * 8);
    int64_t *rsp = malloc(TS * 8), *rstart = malloc(JS * 8), *rfirst = malloc(JS * 8);
    if (!trial || !pw || !tw || !ps || !tsp || !pv || !tstart || !tfirst || !sstart ||
        !sfirst || !rw || !rsp || !rstart || !rfirst) {
        free(trial), free(pw), free(tw), free(ps), free(tsp);
        free(pv), free(tstart), free(tfirst), free(sstart), free(sfirst);
        free(rw), free(rsp), free(rstart), free(rfirst);
        return -1.0;
    }
    const Jobs j = q->j;
    while (budget > 0 && n > 2) {
        State work = {tw, q->offset, q->count, q->levels, has_spare ? tsp : NULL, T, q->spill,
                      q->gap};
        memcpy(tw, q->words0, W * 8);
        if (has_spare) memcpy(tsp, q->spare0, T * 8);
        double v = 0.0;
        int no_bound = -1;
        for (Py_ssize_t p = 0; p < n; p++) {
            memcpy(pw + p * WS, tw, W * 8);
            if (has_spare) memcpy(ps + p * TS, tsp, T * 8);
            pv[p] = v;
            v += pack_run(&work, &j, cur + p, 1, 1, &no_bound, sstart, sfirst);
        }
        /* a gain needs a delayed job past the front one: front positions up to the last */
        Py_ssize_t last = -1;
        for (Py_ssize_t p = 0; p < n; p++) {
            const int64_t i = cur[p];
            if (start[i] < 0 || start[i] > j.arrival[i]) last = p;
        }
        const Py_ssize_t fronts = last < n - 2 ? last : n - 2;
        int improved = 0;
        for (Py_ssize_t a = 0; a < fronts && !improved; a++) {
            /* Pair (a, c)'s trial from position a is cur[a+1 .. c), then the rest: pair
             * (a, c + 1)'s starts with the same jobs and one more. So the state after that
             * common head is kept (placed from the prefix state at a, its earnings summed
             * as a whole pass sums them) and each trial replays only what follows it,
             * about half the placements of a scan; budget and results are the full
             * replays'. */
            State run = {rw, q->offset, q->count, q->levels, has_spare ? rsp : NULL, T,
                         q->spill, q->gap};
            memcpy(rw, pw + a * WS, W * 8);
            if (has_spare) memcpy(rsp, ps + a * TS, T * 8);
            memcpy(rstart, start, J * 8);
            memcpy(rfirst, first, J * 8);
            double head = 0.0;
            for (Py_ssize_t c = a + 1; c < n; c++) {
                if (budget <= 0) break;
                if (c > a + 1) /* the head grows by the job the last trial sent back */
                    head = pack_on(&run, &j, cur + c - 1, 1, 1, &no_bound, rstart, rfirst,
                                   head, NULL, 0.0);
                Py_ssize_t k = 0;
                for (Py_ssize_t p = 0; p < n; p++)
                    if (p != a && p != c) trial[k++] = cur[p];
                trial[k++] = cur[a];
                trial[k++] = cur[c];
                budget -= n - a;
                State t = {tw, q->offset, q->count, q->levels, has_spare ? tsp : NULL, T,
                           q->spill, q->gap};
                memcpy(tw, rw, W * 8);
                if (has_spare) memcpy(tsp, rsp, T * 8);
                memcpy(tstart, rstart, J * 8);
                memcpy(tfirst, rfirst, J * 8);
                const Py_ssize_t skip = c - a - 1; /* trial[a, a + skip) is the head */
                const double all = suffix_bounds(q, trial, n); /* as in improve_core */
                const double margin = 1e-9 * (1.0 + fabs(value) + fabs(pv[a]) + all);
                double tail = pack_above(&t, &j, trial + a + skip, n - a - skip, tstart, tfirst,
                                         head, q->rem + a + skip, value + 1e-9 - pv[a], margin);
                if (pv[a] + tail > value + 1e-9) {
                    memcpy(cur, trial, n * 8);
                    memcpy(start, tstart, J * 8);
                    memcpy(first, tfirst, J * 8);
                    value = improve_core(q, cur, start, first, pv[a] + tail, polish, swaps);
                    if (value < 0) break;
                    budget -= polish * n;
                    improved = 1;
                    break;
                }
            }
            if (budget <= 0 || value < 0) break;
        }
        if (!improved || value < 0) break;
    }
    free(trial), free(pw), free(tw), free(ps), free(tsp);
    free(pv), free(tstart), free(tfirst), free(sstart), free(sfirst);
    free(rw), free(rsp), free(rstart), free(rfirst);
    return value;
}

/* fast.pairs_front from the empty state: each delayed job (at position a, in order) with
 * each job behind it (position c > a, in order) brought to the front of the order
 * together, the delayed one first; the first gain is kept, polished by improve_core (`polish` packs),
 * and the scan restarts. Returns the best value, or -1 with no memory. */
static double front_core(const Search *q, int64_t *cur, int64_t *start, int64_t *first,
                         double value, long long budget, long long polish, int swaps) {
    const Py_ssize_t n = q->n, J = q->J, W = q->W;
    const int T = q->T, has_spare = q->spare0 != NULL;
    const size_t WS = (size_t)(W > 0 ? W : 1), TS = (size_t)(has_spare ? T : 1);
    const size_t NS = (size_t)(n > 0 ? n : 1), JS = (size_t)(J > 0 ? J : 1);
    int64_t *trial = malloc(NS * 8), *delayed = malloc(NS * 8);
    uint64_t *tw = malloc(WS * 8);
    int64_t *tsp = malloc(TS * 8);
    int64_t *tstart = malloc(JS * 8), *tfirst = malloc(JS * 8);
    if (!trial || !delayed || !tw || !tsp || !tstart || !tfirst) {
        free(trial), free(delayed), free(tw), free(tsp), free(tstart), free(tfirst);
        return -1.0;
    }
    const Jobs j = q->j;
    while (budget > 0 && n > 2) {
        Py_ssize_t nd = 0;
        for (Py_ssize_t p = 0; p < n; p++) {
            const int64_t i = cur[p];
            if (start[i] < 0 || start[i] > j.arrival[i]) delayed[nd++] = p;
        }
        int improved = 0;
        for (Py_ssize_t d = 0; d < nd && !improved; d++) {
            const Py_ssize_t a = delayed[d];
            for (Py_ssize_t c = a + 1; c < n; c++) {
                if (budget <= 0) break;
                trial[0] = cur[a];
                trial[1] = cur[c];
                Py_ssize_t k = 2;
                for (Py_ssize_t p = 0; p < n; p++)
                    if (p != a && p != c) trial[k++] = cur[p];
                budget -= n;
                State t = {tw, q->offset, q->count, q->levels, has_spare ? tsp : NULL, T,
                           q->spill, q->gap};
                memcpy(tw, q->words0, W * 8);
                if (has_spare) memcpy(tsp, q->spare0, T * 8);
                memcpy(tstart, start, J * 8);
                memcpy(tfirst, first, J * 8);
                const double all = suffix_bounds(q, trial, n); /* as in improve_core */
                const double margin = 1e-9 * (1.0 + fabs(value) + all);
                double v = pack_above(&t, &j, trial, n, tstart, tfirst, 0.0, q->rem,
                                      value + 1e-9, margin);
                if (v > value + 1e-9) {
                    memcpy(cur, trial, n * 8);
                    memcpy(start, tstart, J * 8);
                    memcpy(first, tfirst, J * 8);
                    value = improve_core(q, cur, start, first, v, polish, swaps);
                    if (value < 0) break;
                    budget -= polish * n;
                    improved = 1;
                    break;
                }
            }
            if (budget <= 0 || value < 0) break;
        }
        if (!improved || value < 0) break;
    }
    free(trial), free(delayed), free(tw), free(tsp), free(tstart), free(tfirst);
    return value;
}

/* improve(words, offset, count, spare|None, order, gpus, length, arrival, weight, decay,
 *         start, first, value, packs, spill, swaps) -> value: fast.improve_order,
 * compiled; pairs(..., value, budget, spill, swaps, polish) -> value: fast.pairs_back;
 * front(... the same) -> value: fast.pairs_front.
 * `order`, `start` and `first` hold the best pass on entry (its value given) and on
 * return. The neighbourhoods, scan order, budget and acceptance are the Python
 * reference's exactly. */
/* The search's fixed inputs from buffers 0..11 (words, offset, count, spare|None, order,
 * gpus, length, arrival, weight, decay, start, first), orders of `n` jobs and `spill`,
 * with its scratch (each
 * job's best_reward, the suffix bounds); 0 with no memory. search_close frees them. */
static int search_open(Py_buffer *b, Py_ssize_t n, double spill, int gap, Search *q) {
    const int levels = (int)(b[1].len / 8);
    const int64_t *offset = b[1].buf, *count = b[2].buf;
    const Py_ssize_t J = b[10].len / 8;
    const int T = (int)(b[9].len / 8) - 1;
    double *most = malloc((size_t)(J > 0 ? J : 1) * sizeof(double));
    double *rem = malloc((size_t)(n + 1) * sizeof(double));
    if (!most || !rem) {
        free(most), free(rem);
        return 0;
    }
    const Search made = {b[0].buf, b[3].buf, offset, count, levels, T,
                         levels ? offset[levels - 1] + count[levels - 1] : 0, n, J, spill, gap,
                         {b[5].buf, b[6].buf, b[7].buf, b[8].buf, b[9].buf}, most, rem};
    *q = made;
    for (Py_ssize_t i = 0; i < J; i++) most[i] = best_reward(&q->j, i, T);
    return 1;
}

static void search_close(Search *q) {
    free((void *)q->most), free(q->rem);
}

static PyObject *search(PyObject *args, int mode) {
    const int pairs = mode != 0; /* 0: improve, 1: pairs (back), 2: front */
    PyObject *o[12];
    double value, spill;
    long long packs, polish = 0;
    int swaps, gap = 0;
    int ok = pairs ? PyArg_ParseTuple(args, "OOOOOOOOOOOOdLdpL|p:pairs/front", &o[0], &o[1],
                                      &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9],
                                      &o[10], &o[11], &value, &packs, &spill, &swaps, &polish,
                                      &gap)
                   : PyArg_ParseTuple(args, "OOOOOOOOOOOOdLdp|p:improve", &o[0], &o[1], &o[2],
                                      &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10],
                                      &o[11], &value, &packs, &spill, &swaps, &gap);
    if (!ok) return NULL;
    Py_buffer b[12];
    int got;
    if (!get_buffers(o, b, &got)) {
        release(b, got);
        return NULL;
    }
    Search q;
    if (!search_open(b, b[4].len / 8, spill, gap, &q)) {
        release(b, got);
        return PyErr_NoMemory();
    }
    int64_t *order = b[4].buf, *start = b[10].buf, *first = b[11].buf;
    double out = mode == 2   ? front_core(&q, order, start, first, value, packs, polish, swaps)
                 : mode == 1 ? pairs_core(&q, order, start, first, value, packs, polish, swaps)
                             : improve_core(&q, order, start, first, value, packs, swaps);
    search_close(&q);
    release(b, got);
    if (out < 0) return PyErr_NoMemory();
    return PyFloat_FromDouble(out);
}

/* fast.place_batch's search on an open `Search`: improve from (order, start, first,
 * value), then with pair_step pairs and front from its result into pstart/pfirst, the
 * better one's value (pairs' on a tie) in *paired. The improved value, or -1 with no
 * memory. */
static double chain_core(const Search *q, int64_t *order, int64_t *start, int64_t *first,
                         double value, long long packs, int swaps, int pair_step,
                         long long back, long long ahead, long long polish, int64_t *pstart,
                         int64_t *pfirst, double *paired) {
    const Py_ssize_t n = q->n, J = q->J;
    const size_t NS = (size_t)(n > 0 ? n : 1), JS = (size_t)(J > 0 ? J : 1);
    int64_t *cur = malloc(NS * 8), *fs = malloc(JS * 8), *ff = malloc(JS * 8);
    value = cur && fs && ff ? improve_core(q, order, start, first, value, packs, swaps) : -1;
    if (value >= 0 && pair_step) {
        memcpy(cur, order, n * 8); /* the pair step's: pairs in pstart/pfirst */
        memcpy(pstart, start, J * 8);
        memcpy(pfirst, first, J * 8);
        const double got_back = pairs_core(q, cur, pstart, pfirst, value, back, polish, swaps);
        memcpy(cur, order, n * 8); /* front's own copies */
        memcpy(fs, start, J * 8);
        memcpy(ff, first, J * 8);
        const double got_ahead = front_core(q, cur, fs, ff, value, ahead, polish, swaps);
        if (got_back < 0 || got_ahead < 0) {
            value = -1;
        } else if (got_back >= got_ahead) {
            *paired = got_back;
        } else {
            *paired = got_ahead;
            memcpy(pstart, fs, J * 8);
            memcpy(pfirst, ff, J * 8);
        }
    }
    free(cur), free(fs), free(ff);
    return value;
}

/* batch(words, offset, count, spare|None, orders, gpus, length, arrival, weight, decay,
 *       start, first, spill, packs, swaps, pair_step, back, ahead, polish, busy, pstart,
 *       pfirst) -> (won, value, paired): fast.place_batch's compiled core in one call.
 * `words` (scratch, as index fills it) gets the busy words of `busy` ((T, G) bools), the
 * empty state; from there best_of over `orders` (rows, each a permutation of the same
 * jobs) gives the first pass earning most (`won`, -1: none) and, with packs >= 0,
 * chain_core's search runs from it (the winner's order and spots, its gain from the empty
 * state as its value). `start`, `first` (-1 for every job on entry) end as the searched
 * pass, worth `value`; `pstart`, `pfirst` as the pair step's, worth `paired` (NaN
 * without one). Each step is the separate call's exactly; a batch placement made three
 * calls and built two decoders before. */
static PyObject *batch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[15];
    double spill;
    long long packs, back, ahead, polish;
    int swaps, pair_step, gap = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOdLppLLLOOO|p:batch", &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &spill,
                          &packs, &swaps, &pair_step, &back, &ahead, &polish, &o[12], &o[13],
                          &o[14], &gap))
        return NULL;
    Py_buffer b[12], pb[3];
    int got;
    if (!get_buffers(o, b, &got)) {
        release(b, got);
        return NULL;
    }
    if (!take_buffers(o + 12, pb, 3, 6u)) {
        release(b, got);
        return NULL;
    }
    const Py_ssize_t W = b[0].len / 8, J = b[10].len / 8;
    const int levels = (int)(b[1].len / 8);
    const int64_t *offset = b[1].buf, *count = b[2].buf;
    const int T = (int)(b[9].len / 8) - 1;
    Py_ssize_t n = 0, O = 0;
    if (b[4].ndim == 2) {
        O = b[4].shape[0];
        n = b[4].shape[1];
    }
    if (pb[1].len != J * 8 || pb[2].len != J * 8 || b[11].len != J * 8 ||
        (levels && pb[0].len != (Py_ssize_t)T * count[0]) ||
        W != (levels ? offset[levels - 1] + count[levels - 1] : 0) || b[4].ndim != 2) {
        release_all(pb, 3);
        release(b, got);
        PyErr_SetString(PyExc_ValueError, "batch: mis-sized busy, words, orders or spots");
        return NULL;
    }
    busy_words(pb[0].buf, pb[0].len, b[0].buf, offset, count, levels);
    const Jobs j = {b[5].buf, b[6].buf, b[7].buf, b[8].buf, b[9].buf};
    int64_t *start = b[10].buf, *first = b[11].buf;
    double best, value = -1, paired = NAN;
    Py_ssize_t won = -1;
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * 8);
    Search q;
    int ok = order != NULL && best_of_core(b[0].buf, b[3].buf, W, T, offset, count, levels, &j,
                                           J, b[4].buf, O, n, 1, gap, spill, start, first, NULL,
                                           NULL, &best, &won);
    if (ok && won >= 0 && packs >= 0) {
        ok = search_open(b, n, spill, gap, &q);
        if (ok) {
            memcpy(order, (const int64_t *)b[4].buf + won * n, n * 8);
            value = chain_core(&q, order, start, first, 0.0 + best, packs, swaps, pair_step,
                               back, ahead, polish, pb[1].buf, pb[2].buf, &paired);
            ok = value >= 0;
            search_close(&q);
        }
    } else if (ok) {
        value = 0.0 + best;
    }
    free(order);
    release_all(pb, 3);
    release(b, got);
    if (!ok) return PyErr_NoMemory();
    return Py_BuildValue("(ndd)", won, value, paired);
}

static PyObject *improve(PyObject *self, PyObject *args) {
    (void)self;
    return search(args, 0);
}

static PyObject *pairs(PyObject *self, PyObject *args) {
    (void)self;
    return search(args, 1);
}

static PyObject *front(PyObject *self, PyObject *args) {
    (void)self;
    return search(args, 2);
}

/* What batch blocks lose if GPU g is taken: per block size k up to `largest`, the free
 * share of the rest of its aligned k-block, rounded to tenths; summed in tenths. */
static double tenths_of(int g, int G, int largest, int steps, const int64_t *cum,
                        const int64_t *free_steps) {
    double tenths = 0;
    for (int k = 2; k <= largest && k <= G; k *= 2) {
        if (g >= (G / k) * k) continue;
        const int lo = (g / k) * k;
        const int64_t sum = cum[lo + k] - cum[lo];
        tenths += rint((double)(sum - free_steps[g]) / (double)((k - 1) * steps) * 10);
    }
    return tenths;
}

/* The three buffers choose and stack_pick read: free (T, G) bool, mine (G,) bool and
 * rank (G,) float64; 0, or -1 with every buffer taken so far released. */
static int window_buffers(PyObject *of, PyObject *om, PyObject *orank, Py_buffer *bf,
                          Py_buffer *bm, Py_buffer *br) {
    if (PyObject_GetBuffer(of, bf, PyBUF_C_CONTIGUOUS | PyBUF_ND) != 0) return -1;
    if (PyObject_GetBuffer(om, bm, PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(bf);
        return -1;
    }
    if (PyObject_GetBuffer(orank, br, PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(bf);
        PyBuffer_Release(bm);
        return -1;
    }
    return 0;
}

static void release_window(Py_buffer *bf, Py_buffer *bm, Py_buffer *br) {
    PyBuffer_Release(bf);
    PyBuffer_Release(bm);
    PyBuffer_Release(br);
}

/* Per-GPU scratch of choose_core and stack_pick_core: rt_place calls them a few hundred
 * times a plan at 64 GPUs, and four callocs and frees a call were a fifth of their cost. */
typedef struct {
    int64_t *free_steps, *tail, *cum; /* G + 1 each */
    uint16_t *t16;                    /* 2 * (G + 1) */
} Scratch;

/* One block for all of a Scratch (free(sc->free_steps) frees it); 0 with no memory. */
static int scratch_new(Scratch *sc, int G) {
    const size_t g1 = (size_t)G + 1;
    sc->free_steps = malloc(3 * g1 * sizeof(int64_t) + 2 * g1 * sizeof(uint16_t));
    if (!sc->free_steps) return 0;
    sc->tail = sc->free_steps + g1;
    sc->cum = sc->tail + g1;
    sc->t16 = (uint16_t *)(sc->cum + g1);
    return 1;
}

/* realtime.py's _free_tail_starts: per GPU, the step (relative to a) from which it is free
 * and allowed up to b (0: all of [a, b); b - a: busy at b - 1). With free_steps, also each
 * GPU's free steps in [a, b). Counted in 16 bits (a horizon is at most 672 steps; longer
 * windows take the 64-bit loop) without a branch, so the compiler runs a row a vector at
 * a time. Returns -1 with no memory. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static int free_tails(const unsigned char *fr, const unsigned char *mine, int G, int a,
                      int b, int64_t *tail, int64_t *free_steps, uint16_t *t16) {
    if (b - a >= 65535) {
        for (int g = 0; g < G; g++) tail[g] = 0;
        for (int t = a; t < b; t++) {
            const unsigned char *row = fr + (size_t)t * G;
            for (int g = 0; g < G; g++) {
                if (free_steps) free_steps[g] += row[g] != 0;
                if (!(row[g] && mine[g])) tail[g] = t - a + 1;
            }
        }
        return 0;
    }
    memset(t16, 0, ((size_t)G + 1) * 2 * sizeof(uint16_t));
    uint16_t *n16 = t16 + G;
    for (int t = a; t < b; t++) {
        const unsigned char *row = fr + (size_t)t * G;
        const uint16_t rel = (uint16_t)(t - a + 1);
        for (int g = 0; g < G; g++) {
            const int ok = (row[g] != 0) & (mine[g] != 0);
            n16[g] += row[g] != 0;
            t16[g] = ok ? t16[g] : rel;
        }
    }
    for (int g = 0; g < G; g++) tail[g] = t16[g];
    if (free_steps)
        for (int g = 0; g < G; g++) free_steps[g] += n16[g];
    return 0;
}

/* choose(free (T, G) bool, mine (G,) bool, rank (G,) float64, a, b, largest, tail_first)
 * -> (gpu, start) | None: realtime.py's _choose past its own-GPU rule. A GPU free (and
 * allowed) over all of [a, b) whose taking costs batch blocks least (block_cost, in
 * integer tenths), ties the highest rank; with tail_first, when that still costs
 * something, a costless GPU free from a later step instead; failing all, the GPU whose
 * free tail starts earliest. */
static int choose_core(const unsigned char *fr, const unsigned char *mine, const double *rank,
                       int G, int a, int b, int largest, int tail_first, int *out_gpu,
                       int *out_start, Scratch *sc) {
    const int steps = b - a;
    int64_t *free_steps = sc->free_steps, *cum = sc->cum;
    int64_t *tail = sc->tail; /* relative start of free tail */
    int gpu = -1, start = -1, any_whole = 0;
    memset(free_steps, 0, ((size_t)G + 1) * sizeof(int64_t));
    cum[0] = 0;
    if (free_tails(fr, mine, G, a, b, tail, free_steps, sc->t16) != 0) return -1;
    for (int g = 0; g < G; g++) any_whole |= tail[g] == 0;
    /* prefix sums of free steps, so a block's total is one subtraction */
    for (int g = 0; g < G; g++) cum[g + 1] = cum[g] + free_steps[g];
    if (any_whole) {
        /* cost in tenths, per candidate; the cheapest, then the highest rank */
        double best_cost = 0;
        /* a candidate is free throughout, so its cost per block size depends on its block
         * alone: each block's term is computed once (tenths_of's own arithmetic) */
        int64_t seen_lo[64];
        double seen_term[64];
        for (int l = 0; l < 64; l++) seen_lo[l] = -1;
        for (int g = 0; g < G; g++) {
            if (tail[g] != 0) continue;
            double tenths = 0;
            int l = 0;
            for (int k = 2; k <= largest && k <= G; k *= 2, l++) {
                if (g >= (G / k) * k) continue;
                const int64_t lo = (g / k) * k;
                if (seen_lo[l] != lo) {
                    seen_lo[l] = lo;
                    seen_term[l] = rint((double)(cum[lo + k] - cum[lo] - free_steps[g]) /
                                        (double)((k - 1) * steps) * 10);
                }
                tenths += seen_term[l];
            }
            if (gpu < 0 || tenths < best_cost || (tenths == best_cost && rank[g] > rank[gpu])) {
                gpu = g;
                best_cost = tenths;
            }
        }
        start = a;
        if (tail_first && best_cost > 0) {
            /* a GPU no block misses, free from some later step m: take [m, b) there */
            int tail_gpu = -1;
            for (int g = 0; g < G; g++) {
                if (tail[g] == 0 || tail[g] >= steps) continue;
                if (tenths_of(g, G, largest, steps, cum, free_steps) != 0) continue;
                if (tail_gpu < 0 || tail[g] < tail[tail_gpu] ||
                    (tail[g] == tail[tail_gpu] && rank[g] > rank[tail_gpu]))
                    tail_gpu = g;
            }
            if (tail_gpu >= 0) {
                gpu = tail_gpu;
                start = a + (int)tail[tail_gpu];
            }
        }
    } else {
        int64_t earliest = steps;
        for (int g = 0; g < G; g++)
            if (tail[g] < earliest || (tail[g] == earliest && gpu >= 0 && rank[g] > rank[gpu])) {
                if (tail[g] < earliest) earliest = tail[g];
                gpu = g;
            }
        if (earliest >= steps) gpu = -1;
        start = a + (int)earliest;
    }
    *out_gpu = gpu;
    *out_start = start;
    return 0;
}

static PyObject *choose(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *of, *om, *orank;
    int a, b, largest, tail_first;
    if (!PyArg_ParseTuple(args, "OOOiiip:choose", &of, &om, &orank, &a, &b, &largest,
                          &tail_first))
        return NULL;
    Py_buffer bf, bm, br;
    if (window_buffers(of, om, orank, &bf, &bm, &br) != 0) return NULL;
    int gpu, start;
    Scratch sc;
    const int failed = !scratch_new(&sc, (int)bm.len) ||
                       choose_core(bf.buf, bm.buf, br.buf, (int)bm.len, a, b, largest,
                                   tail_first, &gpu, &start, &sc);
    free(sc.free_steps);
    release_window(&bf, &bm, &br);
    if (failed) return PyErr_NoMemory();
    if (gpu < 0) Py_RETURN_NONE;
    return Py_BuildValue("(ii)", gpu, start);
}

/* stack_pick(free (T, G) bool, mine (G,) bool, rank (G,) float64, a, b, lag)
 * -> (gpu, m) | None: realtime.py's _stack_pick. The highest-ranked allowed GPU whose
 * free tail within [a, b) starts at most lag steps after a. */
static int stack_pick_core(const unsigned char *fr, const unsigned char *mine,
                           const double *rank, int G, int a, int b, int lag, int *out_gpu,
                           int *out_m, Scratch *sc) {
    int64_t *tail = sc->tail; /* free tails' starts */
    if (free_tails(fr, mine, G, a, b, tail, NULL, sc->t16) != 0) return -1;
    int gpu = -1, m = 0;
    for (int g = 0; g < G; g++)
        if (tail[g] <= lag && (gpu < 0 || rank[g] > rank[gpu])) {
            gpu = g;
            m = (int)tail[g];
        }
    *out_gpu = gpu;
    *out_m = m;
    return 0;
}

static PyObject *stack_pick(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *of, *om, *orank;
    int a, b, lag;
    if (!PyArg_ParseTuple(args, "OOOiii:stack_pick", &of, &om, &orank, &a, &b, &lag))
        return NULL;
    Py_buffer bf, bm, br;
    if (window_buffers(of, om, orank, &bf, &bm, &br) != 0) return NULL;
    int gpu, m;
    Scratch sc;
    const int failed = !scratch_new(&sc, (int)bm.len) ||
                       stack_pick_core(bf.buf, bm.buf, br.buf, (int)bm.len, a, b, lag, &gpu,
                                       &m, &sc);
    free(sc.free_steps);
    release_window(&bf, &bm, &br);
    if (failed) return PyErr_NoMemory();
    if (gpu < 0) Py_RETURN_NONE;
    return Py_BuildValue("(ii)", gpu, m);
}

/* write(grid (T, G) int32, start, first, length, gpus (n,) int64) -> None: every placed
 * job (start >= 0) written on its block for its run, to the horizon's end at most. */
static PyObject *write_grid(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO:write", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    Py_buffer b[5];
    if (!take_buffers(o, b, 5, 1u)) return NULL;
    const Py_ssize_t n = b[1].len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *start = b[1].buf, *first = b[2].buf, *length = b[3].buf, *gpus = b[4].buf;
    int32_t *grid = b[0].buf;
    const Py_ssize_t cells = b[0].len / (Py_ssize_t)sizeof(int32_t);
    const int G = b[0].ndim == 2 ? (int)b[0].shape[1] : 0;
    int bad = G <= 0 || b[2].len != b[1].len || b[3].len < b[1].len || b[4].len < b[1].len;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        if (start[i] < 0) continue;
        const int64_t T = cells / G;
        const int64_t end = start[i] + length[i] < T ? start[i] + length[i] : T;
        if (first[i] < 0 || first[i] + gpus[i] > G) {
            bad = 1;
            break;
        }
        for (int64_t t = start[i]; t < end; t++)
            for (int64_t g = first[i]; g < first[i] + gpus[i]; g++)
                grid[t * G + g] = (int32_t)i;
    }
    release_all(b, 5);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "write: a spot outside the grid");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* One realtime layer interval [a, b) of a job waiting in rt_place's queue. */
typedef struct {
    int a, b, slot;
    int64_t job;
    double prio;
    int paid; /* the release at b was charged when the interval was split off */
} Interval;

/* realtime.py's queue order: the longest first, then the highest priority, then the
 * earliest start, the lowest job index, the earliest end (heapq over its tuples). */
static int interval_before(const Interval *x, const Interval *y) {
    const int lx = x->b - x->a, ly = y->b - y->a;
    if (lx != ly) return lx > ly;
    if (x->prio != y->prio) return x->prio > y->prio;
    if (x->a != y->a) return x->a < y->a;
    if (x->job != y->job) return x->job < y->job;
    if (x->b != y->b) return x->b < y->b;
    return x->paid < y->paid;
}

typedef struct {
    Interval *items;
    Py_ssize_t n, cap;
} Queue;

static int queue_push(Queue *q, Interval iv) {
    if (q->n == q->cap) {
        const Py_ssize_t cap = q->cap ? 2 * q->cap : 16;
        Interval *grown = realloc(q->items, (size_t)cap * sizeof(Interval));
        if (!grown) return -1;
        q->items = grown, q->cap = cap;
    }
    Py_ssize_t k = q->n++;
    while (k > 0) {
        const Py_ssize_t up = (k - 1) / 2;
        if (!interval_before(&iv, &q->items[up])) break;
        q->items[k] = q->items[up];
        k = up;
    }
    q->items[k] = iv;
    return 0;
}

static Interval queue_pop(Queue *q) {
    const Interval top = q->items[0], last = q->items[--q->n];
    Py_ssize_t k = 0;
    for (;;) {
        Py_ssize_t c = 2 * k + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && interval_before(&q->items[c + 1], &q->items[c])) c++;
        if (!interval_before(&q->items[c], &last)) break;
        q->items[k] = q->items[c];
        k = c;
    }
    if (q->n > 0) q->items[k] = last;
    return top;
}

/* One realtime job's swap ledger as rt_place reads it (a row of each per-job array). */
typedef struct {
    const unsigned char *allowed, *current;
    unsigned char *unused;
    int64_t *changes; /* T + 1 entries */
    int has_current;
    int64_t limit;
} Ledger;

/* realtime.py's _own_best (no holding through a keep-off): at step 0, the preferred of
 * the job's unused current GPUs free for all of [a, b); -1 for none. */
static int own_best(const Ledger *l, const unsigned char *fr, const double *rank, int G,
                    int a, int b) {
    if (a != 0) return -1;
    int best = -1;
    for (int g = 0; g < G; g++) {
        if (!l->unused[g] || !l->allowed[g]) continue;
        int whole = 1;
        for (int t = a; t < b && whole; t++) whole = fr[(size_t)t * G + g] != 0;
        if (whole && (best < 0 || rank[g] > rank[best])) best = g;
    }
    return best;
}

/* realtime.py's _handover: the tail's start (returned) and the head's end (*head_end) of a
 * split interval whose GPU frees at m, if the move fits the swap budget (at a step, or
 * with the head held one step longer), from m up to `wait` steps later; -1 if not. */
static int handover(const Ledger *l, int T, int m, int b, int wait, int *head_end) {
    if (b < T && l->changes[b] + 1 > l->limit) return -1;
    const int last = m + wait < b - 1 ? m + wait : b - 1;
    for (int start = m; start <= last; start++) {
        if (l->changes[start] + 2 <= l->limit) {
            *head_end = start;
            return start;
        }
        if (l->changes[start] + 1 <= l->limit && l->changes[start + 1] + 1 <= l->limit) {
            *head_end = start + 1;
            return start;
        }
    }
    return -1;
}

/* realtime.py's _fits: whether taking [a, b) on gpu fits the swap budget, with the
 * acquire and release it costs (*acquire, *release); nothing charged. */
static int fits(const Ledger *l, int T, int gpu, int a, int b, int paid, int *acquire,
                int *release) {
    *acquire = a > 0 || (l->has_current && !l->current[gpu]);
    *release = b < T && !paid;
    if (*acquire && *release && a == b) return l->changes[a] + 2 <= l->limit;
    return !((*acquire && l->changes[a] + 1 > l->limit) ||
             (*release && l->changes[b] + 1 > l->limit));
}

/* realtime.py's _charge: the acquire at a and the release at b, if both fit. */
static int charge(Ledger *l, int T, int gpu, int a, int b, int paid) {
    int acquire, release;
    if (!fits(l, T, gpu, a, b, paid, &acquire, &release)) return 0;
    if (acquire) l->changes[a] += 1;
    if (release) l->changes[b] += 1;
    return 1;
}

/* rt_place(grid (T, G) int32, intervals (n, 3) int64 [a, slot, b], job (R,) int64,
 * prio (R,) float64, allowed (R, G) bool, current (R, G) bool, unused (R, G) bool,
 * has_current (R,) bool, limit (R,) int64, changes (R, T + 1) int64, rank (G,) float64,
 * largest, tail_first, stack, lag, wait, affordable_stack) -> None: RealtimePlacer.place without holding through
 * a keep-off, the same loop over the same queue order; writes grid, unused and changes. */
static PyObject *rt_place(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11];
    int largest, tail_first, stack, lag, wait, affordable_stack;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOippiip:rt_place", &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &largest,
                          &tail_first, &stack, &lag, &wait, &affordable_stack))
        return NULL;
    Py_buffer bu[11];
    /* writable: grid, unused, changes */
    if (!take_buffers(o, bu, 11, (1u << 0) | (1u << 6) | (1u << 9))) return NULL;
    const int R = (int)(bu[2].len / (Py_ssize_t)sizeof(int64_t));
    const int G = (int)(bu[10].len / (Py_ssize_t)sizeof(double));
    const int T = R ? (int)(bu[9].len / (Py_ssize_t)sizeof(int64_t) / R) - 1 : 0;
    if (R == 0 || G == 0 || bu[0].len != (Py_ssize_t)T * G * (Py_ssize_t)sizeof(int32_t)) {
        release_all(bu, 11);
        Py_RETURN_NONE;
    }
    int32_t *grid = bu[0].buf;
    const int64_t *iv = bu[1].buf;
    const Py_ssize_t n = bu[1].len / (Py_ssize_t)(3 * sizeof(int64_t));
    const int64_t *job = bu[2].buf;
    const double *prio = bu[3].buf, *rank = bu[10].buf;
    Ledger *ledger = calloc((size_t)R, sizeof(Ledger));
    unsigned char *fr = malloc((size_t)T * G + 1);
    Queue q = {NULL, 0, 0};
    Scratch sc = {NULL, NULL, NULL, NULL}; /* the choices' scratch, once for the loop */
    int failed = !ledger || !fr || !scratch_new(&sc, G);
    for (int r = 0; r < R && !failed; r++) {
        ledger[r].allowed = (const unsigned char *)bu[4].buf + (size_t)r * G;
        ledger[r].current = (const unsigned char *)bu[5].buf + (size_t)r * G;
        ledger[r].unused = (unsigned char *)bu[6].buf + (size_t)r * G;
        ledger[r].has_current = ((const unsigned char *)bu[7].buf)[r] != 0;
        ledger[r].limit = ((const int64_t *)bu[8].buf)[r];
        ledger[r].changes = (int64_t *)bu[9].buf + (size_t)r * (T + 1);
    }
    if (!failed)
        for (size_t c = 0; c < (size_t)T * G; c++) fr[c] = grid[c] == -1;
    for (Py_ssize_t k = 0; k < n && !failed; k++) {
        const int slot = (int)iv[3 * k + 1];
        Interval one = {(int)iv[3 * k], (int)iv[3 * k + 2], slot, job[slot], prio[slot], 0};
        failed = queue_push(&q, one) != 0;
    }
    while (!failed && q.n > 0) {
        const Interval cur = queue_pop(&q);
        const int a = cur.a, b = cur.b;
        Ledger *l = &ledger[cur.slot];
        int gpu = -1, start = a, head_end = a;
        if (stack) {
            const int own = own_best(l, fr, rank, G, a, b);
            const int window_lag = b - a > lag ? lag : 0;
            int pick = -1, m = 0, chosen = 0;
            if (stack_pick_core(fr, l->allowed, rank, G, a, b, window_lag, &pick, &m, &sc) != 0) {
                failed = 1;
                break;
            }
            if (pick >= 0 && m > 0) {
                int end = -1;
                const int moved = handover(l, T, a + m, b, wait, &end);
                if (moved < 0) {
                    if (stack_pick_core(fr, l->allowed, rank, G, a, b, 0, &pick, &m, &sc) != 0) {
                        failed = 1;
                        break;
                    }
                } else if (own < 0 || rank[pick] > rank[own]) {
                    gpu = pick, start = moved, head_end = end, chosen = 1;
                }
            }
            int acquire, release; /* (what the move would cost: unused here) */
            if (!chosen && pick >= 0 && (own < 0 || rank[pick] > rank[own]) &&
                (own < 0 || !affordable_stack ||
                 fits(l, T, pick, a, b, 0, &acquire, &release))) {
                gpu = pick, start = a, head_end = a, chosen = 1;
            }
            if (!chosen && own >= 0) gpu = own, start = a, head_end = a, chosen = 1;
            if (!chosen) {
                if (choose_core(fr, l->allowed, rank, G, a, b, largest, 0, &gpu, &start, &sc) != 0) {
                    failed = 1;
                    break;
                }
                if (gpu < 0) continue;
                head_end = start;
            }
        } else {
            const int own = own_best(l, fr, rank, G, a, b);
            if (own >= 0) {
                gpu = own, start = 0;
            } else {
                if (choose_core(fr, l->allowed, rank, G, a, b, largest, tail_first, &gpu,
                                &start, &sc) != 0) {
                    failed = 1;
                    break;
                }
                if (gpu < 0) continue; /* left out: a shortfall the objective prices */
            }
            head_end = start;
        }
        if (!charge(l, T, gpu, start, b, cur.paid)) continue;
        for (int t = start; t < b; t++) {
            fr[(size_t)t * G + gpu] = 0;
            grid[(size_t)t * G + gpu] = (int32_t)cur.job;
        }
        if (start == 0) l->unused[gpu] = 0;
        if (start > a) { /* the head waits for another GPU, its release paid now */
            if (head_end < T) {
                if (l->changes[head_end] + 1 > l->limit) continue; /* it would not fit later */
                l->changes[head_end] += 1;
            }
            Interval head = {a, head_end, cur.slot, cur.job, cur.prio, 1};
            failed = queue_push(&q, head) != 0;
        }
    }
    free(q.items);
    free(fr);
    free(ledger);
    free(sc.free_steps);
    release_all(bu, 11);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static void refresh_up(uint64_t *words, const int64_t *offset, const int64_t *count,
                       int levels, int64_t g) {
    for (int l = 1; l < levels; l++) {
        const int64_t i = g >> l;
        if (i >= count[l]) return;
        const uint64_t *child = words + offset[l - 1];
        words[offset[l] + i] = child[2 * i] | child[2 * i + 1];
    }
}

/* climb(words, offset, count, order, gpus, length, arrival, weight, decay, runs, owner,
 *       budget) -> (value, evals): layout_climb.climb's loop. `words` is the layout's busy
 * index (updated to the climbed layout), `runs` (R, 4) int64 rows (a, b, gpu, job) of the
 * movable realtime runs (gpu updated). Each run in turn, each other GPU free for its steps
 * and allowed to its job (owner -1 or the job) is tried; the first move whose greedy pass
 * over `order` earns more is kept, and the scan starts again, until a scan keeps nothing
 * or `budget` passes are spent. */
static PyObject *climb(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11];
    long long budget;
    int gap = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOL|p:climb", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &budget, &gap))
        return NULL;
    static const int writable[11] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    Py_buffer b[11];
    int got = 0;
    for (; got < 11; got++)
        if (!GET(b[got], o[got], writable[got])) break;
    if (got < 11) {
        for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
        return NULL;
    }
    uint64_t *words = b[0].buf;
    const int64_t *offset = b[1].buf, *count = b[2].buf, *order = b[3].buf;
    const int levels = (int)(b[1].len / 8);
    const Py_ssize_t W = levels ? offset[levels - 1] + count[levels - 1] : 0;
    const Py_ssize_t n = b[3].len / 8, R = b[9].len / 32, J = b[4].len / 8;
    const int T = (int)(b[8].len / 8) - 1;
    int64_t *runs = b[9].buf;
    const int64_t *owner = b[10].buf;
    const int64_t G = count[0];
    const Jobs j = {b[4].buf, b[5].buf, b[6].buf, b[7].buf, b[8].buf};
    uint64_t *tw = malloc((size_t)(W > 0 ? W : 1) * 8);
    int64_t *ts = malloc((size_t)(J > 0 ? J : 1) * 8), *tf = malloc((size_t)(J > 0 ? J : 1) * 8);
    if (!tw || !ts || !tf) {
        free(tw), free(ts), free(tf);
        for (int k = 0; k < 11; k++) PyBuffer_Release(&b[k]);
        return PyErr_NoMemory();
    }
    int no_bound = -1;
    State work = {tw, offset, count, levels, NULL, T, -1.0, gap};
    memcpy(tw, words, W * 8);
    double value = pack_run(&work, &j, order, n, 1, &no_bound, ts, tf);
    long long evals = 0;
    int improved = 1;
    while (improved && evals < budget) {
        improved = 0;
        for (Py_ssize_t r = 0; r < R && !improved && evals < budget; r++) {
            const int a = (int)runs[4 * r], e = (int)runs[4 * r + 1];
            const int64_t g = runs[4 * r + 2], job = runs[4 * r + 3];
            const uint64_t bits = span(a, e < T ? e : T);
            for (int64_t y = 0; y < G && evals < budget; y++) {
                if (y == g || (words[y] & bits) || (owner[y] != -1 && owner[y] != job))
                    continue;
                words[g] &= ~bits;
                words[y] |= bits;
                refresh_up(words, offset, count, levels, g);
                refresh_up(words, offset, count, levels, y);
                memcpy(tw, words, W * 8);
                no_bound = -1;
                const double v = pack_run(&work, &j, order, n, 1, &no_bound, ts, tf);
                evals++;
                if (v > value + 1e-9) {
                    value = v;
                    runs[4 * r + 2] = y;
                    improved = 1;
                    break;
                }
                words[y] &= ~bits;
                words[g] |= bits;
                refresh_up(words, offset, count, levels, y);
                refresh_up(words, offset, count, levels, g);
            }
        }
    }
    free(tw), free(ts), free(tf);
    for (int k = 0; k < 11; k++) PyBuffer_Release(&b[k]);
    return Py_BuildValue("(dL)", value, evals);
}

/* top_up(grid (T, G) int32, job, demand (T,) float64, before (G,) bool, has_current,
 * limit, keep_off (T, G) bool) -> bool: topup.py's _top_up_py for one service. While the
 * job is short at a step with a free cell (FREE, not keep_off), it takes the run of one
 * free GPU, from a short step to a short step, that covers the most short steps within
 * its swap limit (lowest GPU, then earliest run, on a tie). A run's start and end change
 * the job's flips at its first step and the step after its last one only, so each fits
 * on its own: per maximal free interval, its first short step that fits to its last. */
static PyObject *top_up(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *og, *od, *ob, *ok;
    int job, has_current, limit;
    if (!PyArg_ParseTuple(args, "OiOOiiO:top_up", &og, &job, &od, &ob, &has_current, &limit,
                          &ok))
        return NULL;
    Py_buffer bg, bd, bb, bk;
    if (PyObject_GetBuffer(og, &bg, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) return NULL;
    if (PyObject_GetBuffer(od, &bd, PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(&bg);
        return NULL;
    }
    if (PyObject_GetBuffer(ob, &bb, PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(&bg), PyBuffer_Release(&bd);
        return NULL;
    }
    if (PyObject_GetBuffer(ok, &bk, PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(&bg), PyBuffer_Release(&bd), PyBuffer_Release(&bb);
        return NULL;
    }
    const int T = (int)(bd.len / (Py_ssize_t)sizeof(double));
    const int G = (int)bb.len;
    int32_t *grid = bg.buf;
    const double *demand = bd.buf;
    const unsigned char *before = bb.buf, *keep_off = bk.buf;
    int64_t *flips = calloc((size_t)T + 1, sizeof(int64_t));
    int64_t *cum = calloc((size_t)T + 1, sizeof(int64_t));
    int64_t *held = calloc((size_t)T + 1, sizeof(int64_t));
    int64_t *open = calloc((size_t)T + 1, sizeof(int64_t));
    unsigned char *shortage = calloc((size_t)T + 1, 1);
    int changed = 0;
    const int allocated = flips && cum && held && open && shortage;
    if (!allocated || bg.len != (Py_ssize_t)T * G * (Py_ssize_t)sizeof(int32_t)
        || bk.len != (Py_ssize_t)T * G) {
        free(flips), free(cum), free(held), free(open), free(shortage);
        PyBuffer_Release(&bg), PyBuffer_Release(&bd), PyBuffer_Release(&bb);
        PyBuffer_Release(&bk);
        if (!allocated) return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, "top_up: bad shapes");
        return NULL;
    }
#define MINE(t, g) (grid[(size_t)(t) * G + (g)] == job)
#define FREE_AT(t, g) (grid[(size_t)(t) * G + (g)] == -1 && !keep_off[(size_t)(t) * G + (g)])
    for (int t = 0; t < T; t++) { /* counted once, then kept up to date run by run */
        for (int g = 0; g < G; g++) {
            const int m = MINE(t, g);
            held[t] += m;
            flips[t] += m != (t == 0 ? before[g] != 0 : MINE(t - 1, g));
            open[t] += FREE_AT(t, g);
        }
        if (t == 0 && !has_current) flips[0] = 0;
    }
    for (;;) {
        int lo = T, hi = -1; /* the first and last short steps with a free cell */
        for (int t = 0; t < T; t++) {
            shortage[t] = demand[t] > (double)held[t];
            cum[t + 1] = cum[t] + shortage[t];
            if (shortage[t] && open[t] > 0) {
                if (lo == T) lo = t;
                hi = t;
            }
        }
        if (hi < 0) break;
        /* A run starts and ends at short steps with a free cell, so only [lo, hi] is
         * scanned: its free intervals there are the runs' intervals. */
        int64_t best = 0;
        int best_g = -1, best_a = 0, best_b = 0;
        for (int g = 0; g < G; g++) {
            int t = lo;
            while (t <= hi) {
                if (!FREE_AT(t, g)) {
                    t++;
                    continue;
                }
                int first = -1, last = -1; /* the run's first step, and one past its last */
                for (; t <= hi && FREE_AT(t, g); t++) {
                    if (!shortage[t]) continue;
                    if (first < 0) {
                        const int prev = t == 0 ? before[g] != 0 : MINE(t - 1, g);
                        if ((t == 0 && !has_current) || flips[t] + 1 - 2 * prev <= limit)
                            first = t;
                    }
                    if (t == T - 1 || flips[t + 1] + 1 - 2 * MINE(t + 1, g) <= limit)
                        last = t + 1;
                }
                if (first >= 0 && first < last && cum[last] - cum[first] > best) {
                    best = cum[last] - cum[first];
                    best_g = g, best_a = first, best_b = last;
                }
            }
        }
        if (best_g < 0) break;
        const int g = best_g, a = best_a, b = best_b;
        if (!(a == 0 && !has_current)) flips[a] += 1 - 2 * (a == 0 ? before[g] != 0 : MINE(a - 1, g));
        if (b < T) flips[b] += 1 - 2 * MINE(b, g);
        for (int t = a; t < b; t++) {
            grid[(size_t)t * G + g] = job;
            held[t]++, open[t]--;
        }
        changed = 1;
    }
#undef MINE
#undef FREE_AT
    free(flips), free(cum), free(held), free(open), free(shortage);
    PyBuffer_Release(&bg), PyBuffer_Release(&bd), PyBuffer_Release(&bb), PyBuffer_Release(&bk);
    return PyBool_FromLong(changed);
}


/* allocator/decomposition.py's descend: the Lagrangian decomposition's subgradient descent
 * (per-step knapsack x per-job start), the same loop and arithmetic as the Python one. */
static double decomp_value(int J, int T, int G, const double *pi, const double *reward,
                           const int64_t *ends, const int64_t *gpus, const uint8_t *cover,
                           const int64_t *caps, const int64_t *freec, const double *rt_best,
                           double base, double *sub, double *dp, uint8_t *chosen,
                           int *taken_job, double *before) {
    double total = base;
    memset(sub, 0, sizeof(double) * (size_t)J * (size_t)T);
    int top = 1;
    while (top * 2 <= G) top *= 2;
    for (int t = 0; t < T; t++) {
        dp[0] = 0.0;
        for (int b = 1; b <= G; b++) dp[b] = -INFINITY;
        int n = 0;
        for (int k = top; k >= 1; k /= 2) {
            for (int j = 0; j < J; j++) {
                if (gpus[j] != k || !cover[(size_t)j * T + t]) continue;
                const double value = pi[(size_t)j * T + t];
                if (!(value > 0.0)) continue;
                uint8_t *row = chosen + (size_t)n * (G + 1);
                memset(row, 0, (size_t)G + 1);
                for (int b = G; b >= k; b--) {
                    const double cand = dp[b - k] + value;
                    if (cand > dp[b]) {
                        dp[b] = cand;
                        row[b] = 1;
                    }
                }
                taken_job[n++] = j;
            }
            if (k >= 2) {
                int level = 0;
                while ((2 << level) < k) level++;
                const int64_t cap = caps[(size_t)level * T + t];
                for (int64_t b = cap + 1; b <= G; b++) dp[b] = -INFINITY;
            }
        }
        const int64_t fr = freec[t] < G ? freec[t] : G;
        double best = -INFINITY;
        int at = 0;
        for (int b = 0; b <= fr; b++) {
            const double v = dp[b] + rt_best[(size_t)t * (G + 1) + (freec[t] - b)];
            if (v > best) {
                best = v;
                at = b;
            }
        }
        total += best;
        for (int i = n - 1; i >= 0; i--) {
            const int j = taken_job[i];
            if (chosen[(size_t)i * (G + 1) + at]) {
                sub[(size_t)j * T + t] += 1.0;
                at -= (int)gpus[j];
            }
        }
    }
    for (int j = 0; j < J; j++) {
        before[0] = 0.0;
        for (int t = 0; t < T; t++) before[t + 1] = before[t] + pi[(size_t)j * T + t];
        double best = 0.0;
        int at = -1;
        for (int s = 0; s < T; s++) {
            const double r = reward[(size_t)j * T + s];
            if (r == -INFINITY) continue;
            const double gain = r - (before[ends[(size_t)j * T + s]] - before[s]);
            if (gain > best) {
                best = gain;
                at = s;
            }
        }
        total += best;
        if (at >= 0)
            for (int64_t t = at; t < ends[(size_t)j * T + at]; t++) sub[(size_t)j * T + t] -= 1.0;
    }
    for (size_t c = 0; c < (size_t)J * T; c++) sub[c] *= (double)cover[c];
    return total;
}

static PyObject *decomp(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8];
    int J, T, G, iterations, stale_limit;
    double base, lower, aim, beta;
    if (!PyArg_ParseTuple(args, "OOOOOOOOiiiddddii:decomp", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &J, &T, &G, &base, &lower, &aim, &beta,
                          &iterations, &stale_limit))
        return NULL;
    Py_buffer b[8];
    if (!take_buffers(o, b, 8, 0u)) return NULL;
    int K = 0;
    while ((2 << K) <= G) K++;
    const size_t cells = (size_t)J * (size_t)T;
    int bad = J < 0 || T <= 0 || G <= 0 ||
              b[0].len != (Py_ssize_t)(cells * sizeof(double)) ||
              b[1].len != (Py_ssize_t)(cells * sizeof(double)) ||
              b[2].len != (Py_ssize_t)(cells * sizeof(int64_t)) ||
              b[3].len != (Py_ssize_t)((size_t)J * sizeof(int64_t)) ||
              b[4].len != (Py_ssize_t)cells ||
              b[5].len != (Py_ssize_t)((size_t)K * T * sizeof(int64_t)) ||
              b[6].len != (Py_ssize_t)((size_t)T * sizeof(int64_t)) ||
              b[7].len != (Py_ssize_t)((size_t)T * (G + 1) * sizeof(double));
    const int64_t *ends = b[2].buf, *gpus = b[3].buf, *freec = b[6].buf;
    for (size_t c = 0; c < cells && !bad; c++) bad = ends[c] < 0 || ends[c] > T;
    for (int t = 0; t < T && !bad; t++) bad = freec[t] < 0 || freec[t] > G;
    if (bad) {
        release_all(b, 8);
        PyErr_SetString(PyExc_ValueError, "decomp: tables of the wrong shape");
        return NULL;
    }
    double *pi = malloc(sizeof(double) * (cells + 1));
    double *sub = malloc(sizeof(double) * (cells + 1));
    double *dir = calloc(cells + 1, sizeof(double));
    double *dp = malloc(sizeof(double) * ((size_t)G + 1));
    uint8_t *chosen = malloc(((size_t)J + 1) * ((size_t)G + 1));
    int *taken = malloc(sizeof(int) * ((size_t)J + 1));
    double *before = malloc(sizeof(double) * ((size_t)T + 1));
    if (!pi || !sub || !dir || !dp || !chosen || !taken || !before) {
        free(pi); free(sub); free(dir); free(dp); free(chosen); free(taken); free(before);
        release_all(b, 8);
        return PyErr_NoMemory();
    }
    memcpy(pi, b[0].buf, sizeof(double) * cells);
    const int has_lower = !isnan(lower);
    double best = INFINITY, theta = 1.0;
    int stale = 0, done = 0;
    Py_BEGIN_ALLOW_THREADS
    while (done < iterations) {
        done++;
        const double value = decomp_value(J, T, G, pi, b[1].buf, ends, gpus, b[4].buf,
                                          b[5].buf, freec, b[7].buf, base, sub, dp, chosen,
                                          taken, before);
        if (value < best) {
            best = value;
            stale = 0;
        } else if (++stale >= stale_limit) {
            theta /= 2;
            stale = 0;
            if (theta < 1e-3) break;
        }
        if (has_lower && best <= lower + 1e-9 * fmax(1.0, fabs(lower))) break;
        double norm = 0.0;
        for (size_t c = 0; c < cells; c++) {
            dir[c] = sub[c] + beta * dir[c];
            norm += dir[c] * dir[c];
        }
        if (norm == 0.0) break;
        const double known = has_lower ? lower : best;
        const double target = known - aim * fabs(known);
        const double step = theta * fmax(value - target, 1e-3 * fabs(value) + 1e-9) / norm;
        for (size_t c = 0; c < cells; c++) pi[c] -= step * dir[c];
    }
    Py_END_ALLOW_THREADS
    free(pi); free(sub); free(dir); free(dp); free(chosen); free(taken); free(before);
    release_all(b, 8);
    return Py_BuildValue("di", best, done);
}

/* layers(demand, capacity, swap_limit, start, curve) -> [(a, b), ...]: realtime's held-GPU
 * curve (envelope.target_curve: the fewest GPUs covering `demand` under `capacity` that
 * change by at most `swap_limit` a step, from `start` GPUs before step 0, start < 0: none)
 * written into `curve`, and its layers' maximal runs (realtime.layer_intervals: layer by
 * layer, each in time order). All three arrays int64 of the horizon's length. fast
 * builds these for every service on every plan; in Python they were a third of the
 * realtime placer's set-up at 8 GPUs. */
static PyObject *layers(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    long long limit, start;
    if (!PyArg_ParseTuple(args, "OOLLO:layers", &o[0], &o[1], &limit, &start, &o[2]))
        return NULL;
    Py_buffer b[3];
    if (!take_buffers(o, b, 3, 4u)) return NULL;
    const Py_ssize_t T = b[0].len / 8;
    if (b[1].len != b[0].len || b[2].len != b[0].len) {
        release_all(b, 3);
        PyErr_SetString(PyExc_ValueError, "layers: demand, capacity and curve differ in length");
        return NULL;
    }
    const int64_t *raw = b[0].buf, *cap = b[1].buf;
    int64_t *out = b[2].buf;
    for (Py_ssize_t t = 0; t < T; t++) out[t] = raw[t] <= cap[t] ? raw[t] : cap[t];
    for (Py_ssize_t t = T - 2; t >= 0; t--) /* rise early enough for each peak */
        if (out[t + 1] - limit > out[t]) out[t] = out[t + 1] - limit;
    int64_t previous = start, top = 0;
    for (Py_ssize_t t = 0; t < T; t++) { /* fall no faster than the limit; stay under cap */
        int64_t now = out[t];
        if ((t > 0 || start >= 0) && previous - limit > now) now = previous - limit;
        if (cap[t] < now) now = cap[t];
        out[t] = previous = now;
        if (now > top) top = now;
    }
    PyObject *runs = PyList_New(0);
    for (int64_t level = 1; runs && level <= top; level++)
        for (Py_ssize_t t = 0; t < T;) {
            if (out[t] < level) {
                t++;
                continue;
            }
            const Py_ssize_t a = t;
            while (t < T && out[t] >= level) t++;
            PyObject *run = Py_BuildValue("(nn)", a, t);
            if (!run || PyList_Append(runs, run) < 0) {
                Py_XDECREF(run);
                Py_CLEAR(runs);
                break;
            }
            Py_DECREF(run);
        }
    release_all(b, 3);
    return runs;
}

/* counts(grids: list of (T, G) int32, n1, out (K, T, n1) int64) -> None: cells per step
 * and job of each grid, a cell's code taken modulo n1 as Python takes it (FREE, -1, in
 * the last column): grid.Scorer's bincount, per grid, without the concatenation. */
static PyObject *counts_of(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *grids, *oout;
    Py_ssize_t n1;
    if (!PyArg_ParseTuple(args, "OnO:counts", &grids, &n1, &oout)) return NULL;
    if (!PyList_Check(grids) || n1 <= 0) {
        PyErr_SetString(PyExc_ValueError, "counts: a list of grids and n1 > 0");
        return NULL;
    }
    Py_buffer out;
    if (!GET(out, oout, 1)) return NULL;
    const Py_ssize_t K = PyList_GET_SIZE(grids);
    int64_t *o = out.buf;
    const Py_ssize_t per = K ? out.len / (Py_ssize_t)sizeof(int64_t) / K : 0;
    memset(out.buf, 0, (size_t)out.len);
    for (Py_ssize_t k = 0; k < K; k++) {
        Py_buffer g;
        if (!GET(g, PyList_GET_ITEM(grids, k), 0)) {
            PyBuffer_Release(&out);
            return NULL;
        }
        const Py_ssize_t cells = g.len / (Py_ssize_t)sizeof(int32_t);
        const Py_ssize_t G = g.ndim == 2 ? g.shape[1] : 0;
        if (g.itemsize != 4 || G <= 0 || (cells / G) * n1 != per) {
            PyBuffer_Release(&g);
            PyBuffer_Release(&out);
            PyErr_SetString(PyExc_ValueError, "counts: an int32 (T, G) grid per (T, n1) block");
            return NULL;
        }
        const int32_t *c = g.buf;
        int64_t *row = o + k * per;
        for (Py_ssize_t x = 0; x < cells; x += G, row += n1) /* step by step */
            for (Py_ssize_t y = x; y < x + G; y++) {
                Py_ssize_t m = (Py_ssize_t)c[y];
                if (m < 0 || m >= n1) { /* (FREE and codes out of range: Python's modulo) */
                    m %= n1;
                    if (m < 0) m += n1;
                }
                row[m]++;
            }
        PyBuffer_Release(&g);
    }
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

typedef struct {
    int64_t outside, broken, gpu;
} PrefKey;

static int pref_order(const void *x, const void *y) {
    const PrefKey *a = x, *b = y;
    if (a->outside != b->outside) return a->outside < b->outside ? -1 : 1;
    if (a->broken != b->broken) return a->broken < b->broken ? -1 : 1;
    return a->gpu < b->gpu ? -1 : a->gpu > b->gpu;
}

/* prefer(pinned (T, G) bool or None, largest, rank (G,) float64) -> None: realtime.preference
 * (the same keys: outside every aligned block, broken for at least half the steps, GPU),
 * each GPU's position in that order written as its rank. */
static PyObject *prefer(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *opinned, *orank;
    long largest;
    if (!PyArg_ParseTuple(args, "OlO:prefer", &opinned, &largest, &orank)) return NULL;
    Py_buffer pb, rb;
    const int has = opinned != Py_None;
    if (!GET(rb, orank, 1)) return NULL;
    if (has && !GET(pb, opinned, 0)) {
        PyBuffer_Release(&rb);
        return NULL;
    }
    const Py_ssize_t G = rb.len / (Py_ssize_t)sizeof(double);
    const Py_ssize_t steps = has && G ? pb.len / G : 0;
    const unsigned char *pin = has ? pb.buf : NULL;
    PrefKey *key = PyMem_Calloc(G ? (size_t)G : 1, sizeof(PrefKey));
    if (!key) {
        if (has) PyBuffer_Release(&pb);
        PyBuffer_Release(&rb);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t g = 0; g < G; g++) key[g].gpu = g;
    const Py_ssize_t half = (steps + 1) / 2;
    for (Py_ssize_t k = 2; k <= largest; k *= 2) {
        const Py_ssize_t whole = (G / k) * k;
        for (Py_ssize_t g = whole; g < G; g++) key[g].outside++;
        if (!has || !steps || !whole) continue;
        for (Py_ssize_t j = 0; j < whole; j += k) {
            Py_ssize_t busy = 0;
            for (Py_ssize_t t = 0; t < steps; t++) {
                const unsigned char *row = pin + t * G + j;
                for (Py_ssize_t u = 0; u < k; u++)
                    if (row[u]) {
                        busy++;
                        break;
                    }
            }
            if (busy >= half)
                for (Py_ssize_t u = 0; u < k; u++) key[j + u].broken += k;
        }
    }
    qsort(key, (size_t)G, sizeof(PrefKey), pref_order);
    double *rank = rb.buf;
    for (Py_ssize_t r = 0; r < G; r++) rank[key[r].gpu] = (double)r;
    PyMem_Free(key);
    if (has) PyBuffer_Release(&pb);
    PyBuffer_Release(&rb);
    Py_RETURN_NONE;
}

typedef struct {
    int64_t a, b, g, job;
} RunRow;

static int run_row_order(const void *x, const void *y) {
    const RunRow *p = x, *q = y;
    const int64_t lp = p->a - p->b, lq = q->a - q->b;
    if (lp != lq) return lp < lq ? -1 : 1;
    if (p->g != q->g) return p->g < q->g ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* runs(layout (T, G) int32, kind (n,) int8, out (T * G, 4) int64) -> R: layout_climb's
 * movable runs (start, end, gpu, job) in out's first R rows: each maximal run of one
 * realtime job on a GPU (kind 1: no current GPUs; 2: with, whose runs held at step 0
 * stay), the longest first, then by GPU and start. */
static PyObject *runs_of(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO:runs", &o[0], &o[1], &o[2])) return NULL;
    Py_buffer b[3];
    if (!take_buffers(o, b, 3, 4u)) return NULL;
    const Py_ssize_t G = b[0].ndim == 2 ? b[0].shape[1] : 0;
    const Py_ssize_t cells = b[0].len / (Py_ssize_t)sizeof(int32_t);
    const Py_ssize_t n = b[1].len;
    if (b[0].itemsize != 4 || G <= 0 || b[2].len < cells * 4 * (Py_ssize_t)sizeof(int64_t)) {
        release_all(b, 3);
        PyErr_SetString(PyExc_ValueError, "runs: an int32 (T, G) layout and (T * G, 4) rows");
        return NULL;
    }
    const Py_ssize_t T = cells / G;
    const int32_t *cell = b[0].buf;
    const signed char *kind = b[1].buf;
    RunRow *out = b[2].buf;
    Py_ssize_t R = 0;
    for (Py_ssize_t g = 0; g < G; g++) {
        Py_ssize_t since = 0;
        for (Py_ssize_t t = 1; t <= T; t++) {
            const int32_t held = cell[since * G + g];
            if (t < T && cell[t * G + g] == held) continue;
            if (held >= 0 && held < n && kind[held] > 0 && !(since == 0 && kind[held] == 2)) {
                out[R].a = since;
                out[R].b = t;
                out[R].g = g;
                out[R].job = held;
                R++;
            }
            since = t;
        }
    }
    qsort(out, (size_t)R, sizeof(RunRow), run_row_order);
    release_all(b, 3);
    return PyLong_FromSsize_t(R);
}

/* path(taken (T, G) uint8, needed (T,) uint8, budget (T,) int64, starts (k,) int64,
 * out (4, T) int64) -> int: rtpath._layer_path's shortest path of one layer, the same
 * moves, costs and ties (the numpy version is the reference a test holds this to). Writes
 * per step the state (G: none), the release owed, the state before and the changes used;
 * returns the start state (the current GPU it began on, or G), or -1 where no path keeps
 * within the budget. */
#define RT_SHORT 1000.0
#define RT_IDLE 0.1

/* The index of x's lowest entry and of the lowest of the others, the first on a tie (numpy's
 * argmin, then argmin with the first set to inf); a one-entry row gives its index twice. */
static void two_lowest(const double *x, Py_ssize_t n, Py_ssize_t *first, Py_ssize_t *second) {
    Py_ssize_t f = 0, s = 0;
    for (Py_ssize_t q = 1; q < n; q++)
        if (x[q] < x[f]) f = q;
    if (n > 1) {
        s = f == 0 ? 1 : 0;
        for (Py_ssize_t q = 0; q < n; q++)
            if (q != f && x[q] < x[s]) s = q;
    }
    *first = f;
    *second = s;
}

static PyObject *rt_path(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO:path", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    Py_buffer b[5];
    if (!take_buffers(o, b, 5, 16u)) return NULL;
    const Py_ssize_t G = b[0].ndim == 2 ? b[0].shape[1] : 0;
    const Py_ssize_t T = b[1].len;
    const Py_ssize_t K = b[3].len / (Py_ssize_t)sizeof(int64_t);
    if (b[0].itemsize != 1 || b[0].len != T * G || b[2].len != T * (Py_ssize_t)sizeof(int64_t)
        || b[4].len < 4 * T * (Py_ssize_t)sizeof(int64_t)) {
        release_all(b, 5);
        PyErr_SetString(PyExc_ValueError, "path: (T, G) uint8, (T,) uint8, (T,) int64, "
                                          "(k,) int64 and (4, T) int64 buffers");
        return NULL;
    }
    const unsigned char *taken = b[0].buf, *needed = b[1].buf;
    const int64_t *budget = b[2].buf, *starts = b[3].buf;
    int64_t *out = b[4].buf;
    const Py_ssize_t n = G + 1;
    double *value = malloc(sizeof(double) * 2 * (size_t)n);
    double *next = malloc(sizeof(double) * 2 * (size_t)n);
    double *held = malloc(sizeof(double) * (size_t)n);
    int32_t *back = malloc(sizeof(int32_t) * 2 * (size_t)(T * 2 * n));
    signed char *moved = malloc((size_t)(T * 2 * n));
    unsigned char *ok = malloc((size_t)n);
    long result = -1;
    if (!value || !next || !held || !back || !moved || !ok) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < 2 * n; i++) value[i] = INFINITY;
    if (K > 0) {
        for (Py_ssize_t k = 0; k < K; k++)
            if (starts[k] >= 0 && starts[k] < G) value[starts[k]] = 0.0;
    } else {
        value[G] = 0.0;
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        for (Py_ssize_t q = 0; q < G; q++) ok[q] = !taken[t * G + q];
        ok[G] = 1;
        for (Py_ssize_t i = 0; i < 2 * n; i++) next[i] = INFINITY;
        int32_t *bk = back + (size_t)t * 2 * n * 2;
        signed char *mv = moved + (size_t)t * 2 * n;
        for (int owed = 0; owed < 2; owed++) {
            const double *row = value + owed * n;
            const int64_t room = budget[t] - owed;
            int any = 0;
            for (Py_ssize_t q = 0; q < n; q++) any |= isfinite(row[q]);
            if (room < 0 || !any) continue;
            Py_ssize_t first, second;
            two_lowest(row, G, &first, &second);
            for (Py_ssize_t q = 0; q < n; q++) {
                double c = ok[q] ? row[q] : INFINITY;
                Py_ssize_t p = q;
                int ch = 0;
                if (room >= 1) {
                    if (q < G && ok[q] && row[G] + 1.0 < c) c = row[G] + 1.0, p = G, ch = 1;
                    if (q == G && G > 0 && row[first] + 1.0 < c) c = row[first] + 1.0, p = first, ch = 1;
                }
                if (room >= 2 && G > 1 && q < G && ok[q]) {
                    const Py_ssize_t other = q == first ? second : first;
                    if (other != q && row[other] + 2.0 < c) c = row[other] + 2.0, p = other, ch = 2;
                }
                c += owed;
                if (c < next[q]) {
                    next[q] = c;
                    bk[(0 * n + q) * 2] = owed;
                    bk[(0 * n + q) * 2 + 1] = (int32_t)p;
                    mv[0 * n + q] = (signed char)ch;
                }
            }
            if (room >= 1 && G > 1) {
                for (Py_ssize_t q = 0; q < G; q++) held[q] = ok[q] ? row[q] : INFINITY;
                Py_ssize_t a, bb;
                two_lowest(held, G, &a, &bb);
                for (Py_ssize_t q = 0; q < G; q++) {
                    const Py_ssize_t other = q == a ? bb : a;
                    const double c = (ok[q] && other != q ? held[other] + 1.0 : INFINITY) + owed;
                    if (c < next[n + q]) {
                        next[n + q] = c;
                        bk[(1 * n + q) * 2] = owed;
                        bk[(1 * n + q) * 2 + 1] = (int32_t)other;
                        mv[1 * n + q] = 1;
                    }
                }
            }
        }
        int any = 0;
        for (int owe = 0; owe < 2; owe++)
            for (Py_ssize_t q = 0; q < n; q++) {
                double add = q == G ? (needed[t] ? RT_SHORT : 0.0) : (needed[t] ? 0.0 : RT_IDLE);
                value[owe * n + q] = next[owe * n + q] + add;
                any |= isfinite(value[owe * n + q]);
            }
        if (!any) goto done;
    }
    {
        int owed = 0;
        Py_ssize_t state = 0;
        double best = INFINITY;
        int found = 0;
        for (int owe = 0; owe < 2; owe++)
            for (Py_ssize_t q = 0; q < n; q++)
                if (!found || value[owe * n + q] < best) {
                    best = value[owe * n + q], owed = owe, state = q, found = 1;
                }
        for (Py_ssize_t t = T - 1; t >= 0; t--) {
            const int32_t *bk = back + (size_t)t * 2 * n * 2;
            const int before_owed = bk[(owed * n + state) * 2];
            const Py_ssize_t before = bk[(owed * n + state) * 2 + 1];
            out[t] = state;
            out[T + t] = owed;
            out[2 * T + t] = before;
            out[3 * T + t] = moved[(size_t)t * 2 * n + owed * n + state] + before_owed;
            owed = before_owed;
            state = before;
        }
        result = (long)state;
    }
done:
    free(value);
    free(next);
    free(held);
    free(back);
    free(moved);
    free(ok);
    release_all(b, 5);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromLong(result);
}

/* fast's drift layout (drift.py's `_drift_layout_py` is the reference; the same choices,
 * ties included): services laid step by step in the given order, each following its
 * curve, releasing its least preferred GPUs, acquiring the most preferred free ones, and
 * spending spare swap budget moving off aligned blocks; before step `until` (optional, 0)
 * the rank is flipped and nothing drifts. A held list keeps Python's order (stable sorts,
 * first min / first max), so the C and numpy layouts are the same. */
static Py_ssize_t most_preferred(const unsigned char *free_, const double *rank, Py_ssize_t G,
                                 const int64_t *home, int64_t not_home, double above) {
    Py_ssize_t pick = -1;
    for (Py_ssize_t g = 0; g < G; g++) {
        if (!free_[g]) continue;
        if (not_home != INT64_MIN && (home[g] == not_home || !(rank[g] > above))) continue;
        if (pick < 0 || rank[g] > rank[pick]) pick = g;
    }
    return pick;
}

static void drift_move(int64_t *held, Py_ssize_t *n, unsigned char *free_, const double *rank,
                       const int64_t *home, Py_ssize_t G, int64_t spare, int64_t limit,
                       Py_ssize_t t, Py_ssize_t T, const int64_t *curve) {
    while (*n > 0 && spare >= 1) {
        Py_ssize_t w = 0;
        for (Py_ssize_t q = 1; q < *n; q++)
            if (rank[held[q]] < rank[held[w]]) w = q;
        const int64_t worst = held[w];
        if (home[worst] < 0) return;
        const Py_ssize_t pick = most_preferred(free_, rank, G, home, home[worst], rank[worst]);
        if (pick < 0) return;
        if (spare >= 2) {
            for (Py_ssize_t q = w; q + 1 < *n; q++) held[q] = held[q + 1];
            held[*n - 1] = pick;
            free_[pick] = 0;
            spare -= 2;
            continue;
        }
        if (t + 1 >= T) return;
        const int64_t nxt = curve[t + 1], now = *n;
        if (nxt > now || now + 1 - nxt > limit) return;
        held[(*n)++] = pick;
        free_[pick] = 0;
        return;
    }
}

static PyObject *drift(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[7];
    Py_ssize_t until = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOO|n:drift", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &until))
        return NULL;
    Py_buffer b[7];
    if (!take_buffers(o, b, 7, 1u)) return NULL;
    const Py_ssize_t T = b[0].ndim == 2 ? b[0].shape[0] : 0;
    const Py_ssize_t G = b[0].ndim == 2 ? b[0].shape[1] : 0;
    const Py_ssize_t S = b[4].len / (Py_ssize_t)sizeof(int64_t);
    if (b[0].itemsize != 4 || b[0].len != T * G * 4 || b[1].len != G * (Py_ssize_t)sizeof(double)
        || b[2].len != G * (Py_ssize_t)sizeof(int64_t)
        || b[3].len != S * T * (Py_ssize_t)sizeof(int64_t)
        || b[5].len != S * (Py_ssize_t)sizeof(int64_t)
        || b[6].len != S * G * (Py_ssize_t)sizeof(int64_t)) {
        release_all(b, 7);
        PyErr_SetString(PyExc_ValueError, "drift: (T, G) int32 grid, (G,) float64 rank, (G,) "
                                          "int64 home, (S, T) int64 curves, (S,) int64 ids and "
                                          "limits, (S, G) int64 current (-1 padded)");
        return NULL;
    }
    int32_t *grid = b[0].buf;
    const double *rank_in = b[1].buf;
    const int64_t *home = b[2].buf, *curves = b[3].buf, *ids = b[4].buf, *limits = b[5].buf;
    const int64_t *current = b[6].buf;
    int64_t *held = malloc(sizeof(int64_t) * (size_t)(S * G + 1));
    Py_ssize_t *n = malloc(sizeof(Py_ssize_t) * (size_t)(S + 1));
    int64_t *released = malloc(sizeof(int64_t) * (size_t)(S + 1));
    unsigned char *free_ = malloc((size_t)G + 1);
    double *flipped = malloc(sizeof(double) * (size_t)(G + 1));
    if (!held || !n || !released || !free_ || !flipped) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t g = 0; g < G; g++) flipped[g] = -rank_in[g];
    for (Py_ssize_t s = 0; s < S; s++) {
        n[s] = 0;
        for (Py_ssize_t q = 0; q < G && current[s * G + q] >= 0; q++)
            held[s * G + n[s]++] = current[s * G + q];
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        int32_t *row = grid + t * G;
        const int early = t < until;  /* before `until`: the rank flipped, no drifting */
        const double *rank = early ? flipped : rank_in;
        for (Py_ssize_t g = 0; g < G; g++) free_[g] = row[g] == -1;
        for (Py_ssize_t s = 0; s < S; s++) {  /* releases first: the curve's falls */
            int64_t *h = held + s * G;
            const int64_t want = curves[s * T + t];
            Py_ssize_t k = 0;
            for (Py_ssize_t q = 0; q < n[s]; q++)
                if (row[h[q]] == -1) h[k++] = h[q];
            if (k > want) {
                for (Py_ssize_t q = 1; q < k; q++) {  /* stable: Python's sorted by rank */
                    const int64_t v = h[q];
                    Py_ssize_t p = q;
                    while (p > 0 && rank[h[p - 1]] > rank[v]) h[p] = h[p - 1], p--;
                    h[p] = v;
                }
                const Py_ssize_t drop = k - (want > 0 ? (Py_ssize_t)want : 0);
                for (Py_ssize_t q = drop; q < k; q++) h[q - drop] = h[q];
                k -= drop;
            }
            released[s] = n[s] - k;
            n[s] = k;
            for (Py_ssize_t q = 0; q < k; q++) free_[h[q]] = 0;
        }
        for (Py_ssize_t s = 0; s < S; s++) {
            int64_t *h = held + s * G;
            const int64_t want = curves[s * T + t];
            int64_t changes = released[s];
            while (n[s] < want && changes < limits[s]) {
                const Py_ssize_t pick = most_preferred(free_, rank, G, home, INT64_MIN, 0.0);
                if (pick < 0) break;
                h[n[s]++] = pick;
                free_[pick] = 0;
                changes++;
            }
            if (!early)
                drift_move(h, &n[s], free_, rank, home, G, limits[s] - changes, limits[s], t,
                           T, curves + s * T);
            for (Py_ssize_t q = 0; q < n[s]; q++) free_[h[q]] = 0;
        }
        for (Py_ssize_t s = 0; s < S; s++)
            for (Py_ssize_t q = 0; q < n[s]; q++) row[held[s * G + q]] = (int32_t)ids[s];
    }
done:
    free(held);
    free(n);
    free(released);
    free(free_);
    free(flipped);
    release_all(b, 7);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"counts", counts_of, METH_VARARGS, "cells per step and job of each grid."},
    {"prefer", prefer, METH_VARARGS, "realtime's GPU preference as a rank per GPU."},
    {"runs", runs_of, METH_VARARGS, "the realtime runs the layout climb may move, in order."},
    {"choose", choose, METH_VARARGS, "realtime's GPU choice for one layer interval."},
    {"stack_pick", stack_pick, METH_VARARGS, "the stacked layout's GPU for an interval."},
    {"improve", improve, METH_VARARGS, "fast's order search over the greedy decoder."},
    {"pairs", pairs, METH_VARARGS, "fast's pair moves past the order search."},
    {"front", front, METH_VARARGS, "fast's pairs brought to the front of the order."},
    {"batch", batch, METH_VARARGS, "fast's batch placement: best_of, then the order search and pair steps."},
    {"pack", pack, METH_VARARGS, "fast's greedy decoder over flat block words (T <= 63)."},
    {"climb", climb, METH_VARARGS, "fast's realtime layout climb over the greedy decoder."},
    {"top_up", top_up, METH_VARARGS, "realtime topped up from a plan's free cells."},
    {"index", index_words, METH_VARARGS, "the decoder's busy block words from a busy grid."},
    {"best_of", best_of, METH_VARARGS, "the greedy pass of each order; the best one."},
    {"hops", hops, METH_VARARGS, "realtime blocks hopped over a window while batch gains."},
    {"evacuate", evacuate, METH_VARARGS, "a block's realtime moved off it while batch gains."},
    {"write", write_grid, METH_VARARGS, "placed jobs written onto a grid."},
    {"rt_place", rt_place, METH_VARARGS, "realtime's layer intervals placed, queue and all."},
    {"layers", layers, METH_VARARGS, "realtime's held-GPU curve and its layer intervals."},
    {"decomp", decomp, METH_VARARGS, "the decomposition bound's subgradient descent."},
    {"path", rt_path, METH_VARARGS, "one realtime layer's shortest path through free cells."},
    {"drift", drift, METH_VARARGS, "fast's drift layout: services laid step by step."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_packc",
                                    "fast's compiled greedy decoder.", -1, methods};

/* Bumped whenever a signature changes: decoder.py ignores an extension built from an
 * older source (a stale in-place build) rather than call it wrongly. */
#define PACKC_ABI 30

PyMODINIT_FUNC PyInit__packc(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", PACKC_ABI) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
