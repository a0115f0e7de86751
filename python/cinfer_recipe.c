/* cinfer_recipe.c - CPython extension `cinfer_recipe`: the recipe library
 * (include/cinfer/recipe.h) from Python. C API only; JSON crosses the boundary
 * as text (dicts go through the stdlib `json` module), so the extension needs no
 * third-party Python package. Exposes request/response conversion between the
 * three APIs, the canonical-request dump, API error bodies, parser detection, an
 * incremental OutputParser and a StreamEncoder producing SSE text.
 * Built by python/setup.py, tested by tests/python/test_recipe.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "cinfer/recipe.h"
#include "recipe/recipe_json.h"

static PyObject *g_json_mod; /* the stdlib json module (module state is immutable after init) */
static PyObject *g_error_type; /* cinfer_recipe.RecipeError */

/* ---------------------------------------------------------------- JSON bridging */

/* str/bytes/dict/list -> JSON text (a new str); sets *was_text when the input was text. */
static PyObject *to_text(PyObject *o, int *was_text) {
    *was_text = PyUnicode_Check(o) || PyBytes_Check(o);
    if (PyUnicode_Check(o)) return Py_NewRef(o);
    if (PyBytes_Check(o)) return PyUnicode_FromEncodedObject(o, "utf-8", "strict");
    return PyObject_CallMethod(g_json_mod, "dumps", "O", o);
}

/* str/bytes/dict/list -> json_t (new ref); sets *was_text when the input was text. */
static json_t *to_json(PyObject *o, int *was_text) {
    PyObject *text = to_text(o, was_text);
    if (!text) return NULL;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    if (!s) {
        Py_DECREF(text);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(s, (size_t)n, 0, &je);
    Py_DECREF(text);
    if (!j) PyErr_Format(PyExc_ValueError, "invalid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    return j;
}

/* json_t -> str (as_text) or Python object; steals j. */
static PyObject *from_json(json_t *j, int as_text) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    if (!s) return PyErr_NoMemory();
    PyObject *text = PyUnicode_FromString(s);
    free(s);
    if (!text || as_text) return text;
    PyObject *o = PyObject_CallMethod(g_json_mod, "loads", "O", text);
    Py_DECREF(text);
    return o;
}

/* JSON text -> str (as_text) or Python object */
static PyObject *from_text(const char *s, size_t n, int as_text) {
    PyObject *text = PyUnicode_FromStringAndSize(s, (Py_ssize_t)n);
    if (!text || as_text) return text;
    PyObject *o = PyObject_CallMethod(g_json_mod, "loads", "O", text);
    Py_DECREF(text);
    return o;
}

static int api_arg(const char *name) {
    int a = recipe_api_from_name(name);
    if (a < 0) PyErr_Format(PyExc_ValueError, "unknown API '%s' (chat, messages, responses)", name);
    return a;
}

static PyObject *raise_recipe(recipe_api api, const recipe_error *e) {
    json_t *body = recipe_error_body(api, e, NULL);
    PyObject *pybody = from_json(body, 0);
    PyObject *exc = PyObject_CallFunction(g_error_type, "s", e->message);
    if (exc && pybody) {
        PyObject *status = PyLong_FromLong(recipe_error_status(api, e)), *param = PyUnicode_FromString(e->param);
        if (status && param && !PyObject_SetAttrString(exc, "status", status) &&
            !PyObject_SetAttrString(exc, "param", param) && !PyObject_SetAttrString(exc, "body", pybody))
            PyErr_SetObject(g_error_type, exc);
        Py_XDECREF(status);
        Py_XDECREF(param);
    }
    Py_XDECREF(exc);
    Py_XDECREF(pybody);
    return NULL;
}

/* ---------------------------------------------------------------- functions */

/* Parses body (str/bytes/dict) as a request of api into r (recipe's own JSON reader).
 * 0, or -1 with a Python exception: ValueError for text that is not JSON, RecipeError else. */
static int parse_request_obj_flags(PyObject *body, recipe_api api, unsigned flags, recipe_request *r, int *as_text) {
    PyObject *text = to_text(body, as_text);
    if (!text) return -1;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    recipe_error err;
    int rc = s ? recipe_request_parse_text(api, s, (size_t)n, flags, r, &err) : -1;
    Py_DECREF(text);
    if (!s) return -1;
    if (rc) {
        if (!strncmp(err.message, "the body is not valid JSON", 26))
            PyErr_Format(PyExc_ValueError, "invalid JSON: %s", err.message + 28);
        else raise_recipe(api, &err);
    }
    return rc;
}

static int parse_request_obj(PyObject *body, recipe_api api, recipe_request *r, int *as_text) {
    return parse_request_obj_flags(body, api, 0, r, as_text);
}

static PyObject *py_convert_request(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"body", "from_api", "to_api", NULL};
    PyObject *body;
    const char *from, *to;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oss", kwl, &body, &from, &to)) return NULL;
    int fa = api_arg(from), ta = fa < 0 ? -1 : api_arg(to);
    if (ta < 0) return NULL;
    int as_text;
    recipe_request r;
    recipe_request_init(&r);
    PyObject *res = NULL;
    if (!parse_request_obj(body, (recipe_api)fa, &r, &as_text)) {
        recipe_buf out = {0};
        recipe_error err;
        res = recipe_request_encode_text((recipe_api)ta, &r, &out, &err) ? raise_recipe((recipe_api)fa, &err)
                                                                         : from_text(out.data, out.len, as_text);
        recipe_buf_free(&out);
    }
    recipe_request_free(&r);
    return res;
}

static PyObject *py_parse_request(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"body", "api", NULL};
    PyObject *body;
    const char *api;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os", kwl, &body, &api)) return NULL;
    bool completions = !strcmp(api, "completions"); /* OpenAI Completions: RECIPE_PARSE_COMPLETIONS */
    int a = completions ? RECIPE_API_CHAT : api_arg(api);
    if (a < 0) return NULL;
    int as_text;
    recipe_request r;
    recipe_request_init(&r);
    PyObject *res =
        parse_request_obj_flags(body, (recipe_api)a, completions ? RECIPE_PARSE_COMPLETIONS : 0u, &r, &as_text)
            ? NULL
            : from_json(recipe_request_dump(&r), as_text);
    recipe_request_free(&r);
    return res;
}

static PyObject *py_convert_response(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"body", "from_api", "to_api", "request", "request_api", NULL};
    PyObject *body, *reqo = Py_None;
    const char *from, *to, *req_api = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oss|Oz", kwl, &body, &from, &to, &reqo, &req_api)) return NULL;
    int fa = api_arg(from), ta = fa < 0 ? -1 : api_arg(to);
    if (ta < 0) return NULL;
    int as_text, dummy;
    json_t *j = to_json(body, &as_text);
    if (!j) return NULL;
    recipe_request req;
    recipe_request_init(&req);
    recipe_error err;
    bool have_req = false;
    PyObject *res = NULL;
    if (reqo != Py_None) {
        int ra = api_arg(req_api ? req_api : to);
        if (ra < 0 || parse_request_obj(reqo, (recipe_api)ra, &req, &dummy)) goto out;
        have_req = true;
    }
    recipe_response r;
    recipe_response_init(&r);
    if (recipe_response_parse((recipe_api)fa, j, &r, &err)) res = raise_recipe((recipe_api)fa, &err);
    else {
        json_t *o = recipe_response_encode((recipe_api)ta, &r, have_req ? &req : NULL, &err);
        res = o ? from_json(o, as_text) : raise_recipe((recipe_api)ta, &err);
    }
    recipe_response_free(&r);
out:
    recipe_request_free(&req);
    json_decref(j);
    return res;
}

static PyObject *py_error_body(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"api", "kind", "message", "param", "request_id", NULL};
    static const char *kinds[] = {"invalid_request", "context_length", "authentication", "permission", "not_found",
                                  "too_large",       "rate_limit",     "server",         "overloaded"};
    const char *api, *kind, *msg, *param = NULL, *rid = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sss|zz", kwl, &api, &kind, &msg, &param, &rid)) return NULL;
    int a = api_arg(api);
    if (a < 0) return NULL;
    recipe_error e;
    int k = -1;
    for (int i = 0; i < RECIPE_ERR_COUNT; i++)
        if (!strcmp(kind, kinds[i])) k = i;
    if (k < 0) return PyErr_Format(PyExc_ValueError, "unknown error kind '%s'", kind);
    recipe_fail(&e, (recipe_err_kind)k, param, "%s", msg);
    PyObject *body = from_json(recipe_error_body((recipe_api)a, &e, rid), 0);
    if (!body) return NULL;
    return Py_BuildValue("(iN)", recipe_error_status((recipe_api)a, &e), body);
}

static PyObject *py_detect_parser(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"template", "arch", NULL};
    const char *t = NULL, *arch = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zz", kwl, &t, &arch)) return NULL;
    return PyUnicode_FromString(recipe_parser_name(recipe_parser_detect(t, arch)));
}

/* ---------------------------------------------------------------- events */

static PyObject *event_dict(const recipe_event *e) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    PyObject *v = PyUnicode_FromString(recipe_event_type_name(e->type));
    PyDict_SetItemString(d, "type", v);
    Py_XDECREF(v);
    if (e->type == RECIPE_EV_TOOL_BEGIN || e->type == RECIPE_EV_TOOL_ARGS || e->type == RECIPE_EV_TOOL_END) {
        v = PyLong_FromLong(e->index);
        PyDict_SetItemString(d, "index", v);
        Py_XDECREF(v);
    }
    if (e->type == RECIPE_EV_TOOL_BEGIN) {
        v = PyUnicode_FromString(e->id ? e->id : "");
        PyDict_SetItemString(d, "id", v);
        Py_XDECREF(v);
        v = PyUnicode_FromString(e->name ? e->name : "");
        PyDict_SetItemString(d, "name", v);
        Py_XDECREF(v);
    } else if (e->text) {
        v = PyUnicode_DecodeUTF8(e->text, (Py_ssize_t)e->len, "replace");
        PyDict_SetItemString(d, "text", v);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *event_list(const recipe_event *ev, size_t n) {
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = event_dict(&ev[i]);
        if (!d) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

/* ---------------------------------------------------------------- OutputParser */

typedef struct {
    PyObject_HEAD recipe_parser *p;
} ParserObject;

static int parser_init(ParserObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"kind", "in_reasoning", "tools", "seed", NULL};
    const char *kind;
    int in_reasoning = 0, tools = 1;
    PyObject *seed = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|ppO", kwl, &kind, &in_reasoning, &tools, &seed)) return -1;
    int k = recipe_parser_from_name(kind);
    if (k < 0) {
        PyErr_Format(PyExc_ValueError, "unknown parser '%s'", kind);
        return -1;
    }
    recipe_parser_free(self->p);
    self->p = recipe_parser_new((recipe_parser_kind)k,
                                (in_reasoning ? RECIPE_PARSER_IN_REASONING : 0) | (tools ? 0 : RECIPE_PARSER_NO_TOOLS));
    if (!self->p) {
        PyErr_NoMemory();
        return -1;
    }
    if (seed != Py_None) {
        unsigned long long s = PyLong_AsUnsignedLongLongMask(seed);
        if (PyErr_Occurred()) return -1;
        recipe_parser_set_id_seed(self->p, s);
    }
    return 0;
}

static void parser_dealloc(ParserObject *self) {
    recipe_parser_free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *parser_feed(ParserObject *self, PyObject *arg) {
    if (!self->p) return PyErr_Format(PyExc_RuntimeError, "parser not initialized");
    Py_buffer buf;
    const char *s;
    Py_ssize_t n;
    int is_buf = 0;
    if (PyUnicode_Check(arg)) {
        if (!(s = PyUnicode_AsUTF8AndSize(arg, &n))) return NULL;
    } else {
        if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE)) return NULL;
        s = buf.buf, n = buf.len, is_buf = 1;
    }
    const recipe_event *ev;
    size_t cnt;
    recipe_parser_feed(self->p, s, (size_t)n, &ev, &cnt);
    if (is_buf) PyBuffer_Release(&buf);
    return event_list(ev, cnt);
}

static PyObject *parser_finish(ParserObject *self, PyObject *unused) {
    (void)unused;
    if (!self->p) return PyErr_Format(PyExc_RuntimeError, "parser not initialized");
    const recipe_event *ev;
    size_t cnt;
    recipe_parser_finish(self->p, &ev, &cnt);
    return event_list(ev, cnt);
}

static PyObject *parser_tool_calls(ParserObject *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->p ? recipe_parser_tool_calls(self->p) : 0);
}

static PyMethodDef parser_methods[] = {
    {"feed", (PyCFunction)parser_feed, METH_O, "feed(text: str | bytes) -> list of event dicts"},
    {"finish", (PyCFunction)parser_finish, METH_NOARGS, "finish() -> list of event dicts (flushes held-back text)"},
    {NULL, NULL, 0, NULL}};
static PyGetSetDef parser_getset[] = {{"tool_calls", (getter)parser_tool_calls, NULL, "tool calls begun so far", NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ParserType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cinfer_recipe.OutputParser",
    .tp_basicsize = sizeof(ParserObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "OutputParser(kind, in_reasoning=False, tools=True, seed=None): incremental model-output parser",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)parser_init,
    .tp_dealloc = (destructor)parser_dealloc,
    .tp_methods = parser_methods,
    .tp_getset = parser_getset,
};

/* ---------------------------------------------------------------- StreamEncoder */

typedef struct {
    PyObject_HEAD recipe_stream_encoder *e;
    recipe_api api;
    recipe_buf out;
} EncoderObject;

static int encoder_init(EncoderObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"api",           "id",        "model", "created", "prompt_tokens", "cache_read",
                          "include_usage", "n_choices", NULL};
    const char *api, *id = NULL, *model = "";
    long long created = 0, prompt = 0, cache_read = 0;
    int include_usage = 0, n_choices = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zsLLLpi", kwl, &api, &id, &model, &created, &prompt, &cache_read,
                                     &include_usage, &n_choices))
        return -1;
    bool completion = !strcmp(api, "completions"); /* OpenAI Completions chunks (text_completion) */
    int a = completion ? RECIPE_API_CHAT : api_arg(api);
    if (a < 0) return -1;
    recipe_stream_info info = {.id = id,
                               .model = model,
                               .created = created,
                               .prompt_tokens = prompt,
                               .cache_read = cache_read,
                               .include_usage = include_usage,
                               .n_choices = n_choices,
                               .completion = completion};
    recipe_stream_encoder_free(self->e);
    self->api = (recipe_api)a;
    self->e = recipe_stream_encoder_new((recipe_api)a, &info);
    if (!self->e) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void encoder_dealloc(EncoderObject *self) {
    recipe_stream_encoder_free(self->e);
    recipe_buf_free(&self->out);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const char *dstr(PyObject *d, const char *k) {
    PyObject *v = PyDict_GetItemString(d, k);
    return v && PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
}

static long long dint(PyObject *d, const char *k) {
    PyObject *v = PyDict_GetItemString(d, k);
    return v && PyLong_Check(v) ? PyLong_AsLongLong(v) : 0;
}

/* {"token": str | bytes, "logprob": float} -> lp (token bytes borrowed from the dict's objects). 0 or -1. */
static int logprob_of(PyObject *o, recipe_logprob *lp) {
    PyObject *t = PyDict_Check(o) ? PyDict_GetItemString(o, "token") : NULL;
    PyObject *l = PyDict_Check(o) ? PyDict_GetItemString(o, "logprob") : NULL;
    Py_ssize_t n = 0;
    char *b = NULL;
    if (t && PyBytes_Check(t)) {
        if (PyBytes_AsStringAndSize(t, &b, &n)) return -1;
    } else if (t && PyUnicode_Check(t)) {
        if (!(b = (char *)PyUnicode_AsUTF8AndSize(t, &n))) return -1;
    } else {
        PyErr_Format(PyExc_ValueError, "a logprob needs 'token' (str or bytes)");
        return -1;
    }
    lp->token = b;
    lp->len = (size_t)n;
    lp->logprob = l ? PyFloat_AsDouble(l) : 0;
    return PyErr_Occurred() ? -1 : 0;
}

/* ev["logprobs"]: [{"token", "logprob", "top": [{"token", "logprob"}, ...]}, ...] -> *out (malloc'd). */
static int logprobs_of(PyObject *d, recipe_event *ev, recipe_logprob **out) {
    PyObject *l = PyDict_GetItemString(d, "logprobs");
    *out = NULL;
    if (!l || l == Py_None) return 0;
    if (!PyList_Check(l)) return PyErr_Format(PyExc_ValueError, "'logprobs' must be a list"), -1;
    Py_ssize_t n = PyList_Size(l), total = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *top = PyDict_Check(PyList_GetItem(l, i)) ? PyDict_GetItemString(PyList_GetItem(l, i), "top") : NULL;
        if (top && PyList_Check(top)) total += PyList_Size(top);
    }
    recipe_logprob *lp = calloc((size_t)(total ? total : 1), sizeof *lp);
    if (!lp) return PyErr_NoMemory(), -1;
    Py_ssize_t at = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GetItem(l, i);
        if (logprob_of(o, &lp[i])) return free(lp), -1;
        PyObject *top = PyDict_GetItemString(o, "top");
        if (!top || !PyList_Check(top)) continue;
        lp[i].top = &lp[at];
        lp[i].n_top = (size_t)PyList_Size(top);
        for (Py_ssize_t k = 0; k < PyList_Size(top); k++)
            if (logprob_of(PyList_GetItem(top, k), &lp[at++])) return free(lp), -1;
    }
    ev->logprobs = lp;
    ev->n_logprobs = (size_t)n;
    *out = lp;
    return 0;
}

static PyObject *encoder_event(EncoderObject *self, PyObject *d) {
    if (!self->e) return PyErr_Format(PyExc_RuntimeError, "encoder not initialized");
    if (!PyDict_Check(d)) return PyErr_Format(PyExc_TypeError, "event must be a dict");
    static const char *tn[] = {"reasoning", "text", "tool_begin", "tool_args", "tool_end", "finish", "error", "ping"};
    static const char *fn[] = {"none",           "eos",   "stop_string", "length", "tool_calls",
                               "content_filter", "error", "cancelled"};
    recipe_event ev = {0};
    const char *t = dstr(d, "type");
    int found = 0;
    for (int i = 0; t && i < 8; i++)
        if (!strcmp(t, tn[i])) ev.type = (recipe_event_type)i, found = 1;
    if (!found) return PyErr_Format(PyExc_ValueError, "unknown event type");
    Py_ssize_t n = 0;
    PyObject *tv = PyDict_GetItemString(d, "text");
    if (tv && PyUnicode_Check(tv)) {
        ev.text = PyUnicode_AsUTF8AndSize(tv, &n);
        if (!ev.text) return NULL;
        ev.len = (size_t)n;
    }
    ev.index = (int)dint(d, "index");
    ev.id = dstr(d, "id");
    ev.name = dstr(d, "name");
    const char *f = dstr(d, "finish");
    for (int i = 0; f && i < 8; i++)
        if (!strcmp(f, fn[i])) ev.finish = (recipe_finish)i;
    ev.choice = (int)dint(d, "choice");
    ev.stop_sequence = dstr(d, "stop_sequence");
    PyObject *u = PyDict_GetItemString(d, "usage");
    if (u && PyDict_Check(u)) {
        ev.has_usage = true;
        ev.usage.prompt = dint(u, "prompt");
        ev.usage.cache_read = dint(u, "cache_read");
        ev.usage.cache_write = dint(u, "cache_write");
        ev.usage.output = dint(u, "output");
        ev.usage.reasoning = dint(u, "reasoning");
    }
    recipe_logprob *lp;
    if (logprobs_of(d, &ev, &lp)) return NULL;
    recipe_error err;
    self->out.len = 0;
    int rc = recipe_stream_encoder_event(self->e, &ev, &self->out, &err);
    free(lp);
    if (rc) return raise_recipe(self->api, &err);
    return PyUnicode_FromStringAndSize(self->out.data ? self->out.data : "", (Py_ssize_t)self->out.len);
}

static PyObject *encoder_done(EncoderObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->e && recipe_stream_encoder_done(self->e));
}

static PyMethodDef encoder_methods[] = {
    {"event", (PyCFunction)encoder_event, METH_O, "event(dict) -> SSE text for that event"}, {NULL, NULL, 0, NULL}};
static PyGetSetDef encoder_getset[] = {{"done", (getter)encoder_done, NULL, "stream finished", NULL},
                                       {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cinfer_recipe.StreamEncoder",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StreamEncoder(api, id=None, model='', created=0, prompt_tokens=0, cache_read=0, include_usage=False, "
              "n_choices=1): api chat / messages / responses / completions; event dicts may carry 'choice' and "
              "'logprobs' ([{token, logprob, top: [...]}]) for chat / completions",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)encoder_init,
    .tp_dealloc = (destructor)encoder_dealloc,
    .tp_methods = encoder_methods,
    .tp_getset = encoder_getset,
};

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"convert_request", (PyCFunction)(void (*)(void))py_convert_request, METH_VARARGS | METH_KEYWORDS,
     "convert_request(body, from_api, to_api) -> body in to_api's format (str in -> str out, dict in -> dict out)"},
    {"convert_response", (PyCFunction)(void (*)(void))py_convert_response, METH_VARARGS | METH_KEYWORDS,
     "convert_response(body, from_api, to_api, request=None, request_api=None)"},
    {"parse_request", (PyCFunction)(void (*)(void))py_parse_request, METH_VARARGS | METH_KEYWORDS,
     "parse_request(body, api) -> the canonical request as a dict (api 'completions': an OpenAI Completions body)"},
    {"error_body", (PyCFunction)(void (*)(void))py_error_body, METH_VARARGS | METH_KEYWORDS,
     "error_body(api, kind, message, param=None, request_id=None) -> (status, body)"},
    {"detect_parser", (PyCFunction)(void (*)(void))py_detect_parser, METH_VARARGS | METH_KEYWORDS,
     "detect_parser(template=None, arch=None) -> parser name"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,
                                    "cinfer_recipe",
                                    "cinfer recipe: API format conversion and model-output parsing",
                                    -1,
                                    methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

PyMODINIT_FUNC PyInit_cinfer_recipe(void) {
    if (PyType_Ready(&ParserType) < 0 || PyType_Ready(&EncoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    g_json_mod = PyImport_ImportModule("json");
    g_error_type = PyErr_NewExceptionWithDoc("cinfer_recipe.RecipeError",
                                             "conversion error; .status, .param, .body (the API's error body)",
                                             PyExc_ValueError, NULL);
    if (!g_json_mod || !g_error_type) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(g_error_type);
    PyModule_AddObject(m, "RecipeError", g_error_type);
    Py_INCREF(&ParserType);
    PyModule_AddObject(m, "OutputParser", (PyObject *)&ParserType);
    Py_INCREF(&EncoderType);
    PyModule_AddObject(m, "StreamEncoder", (PyObject *)&EncoderType);
    PyObject *names = PyList_New(0);
    for (int k = 0; k < RECIPE_PARSER_COUNT; k++) {
        PyObject *s = PyUnicode_FromString(recipe_parser_name((recipe_parser_kind)k));
        PyList_Append(names, s);
        Py_XDECREF(s);
    }
    PyModule_AddObject(m, "PARSERS", names);
    return m;
}
