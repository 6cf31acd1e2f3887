"""api/openapi.yaml, checked as a document and against every answer.

harness.Client.request() hands each answer to check(); an answer that the
document does not describe (a route, a method, a status, a content type or a
JSON shape it does not list) fails the test that got it. The document is
loaded and its validators compiled once per process. AGENTD_OPENAPI_CHECK=0
turns the check off (for debugging only; meson never sets it);
AGENTD_OPENAPI_STATS=1 prints how many answers were checked at exit.

Needs PyYAML and jsonschema >= 4.0 (Draft 2020-12), Debian's python3-yaml and
python3-jsonschema; without them check() fails, never passes silently.
"""

import atexit
import json
import os
import re
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
DOC_PATH = os.path.join(HERE, '..', '..', 'api', 'openapi.yaml')
METHODS = ('get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace')
# What any request may get before it reaches a route (API.md, "Transport and
# limits"), and the only answers of a path or method that no entry lists.
HEAD_ERRORS = {400, 401, 403, 413, 415, 417, 431, 500, 503}
UNROUTED = HEAD_ERRORS | {404, 405}

_state = None
checked = 0     # answers checked by this process


def _stats():
    sys.stderr.write('openapi_check: %d answers checked against api/openapi.yaml\n'
                     % checked)


if os.environ.get('AGENTD_OPENAPI_STATS') == '1':
    atexit.register(_stats)


def enabled():
    return os.environ.get('AGENTD_OPENAPI_CHECK', '1') != '0'


def _ref(doc, ref):
    if not ref.startswith('#/'):
        raise AssertionError('openapi: only local $ref: %r' % ref)
    node = doc
    for part in ref[2:].split('/'):
        part = part.replace('~1', '/').replace('~0', '~')
        if not isinstance(node, dict) or part not in node:
            raise AssertionError('openapi: $ref %r does not resolve' % ref)
        node = node[part]
    return node


def _deref(doc, node):
    while isinstance(node, dict) and '$ref' in node and len(node) == 1:
        node = _ref(doc, node['$ref'])
    return node


def _walk_refs(doc, node, where):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == '$ref' and isinstance(v, str):
                _ref(doc, v)
            else:
                _walk_refs(doc, v, where + '/' + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk_refs(doc, v, '%s/%d' % (where, i))


def meta_check(doc):
    """The OpenAPI 3.1 structure that this project relies on; raises."""
    from jsonschema import Draft202012Validator
    problems = []

    def need(cond, what):
        if not cond:
            problems.append(what)

    need(isinstance(doc, dict), 'the document is not a mapping')
    need(str(doc.get('openapi', '')).startswith('3.1.'), 'openapi is not 3.1.x')
    need(doc.get('jsonSchemaDialect') ==
         'https://json-schema.org/draft/2020-12/schema', 'jsonSchemaDialect')
    info = doc.get('info') or {}
    need(isinstance(info.get('title'), str) and isinstance(info.get('version'), str),
         'info.title and info.version')
    schemes = (doc.get('components') or {}).get('securitySchemes') or {}
    for req in doc.get('security') or []:
        for name in req:
            need(name in schemes, 'security names unknown scheme %r' % name)
    _walk_refs(doc, doc, '#')
    for name, schema in ((doc.get('components') or {}).get('schemas') or {}).items():
        try:
            Draft202012Validator.check_schema(schema)
        except Exception as e:    # SchemaError: say which one
            problems.append('components/schemas/%s: %s' % (name, e))
    op_ids = set()
    for path, item in (doc.get('paths') or {}).items():
        need(path.startswith('/'), 'path %r does not start with /' % path)
        names = set(re.findall(r'\{([^}]+)\}', path))
        declared = set()
        for p in item.get('parameters') or []:
            p = _deref(doc, p)
            if p.get('in') == 'path':
                declared.add(p['name'])
                need(p.get('required') is True, '%s: path parameter not required' % path)
        need(names == declared, '%s: path parameters %s, declared %s'
             % (path, sorted(names), sorted(declared)))
        for method, op in item.items():
            if method in ('parameters', 'summary', 'description'):
                continue
            need(method in METHODS, '%s: %r is not a method' % (path, method))
            where = '%s %s' % (method.upper(), path)
            oid = op.get('operationId')
            need(isinstance(oid, str) and oid not in op_ids, where + ': operationId')
            op_ids.add(oid)
            for p in op.get('parameters') or []:
                p = _deref(doc, p)
                need(p.get('in') in ('query', 'header', 'path', 'cookie'),
                     where + ': parameter %r location' % p.get('name'))
                need('schema' in p or 'content' in p, where + ': parameter schema')
            responses = op.get('responses') or {}
            need(responses, where + ': no responses')
            for status, r in responses.items():
                need(re.fullmatch(r'[1-5][0-9][0-9]|[1-5]XX|default', str(status)),
                     where + ': status %r' % status)
                r = _deref(doc, r)
                need(isinstance(r.get('description'), str), where + ' %s: description' % status)
                need(set(r) <= {'description', 'headers', 'content', 'links'},
                     where + ' %s: unknown keys %s' % (status, sorted(set(r) - {
                         'description', 'headers', 'content', 'links'})))
                for ctype, media in (r.get('content') or {}).items():
                    need('schema' in media, where + ' %s %s: schema' % (status, ctype))
                    try:
                        Draft202012Validator.check_schema(media.get('schema', {}))
                    except Exception as e:
                        problems.append('%s %s %s: %s' % (where, status, ctype, e))
    if problems:
        raise AssertionError('api/openapi.yaml: ' + '; '.join(problems))


class _State:
    def __init__(self):
        import yaml
        from jsonschema import Draft202012Validator
        with open(DOC_PATH, encoding='utf-8') as f:
            self.doc = yaml.safe_load(f)
        meta_check(self.doc)
        self.V = Draft202012Validator
        self.routes = []
        for path, item in self.doc['paths'].items():
            rx = '^' + re.sub(r'\\\{[^}]+\\\}', '([^/]+)', re.escape(path)) + '$'
            self.routes.append((re.compile(rx), path, item))
        self.validators = {}

    def validator(self, schema):
        key = json.dumps(schema, sort_keys=True)
        v = self.validators.get(key)
        if v is None:
            # Local $refs resolve against the root: give it the components.
            root = dict(schema)
            root['components'] = self.doc['components']
            v = self.validators[key] = self.V(root)
        return v

    def route(self, path):
        for candidate in (path, path.rstrip('/') or '/'):
            for rx, template, item in self.routes:
                if rx.match(candidate):
                    return template, item
        return None, None


def state():
    global _state
    if _state is None:
        _state = _State()
    return _state


def _media(ctype):
    return (ctype or '').split(';')[0].strip().lower()


def check(method, target, status, headers, body):
    """Raises AssertionError when api/openapi.yaml does not describe the answer."""
    global checked
    st = state()
    checked += 1
    method = method.upper()
    path = urllib.parse.urlsplit(target).path
    what = '%s %s -> %d' % (method, target[:200], status)
    template, item = st.route(path)
    op = item.get(method.lower()) if item is not None else None
    if op is None:
        allowed = UNROUTED if item is None else (HEAD_ERRORS | {405})
        if status not in allowed:
            raise AssertionError('openapi: %s: %s' % (
                what, 'no such route in api/openapi.yaml' if item is None
                else 'method not in api/openapi.yaml for ' + template))
        if method != 'HEAD':
            _check_body(st, what, {'$ref': '#/components/schemas/Error'},
                        headers, body, 'application/json')
        return
    responses = op['responses']
    resp = responses.get(str(status)) or responses.get('%dXX' % (status // 100)) \
        or responses.get('default')
    if resp is None:
        raise AssertionError('openapi: %s: status %d not documented for %s %s (has %s)'
                             % (what, status, method, template, sorted(responses)))
    resp = _deref(st.doc, resp)
    content = resp.get('content') or {}
    if method == 'HEAD' or not body:
        if body and not content:
            raise AssertionError('openapi: %s: a body where none is documented' % what)
        if not body and content and method != 'HEAD' and status != 200:
            raise AssertionError('openapi: %s: empty body, documented %s'
                                 % (what, sorted(content)))
        return
    ctype = _media(headers.get('Content-Type'))
    media = content.get(ctype)
    if media is None:
        for k, v in content.items():
            if k == '*/*' or (k.endswith('/*') and ctype.startswith(k[:-1])):
                media = v
                break
    if media is None:
        raise AssertionError('openapi: %s: Content-Type %r not documented (has %s)'
                             % (what, ctype, sorted(content)))
    _check_body(st, what, media['schema'], headers, body, ctype)


def _check_body(st, what, schema, headers, body, ctype):
    if _media(headers.get('Content-Type')) != ctype:
        raise AssertionError('openapi: %s: Content-Type %r, documented %s'
                             % (what, headers.get('Content-Type'), ctype))
    if ctype != 'application/json':
        return
    try:
        value = json.loads(body.decode('utf-8'))
    except ValueError as e:
        raise AssertionError('openapi: %s: not JSON (%s): %r' % (what, e, body[:300]))
    errors = sorted(st.validator(schema).iter_errors(value),
                    key=lambda e: list(e.absolute_path))
    if errors:
        msgs = ['%s: %s' % ('/'.join(str(p) for p in e.absolute_path) or '(top)',
                            e.message[:300]) for e in errors[:5]]
        raise AssertionError('openapi: %s: the answer does not match api/openapi.yaml: %s'
                             '\nbody: %r' % (what, '; '.join(msgs), body[:600]))
