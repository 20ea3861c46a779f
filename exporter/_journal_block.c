/* The journal's plainly well-formed frame and gap lines, a block of lines in one call (exporter/journal.py).
 *
 * decode(data) reads every line of ``data`` (lines end with "\n"; the last may not) and takes a line only
 * when it is a JSON object with keys from {"type", "slot", "t", "head", "left", "right"} (each at most
 * once), "type" "frame" or "gap" (a gap with no other keys than type, slot and t), "slot" an integer from
 * 0 to 2**31 - 1 without sign, fraction or exponent, "t" a number, "head" null or {"p": [3 numbers],
 * "q": [4 numbers]} and each hand null or {"joints": [25 entries, each 8 numbers or null]}, with
 * no string escape and no byte above 0x7f. Every other line is refused, and the caller gives it to the
 * journal's other paths, which decide what it holds and what is wrong with it. A line taken here is
 * one those paths take with the same values.
 *
 * Numbers are converted as Python's float() converts their text (correctly rounded): exactly by one
 * IEEE operation where the decimal's digits and power of ten are both exact doubles (Clinger's fast
 * path: up to 2**53 and 10**22), else by CPython's own PyOS_string_to_double. An integer's value is the
 * integer's (so "-0" is 0.0 and "-0.0" is -0.0, as json.loads gives them). A number beyond the double
 * range refuses its line.
 *
 * Returns (kinds, slots, times, starts, states, tips): per line a byte (1 frame, 2 gap, 0 refused), its
 * slot (int64), its t (float64) and the offset of its first byte in ``data`` (int64); for each frame taken,
 * in line order, its 410 float64 state values (head: tracked flag, p, q; then each hand: tracked flag and
 * 25 joints of 8 values; zeros where not tracked) and a byte whose bit 0 (left) or 1 (right) is set when
 * that hand is tracked but its thumb tip or index finger tip is not (its pinch distance is then 0.0).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#define JOINTS 25
#define JOINT_VALUES 8
#define HEAD_VALUES 8
#define HAND_VALUES (1 + JOINTS * JOINT_VALUES)
#define STATE_DIM (HEAD_VALUES + 2 * HAND_VALUES)
#define MAX_SLOT 2147483647LL
#define MAX_NUMBER_CHARS 80
#define THUMB_TIP 4  /* WebXR XRHand order: wrist, thumb-metacarpal, ..., thumb-tip (4), ... */
#define INDEX_TIP 9  /* ..., index-finger-tip (9), ... (exporter/features.py; a test compares them) */

enum { KEY_TYPE = 1, KEY_SLOT = 2, KEY_T = 4, KEY_HEAD = 8, KEY_LEFT = 16, KEY_RIGHT = 32 };

static const double POWERS[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

typedef struct {
    const char *p;
    const char *end;
} Cursor;

static inline void skip_space(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

static inline int take(Cursor *c, char expected) {
    skip_space(c);
    if (c->p < c->end && *c->p == expected) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A string without escapes or bytes above 0x7f; its characters in [*start, *start + *length). */
static int string(Cursor *c, const char **start, Py_ssize_t *length) {
    if (!take(c, '"')) return 0;
    const char *begin = c->p;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            *start = begin;
            *length = c->p - begin;
            c->p++;
            return 1;
        }
        if (ch == '\\' || ch < 0x20 || ch > 0x7f) return 0;
        c->p++;
    }
    return 0;
}

static inline int is_word(const char *start, Py_ssize_t length, const char *word) {
    return (size_t)length == strlen(word) && memcmp(start, word, (size_t)length) == 0;
}

static int null(Cursor *c) {
    skip_space(c);
    if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) {
        c->p += 4;
        return 1;
    }
    return 0;
}

/* A JSON number, converted as float() converts its text; 0 when the text is not a JSON number or its
 * value is not a finite double. ``integer`` (may be NULL) is set when it is an integer literal of at
 * most 18 digits, and ``whole`` to its value. */
static int number(Cursor *c, double *value, int *integer, int64_t *whole) {
    skip_space(c);
    const char *begin = c->p;
    const char *p = c->p;
    const char *end = c->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') return 0;
    uint64_t mantissa = 0;
    int digits = 0; /* significant digits in the mantissa (leading zeros left out) */
    int dropped = 0; /* significant digits beyond 19: the fast path cannot be used */
    int exponent = 0;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') return 0; /* no leading zero */
    } else {
        while (p < end && *p >= '0' && *p <= '9') {
            if (digits < 19) {
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                dropped = 1;
                exponent++;
            }
            p++;
        }
    }
    int literal_integer = 1;
    if (p < end && *p == '.') {
        literal_integer = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (mantissa == 0 && *p == '0') {
                exponent--; /* a leading zero of the fraction */
            } else if (digits < 19) {
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
                digits++;
                exponent--;
            } else {
                dropped = 1;
            }
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        literal_integer = 0;
        p++;
        int exponent_negative = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            exponent_negative = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') return 0;
        int written = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (written < 100000) written = written * 10 + (*p - '0');
            p++;
        }
        exponent += exponent_negative ? -written : written;
    }
    c->p = p;
    if (integer != NULL) {
        *integer = literal_integer && !dropped && digits <= 18;
        if (*integer) *whole = negative ? -(int64_t)mantissa : (int64_t)mantissa;
    }
    if (literal_integer && !dropped && digits <= 15) { /* an int's value: "-0" is 0.0 */
        int64_t signed_value = negative ? -(int64_t)mantissa : (int64_t)mantissa;
        *value = (double)signed_value;
        return 1;
    }
    if (!dropped && mantissa <= (1ULL << 53) && exponent >= -22 && exponent <= 22) {
        double result = (double)mantissa; /* exact */
        result = exponent < 0 ? result / POWERS[-exponent] : result * POWERS[exponent];
        *value = negative ? -result : result;
        if (!isfinite(*value)) return 0;
        return 1;
    }
    /* CPython's correctly rounded conversion, on a terminated copy of the number's text */
    Py_ssize_t length = p - begin;
    if (length >= MAX_NUMBER_CHARS) return 0;
    char text[MAX_NUMBER_CHARS];
    memcpy(text, begin, (size_t)length);
    text[length] = '\0';
    char *stop = NULL;
    double converted = PyOS_string_to_double(text, &stop, NULL);
    if (converted == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != text + length || !isfinite(converted)) return 0;
    *value = converted;
    return 1;
}

/* An array of exactly ``count`` numbers, written to ``out``. */
static int numbers(Cursor *c, int count, double *out) {
    if (!take(c, '[')) return 0;
    for (int i = 0; i < count; i++) {
        if (i && !take(c, ',')) return 0;
        if (!number(c, &out[i], NULL, NULL)) return 0;
    }
    return take(c, ']');
}

/* {"p": [3], "q": [4]} in either order, into head[1..7]. */
static int pose(Cursor *c, double *head) {
    if (!take(c, '{')) return 0;
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        if (i && !take(c, ',')) return 0;
        const char *key;
        Py_ssize_t length;
        if (!string(c, &key, &length) || !take(c, ':')) return 0;
        if (is_word(key, length, "p") && !(seen & 1)) {
            if (!numbers(c, 3, head + 1)) return 0;
            seen |= 1;
        } else if (is_word(key, length, "q") && !(seen & 2)) {
            if (!numbers(c, 4, head + 4)) return 0;
            seen |= 2;
        } else {
            return 0;
        }
    }
    if (!take(c, '}')) return 0;
    head[0] = 1.0;
    return 1;
}

/* {"joints": [25 x ([8] or null)]} into hand[0..200] (an untracked joint: zeros); ``untracked_tip`` is set
 * when the thumb's or the index finger's tip is untracked (no pinch distance). */
static int hand(Cursor *c, double *out, int *untracked_tip) {
    const char *key;
    Py_ssize_t length;
    if (!take(c, '{') || !string(c, &key, &length) || !is_word(key, length, "joints") || !take(c, ':')) return 0;
    if (!take(c, '[')) return 0;
    for (int j = 0; j < JOINTS; j++) {
        if (j && !take(c, ',')) return 0;
        if (null(c)) {
            if (j == THUMB_TIP || j == INDEX_TIP) *untracked_tip = 1;
            continue;
        }
        if (!numbers(c, JOINT_VALUES, out + 1 + j * JOINT_VALUES)) return 0;
    }
    if (!take(c, ']') || !take(c, '}')) return 0;
    out[0] = 1.0;
    return 1;
}

/* One line; 1 for a frame (its state in ``state``, and in ``tips`` bit 0 or 1 set when the left or right
 * hand has no pinch distance for an untracked tip), 2 for a gap, 0 refused. */
static int line(Cursor *c, int64_t *slot, double *t, double *state, char *tips) {
    memset(state, 0, STATE_DIM * sizeof(double));
    *tips = 0;
    if (!take(c, '{')) return 0;
    int seen = 0;
    int kind = 0;
    for (int i = 0;; i++) {
        if (i) {
            if (take(c, '}')) break;
            if (!take(c, ',')) return 0;
        } else if (take(c, '}')) {
            return 0;
        }
        const char *key;
        Py_ssize_t length;
        if (!string(c, &key, &length) || !take(c, ':')) return 0;
        int which;
        if (is_word(key, length, "type")) which = KEY_TYPE;
        else if (is_word(key, length, "slot")) which = KEY_SLOT;
        else if (is_word(key, length, "t")) which = KEY_T;
        else if (is_word(key, length, "head")) which = KEY_HEAD;
        else if (is_word(key, length, "left")) which = KEY_LEFT;
        else if (is_word(key, length, "right")) which = KEY_RIGHT;
        else return 0;
        if (seen & which) return 0; /* a duplicate key */
        seen |= which;
        if (which == KEY_TYPE) {
            const char *value;
            Py_ssize_t size;
            if (!string(c, &value, &size)) return 0;
            if (is_word(value, size, "frame")) kind = 1;
            else if (is_word(value, size, "gap")) kind = 2;
            else return 0;
        } else if (which == KEY_SLOT) {
            double unused;
            int integer = 0;
            int64_t whole = 0;
            skip_space(c);
            if (c->p < c->end && *c->p == '-') return 0;
            if (!number(c, &unused, &integer, &whole) || !integer || whole < 0 || whole > MAX_SLOT) return 0;
            *slot = whole;
        } else if (which == KEY_T) {
            if (!number(c, t, NULL, NULL)) return 0;
        } else if (null(c)) {
            /* untracked: zeros */
        } else if (which == KEY_HEAD) {
            if (!pose(c, state)) return 0;
        } else {
            int untracked_tip = 0;
            int right = which == KEY_RIGHT;
            if (!hand(c, state + HEAD_VALUES + (right ? HAND_VALUES : 0), &untracked_tip)) return 0;
            if (untracked_tip) *tips |= (char)(right ? 2 : 1);
        }
    }
    skip_space(c);
    if (c->p != c->end) return 0; /* something after the object */
    if (!(seen & KEY_TYPE) || !(seen & KEY_SLOT) || !(seen & KEY_T)) return 0;
    if (kind == 2 && (seen & (KEY_HEAD | KEY_LEFT | KEY_RIGHT))) return 0;
    return kind;
}

static PyObject *decode(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf;
    Py_ssize_t size = view.len;
    Py_ssize_t lines = 0;
    for (const char *p = data; p < data + size; lines++) {
        const char *newline = memchr(p, '\n', (size_t)(data + size - p));
        p = newline ? newline + 1 : data + size;
    }
    PyObject *kinds = PyBytes_FromStringAndSize(NULL, lines);
    PyObject *slots = PyBytes_FromStringAndSize(NULL, lines * (Py_ssize_t)sizeof(int64_t));
    PyObject *times = PyBytes_FromStringAndSize(NULL, lines * (Py_ssize_t)sizeof(double));
    PyObject *starts = PyBytes_FromStringAndSize(NULL, lines * (Py_ssize_t)sizeof(int64_t));
    /* room for the states of frames taken, grown as they come (a block of gap lines needs none) */
    Py_ssize_t room = lines < 256 ? lines : 256;
    PyObject *states = PyByteArray_FromStringAndSize(NULL, room * (Py_ssize_t)(STATE_DIM * sizeof(double)));
    PyObject *tips = PyByteArray_FromStringAndSize(NULL, lines);
    if (!kinds || !slots || !times || !starts || !states || !tips) goto failed;
    char *kind_out = PyBytes_AS_STRING(kinds);
    int64_t *slot_out = (int64_t *)PyBytes_AS_STRING(slots);
    double *time_out = (double *)PyBytes_AS_STRING(times);
    int64_t *start_out = (int64_t *)PyBytes_AS_STRING(starts);
    char *tip_out = PyByteArray_AS_STRING(tips);
    Py_ssize_t frames = 0;
    const char *p = data;
    for (Py_ssize_t i = 0; i < lines; i++) {
        const char *newline = memchr(p, '\n', (size_t)(data + size - p));
        const char *stop = newline ? newline : data + size;
        Cursor cursor = {p, stop};
        int64_t slot = 0;
        double t = 0.0;
        if (frames == room) {
            room = room * 2 < lines ? room * 2 : lines;
            if (PyByteArray_Resize(states, room * (Py_ssize_t)(STATE_DIM * sizeof(double))) < 0) {
                PyBuffer_Release(&view);
                view.obj = NULL;
                goto failed;
            }
        }
        double *state_out = (double *)PyByteArray_AS_STRING(states);
        int kind = line(&cursor, &slot, &t, state_out + frames * STATE_DIM, tip_out + frames);
        kind_out[i] = (char)kind;
        slot_out[i] = kind ? slot : 0;
        time_out[i] = kind ? t : 0.0;
        start_out[i] = p - data;
        if (kind == 1) frames++;
        p = newline ? newline + 1 : data + size;
    }
    PyBuffer_Release(&view);
    if (PyByteArray_Resize(states, frames * (Py_ssize_t)(STATE_DIM * sizeof(double))) < 0 ||
        PyByteArray_Resize(tips, frames) < 0) {
        view.obj = NULL;
        goto failed;
    }
    return Py_BuildValue("(NNNNNN)", kinds, slots, times, starts, states, tips);
failed:
    if (view.obj != NULL) PyBuffer_Release(&view);
    Py_XDECREF(kinds);
    Py_XDECREF(slots);
    Py_XDECREF(times);
    Py_XDECREF(starts);
    Py_XDECREF(states);
    Py_XDECREF(tips);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_O,
     "decode(data) -> (kinds, slots, times, starts, states, tips): the plainly well-formed frame and gap lines of a "
     "block of journal lines (see the module's source for what is taken)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_journal_block", "The journal's well-formed lines, a block at a time.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__journal_block(void) {
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && (PyModule_AddIntConstant(created, "STATE_DIM", STATE_DIM) < 0 ||
                            PyModule_AddIntConstant(created, "THUMB_TIP", THUMB_TIP) < 0 ||
                            PyModule_AddIntConstant(created, "INDEX_TIP", INDEX_TIP) < 0)) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
