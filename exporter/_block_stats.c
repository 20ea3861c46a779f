/* The exact statistics of float32 rows (exporter/stats.py): their order statistics and their moments.
 *
 * select(block, kth, out) takes ``block``, a C-contiguous float32 buffer shaped (rows, count), a sorted
 * tuple of distinct positions 0 <= p < count, and ``out``, a writable C-contiguous float32 buffer shaped
 * (rows, len(kth)); it writes to out[r][j] the value that sorting row r would put at position kth[j]
 * (what numpy's partition leaves there) and leaves ``block`` as it is. It returns the list of rows it
 * left to the caller: a row holding a NaN, and a row holding both -0.0 and +0.0 where a selected value
 * is a zero. Those compare equal, so which of the two numpy's partition leaves at a position depends on
 * its algorithm; the caller selects those rows with numpy, so the figures stay bit for bit numpy's.
 *
 * Each row is read twice, without moving it: once to count its values by the top 16 bits of an
 * order-preserving key (the float's bits, with the sign flipped for positive values and every bit
 * flipped for negative ones), once to gather the low 16 bits of the values in the buckets that hold a
 * wanted position. Each such bucket is sorted by a two-pass radix sort, and the wanted values are read
 * from it. The time is linear in the row's length whatever its values; the interpreter's lock is
 * released while rows are selected.
 *
 * moments(block, mean, std) writes each row's mean and population standard deviation to the float64
 * buffers ``mean`` and ``std`` (rows,): the sums are float64, in row order from +0.0, as numpy sums the
 * columns of a C-ordered (count, rows) array, and the deviations are squared and summed so too (the
 * module is compiled without fused multiply-adds), so the figures are numpy's mean and std of that
 * array, bit for bit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 65536
#define NO_SLOT 0xFFFF
#define MINUS_ZERO_KEY 0x7FFFFFFFu
#define PLUS_ZERO_KEY 0x80000000u

static inline uint32_t key_of(uint32_t bits) { return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u); }

static inline uint32_t bits_of(uint32_t key) { return (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key; }

typedef struct {
    uint32_t *counts;   /* 2 * BUCKETS */
    uint64_t *member;   /* BUCKETS bits: the buckets of wanted positions */
    uint16_t *slot_of;  /* BUCKETS, NO_SLOT but for the buckets of wanted positions */
    uint16_t *low;      /* count: the gathered buckets' low 16 bits, bucket after bucket */
    uint16_t *spare;    /* count: the radix sort's other half */
    Py_ssize_t *bucket; /* per wanted position: its bucket */
    Py_ssize_t *rank;   /* per wanted position: its rank within the bucket */
    Py_ssize_t *start;  /* per slot: where its bucket's values start in ``low`` */
    Py_ssize_t *size;   /* per slot: how many values its bucket holds */
    Py_ssize_t *fill;   /* per slot: where its next value goes */
    uint16_t *slot_bucket;
} Work;

static void sort_low(uint16_t *values, uint16_t *spare, Py_ssize_t n) {
    Py_ssize_t low[257], high[257];
    memset(low, 0, sizeof(low));
    memset(high, 0, sizeof(high));
    for (Py_ssize_t i = 0; i < n; i++) {
        low[(values[i] & 0xFF) + 1]++;
        high[(values[i] >> 8) + 1]++;
    }
    for (int d = 0; d < 256; d++) {
        low[d + 1] += low[d];
        high[d + 1] += high[d];
    }
    for (Py_ssize_t i = 0; i < n; i++) spare[low[values[i] & 0xFF]++] = values[i];
    for (Py_ssize_t i = 0; i < n; i++) values[high[spare[i] >> 8]++] = spare[i];
}

/* 0: done; 1: left to the caller. */
static int select_row(const uint32_t *row, Py_ssize_t count, const Py_ssize_t *kth, Py_ssize_t wanted,
                      float *out, Work *w) {
    /* two histograms, for the even and the odd values: neighbouring values of a recording often share a
       bucket, and one counter incremented twice in a row waits for its own store */
    uint32_t *even = w->counts, *odd = w->counts + BUCKETS;
    memset(w->counts, 0, 2 * BUCKETS * sizeof(uint32_t));
    uint32_t nan = 0, minus_zero = 0, plus_zero = 0;
    Py_ssize_t i = 0;
    for (; i + 1 < count; i += 2) {
        uint32_t a = row[i], b = row[i + 1];
        nan |= ((a & 0x7FFFFFFFu) > 0x7F800000u) | ((b & 0x7FFFFFFFu) > 0x7F800000u);
        minus_zero |= (a == 0x80000000u) | (b == 0x80000000u);
        plus_zero |= (a == 0u) | (b == 0u);
        even[key_of(a) >> 16]++;
        odd[key_of(b) >> 16]++;
    }
    if (i < count) {
        uint32_t a = row[i];
        nan |= (a & 0x7FFFFFFFu) > 0x7F800000u;
        minus_zero |= a == 0x80000000u;
        plus_zero |= a == 0u;
        even[key_of(a) >> 16]++;
    }
    if (nan) return 1;
    /* the bucket and the rank within it of each wanted position (kth is sorted) */
    Py_ssize_t below = 0, j = 0, slots = 0;
    for (Py_ssize_t b = 0; b < BUCKETS && j < wanted; b++) {
        Py_ssize_t here = (Py_ssize_t)even[b] + odd[b];
        if (here == 0) continue;
        if (kth[j] < below + here) {
            w->start[slots] = slots ? w->start[slots - 1] + w->size[slots - 1] : 0;
            w->size[slots] = here;
            w->fill[slots] = w->start[slots];
            w->slot_bucket[slots] = (uint16_t)b;
            w->slot_of[b] = (uint16_t)slots;
            w->member[b >> 6] |= (uint64_t)1 << (b & 63);
            while (j < wanted && kth[j] < below + here) {
                w->bucket[j] = slots;
                w->rank[j] = kth[j] - below;
                j++;
            }
            slots++;
        }
        below += here;
    }
    /* the low halves of the values in those buckets, gathered bucket by bucket (a bitmap that stays in the
       first-level cache says which buckets) */
    for (i = 0; i < count; i++) {
        uint32_t key = key_of(row[i]);
        uint32_t top = key >> 16;
        if (w->member[top >> 6] & ((uint64_t)1 << (top & 63))) w->low[w->fill[w->slot_of[top]]++] = (uint16_t)key;
    }
    for (Py_ssize_t s = 0; s < slots; s++) {
        uint16_t b = w->slot_bucket[s];
        w->slot_of[b] = NO_SLOT;
        w->member[b >> 6] = 0;
        if (w->size[s] > 1) sort_low(w->low + w->start[s], w->spare, w->size[s]);
    }
    int zero = 0;
    for (Py_ssize_t k = 0; k < wanted; k++) {
        Py_ssize_t s = w->bucket[k];
        uint32_t key = ((uint32_t)w->slot_bucket[s] << 16) | w->low[w->start[s] + w->rank[k]];
        zero |= key == MINUS_ZERO_KEY || key == PLUS_ZERO_KEY;
        uint32_t bits = bits_of(key);
        memcpy(out + k, &bits, sizeof(bits));
    }
    return zero && minus_zero && plus_zero;
}

static PyObject *select_(PyObject *self, PyObject *args) {
    PyObject *block_obj, *kth_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OO!O:select", &block_obj, &PyTuple_Type, &kth_obj, &out_obj)) return NULL;
    Py_buffer block = {0}, out = {0};
    Py_ssize_t *kth = NULL;
    PyObject *left = NULL;
    Work w = {0};
    if (PyObject_GetBuffer(block_obj, &block, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    if (block.ndim != 2 || block.itemsize != 4 || strcmp(block.format, "f") != 0 || out.ndim != 2 ||
        out.itemsize != 4 || strcmp(out.format, "f") != 0) {
        PyErr_SetString(PyExc_TypeError, "select: block and out must be 2-D C-contiguous float32 buffers");
        goto done;
    }
    Py_ssize_t rows = block.shape[0], count = block.shape[1], wanted = PyTuple_GET_SIZE(kth_obj);
    if (out.shape[0] != rows || out.shape[1] != wanted) {
        PyErr_SetString(PyExc_ValueError, "select: out must be shaped (rows, len(kth))");
        goto done;
    }
    if (count > (Py_ssize_t)UINT32_MAX) {  /* the buckets' counters are 32-bit */
        PyErr_SetString(PyExc_ValueError, "select: rows of more than 2**32 - 1 values");
        goto done;
    }
    if (wanted > NO_SLOT) {
        PyErr_SetString(PyExc_ValueError, "select: too many positions");
        goto done;
    }
    kth = PyMem_Malloc((size_t)(wanted ? wanted : 1) * sizeof(Py_ssize_t));
    if (kth == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < wanted; j++) {
        kth[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(kth_obj, j));
        if (kth[j] == -1 && PyErr_Occurred()) goto done;
        if (kth[j] < 0 || kth[j] >= count || (j && kth[j] <= kth[j - 1])) {
            PyErr_SetString(PyExc_ValueError, "select: kth must be sorted distinct positions within the rows");
            goto done;
        }
    }
    left = PyList_New(0);
    if (left == NULL) goto done;
    size_t positions = (size_t)(wanted ? wanted : 1), length = (size_t)(count ? count : 1);
    w.counts = malloc(2 * BUCKETS * sizeof(uint32_t));
    w.member = calloc(BUCKETS / 64, sizeof(uint64_t));
    w.size = malloc(positions * sizeof(Py_ssize_t));
    w.slot_of = malloc(BUCKETS * sizeof(uint16_t));
    w.low = malloc(length * sizeof(uint16_t));
    w.spare = malloc(length * sizeof(uint16_t));
    w.bucket = malloc(positions * sizeof(Py_ssize_t));
    w.rank = malloc(positions * sizeof(Py_ssize_t));
    w.start = malloc(positions * sizeof(Py_ssize_t));
    w.fill = malloc(positions * sizeof(Py_ssize_t));
    w.slot_bucket = malloc(positions * sizeof(uint16_t));
    if (!w.counts || !w.member || !w.size || !w.slot_of || !w.low || !w.spare || !w.bucket || !w.rank || !w.start || !w.fill ||
        !w.slot_bucket) {
        Py_CLEAR(left);
        PyErr_NoMemory();
        goto done;
    }
    memset(w.slot_of, 0xFF, BUCKETS * sizeof(uint16_t));
    char *flags = calloc((size_t)(rows ? rows : 1), 1);
    if (flags == NULL) {
        Py_CLEAR(left);
        PyErr_NoMemory();
        goto done;
    }
    if (wanted > 0 && count > 0) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows; r++)
            flags[r] = (char)select_row((const uint32_t *)block.buf + r * count, count, kth, wanted,
                                        (float *)out.buf + r * wanted, &w);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        if (!flags[r]) continue;
        PyObject *index = PyLong_FromSsize_t(r);
        if (index == NULL || PyList_Append(left, index) < 0) {
            Py_XDECREF(index);
            Py_CLEAR(left);
            break;
        }
        Py_DECREF(index);
    }
    free(flags);
done:
    free(w.counts);
    free(w.member);
    free(w.size);
    free(w.slot_of);
    free(w.low);
    free(w.spare);
    free(w.bucket);
    free(w.rank);
    free(w.start);
    free(w.fill);
    free(w.slot_bucket);
    PyMem_Free(kth);
    if (out.obj != NULL) PyBuffer_Release(&out);
    PyBuffer_Release(&block);
    return left;
}

#define GROUP 8

/* The float64 sums of each of ``rows`` rows of ``count`` values from ``x``, each added in row order from
   +0.0, as numpy sums the columns of a C-ordered (count, rows) array; with ``mean``, the sums of the
   squared deviations from each row's mean. GROUP rows are summed side by side, so that the additions
   of different rows overlap. */
static void sums(const float *x, Py_ssize_t rows, Py_ssize_t count, const double *mean, double *out) {
    Py_ssize_t r = 0;
    for (; r + GROUP <= rows; r += GROUP) {
        double total[GROUP] = {0.0}, centre[GROUP] = {0.0};
        const float *first = x + r * count;
        if (mean != NULL)
            for (int g = 0; g < GROUP; g++) centre[g] = mean[r + g];
        if (mean == NULL) {
            for (Py_ssize_t i = 0; i < count; i++)
                for (int g = 0; g < GROUP; g++) total[g] += (double)first[g * count + i];
        } else {
            for (Py_ssize_t i = 0; i < count; i++)
                for (int g = 0; g < GROUP; g++) {
                    double deviation = (double)first[g * count + i] - centre[g];
                    double square = deviation * deviation;
                    total[g] += square;
                }
        }
        for (int g = 0; g < GROUP; g++) out[r + g] = total[g];
    }
    for (; r < rows; r++) {
        double total = 0.0;
        const float *row = x + r * count;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (mean == NULL) {
                total += (double)row[i];
            } else {
                double deviation = (double)row[i] - mean[r];
                double square = deviation * deviation;
                total += square;
            }
        }
        out[r] = total;
    }
}

static PyObject *moments(PyObject *self, PyObject *args) {
    PyObject *block_obj, *mean_obj, *std_obj;
    if (!PyArg_ParseTuple(args, "OOO:moments", &block_obj, &mean_obj, &std_obj)) return NULL;
    Py_buffer block = {0}, mean = {0}, std = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(block_obj, &block, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(mean_obj, &mean, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    if (PyObject_GetBuffer(std_obj, &std, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    if (block.ndim != 2 || block.itemsize != 4 || strcmp(block.format, "f") != 0 || mean.ndim != 1 ||
        mean.itemsize != 8 || strcmp(mean.format, "d") != 0 || std.ndim != 1 || std.itemsize != 8 ||
        strcmp(std.format, "d") != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "moments: block must be a 2-D C-contiguous float32 buffer, mean and std 1-D float64 ones");
        goto done;
    }
    Py_ssize_t rows = block.shape[0], count = block.shape[1];
    if (mean.shape[0] != rows || std.shape[0] != rows || count == 0) {
        PyErr_SetString(PyExc_ValueError, "moments: mean and std must be shaped (rows,), and the rows not empty");
        goto done;
    }
    double *mean_out = mean.buf, *std_out = std.buf;
    Py_BEGIN_ALLOW_THREADS
    sums(block.buf, rows, count, NULL, mean_out);
    for (Py_ssize_t r = 0; r < rows; r++) mean_out[r] /= (double)count;
    sums(block.buf, rows, count, mean_out, std_out);
    for (Py_ssize_t r = 0; r < rows; r++) std_out[r] = sqrt(std_out[r] / (double)count);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    if (std.obj != NULL) PyBuffer_Release(&std);
    if (mean.obj != NULL) PyBuffer_Release(&mean);
    PyBuffer_Release(&block);
    return result;
}

static PyMethodDef methods[] = {
    {"select", select_, METH_VARARGS,
     "select(block, kth, out) -> rows left to the caller: the order statistics at the sorted positions kth of each "
     "row of a (rows, count) float32 block, written to out (rows, len(kth)); see the module's source."},
    {"moments", moments, METH_VARARGS,
     "moments(block, mean, std): the mean and population standard deviation of each row of a (rows, count) float32 "
     "block, written to the float64 buffers mean and std shaped (rows,); see the module's source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_block_stats", "The exact statistics of float32 rows: order statistics and moments.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__block_stats(void) { return PyModule_Create(&module); }
