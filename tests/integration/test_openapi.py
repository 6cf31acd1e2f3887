"""api/openapi.yaml: the document itself, and the checker that holds every
answer of the Python suites to it (openapi_check.py, hooked into harness)."""

import copy
import unittest

import openapi_check
from harness import AgentdTestCase

JSON = {'Content-Type': 'application/json'}


def body(s):
    return s.encode('utf-8')


class TestDocument(unittest.TestCase):

    def test_document_is_valid_openapi_3_1(self):
        openapi_check.meta_check(openapi_check.state().doc)

    def test_meta_check_finds_a_broken_document(self):
        doc = copy.deepcopy(openapi_check.state().doc)
        doc['paths']['/v1/sessions']['get']['responses']['200']['content'][
            'application/json']['schema'] = {'$ref': '#/components/schemas/Nope'}
        with self.assertRaisesRegex(AssertionError, 'does not resolve'):
            openapi_check.meta_check(doc)
        doc = copy.deepcopy(openapi_check.state().doc)
        doc['components']['schemas']['Uint'] = {'type': 'int'}
        with self.assertRaisesRegex(AssertionError, 'Uint'):
            openapi_check.meta_check(doc)

    def test_every_route_of_api_md_is_documented(self):
        paths = openapi_check.state().doc['paths']
        want = {
            '/healthz': {'get', 'head'}, '/metrics': {'get', 'head'},
            '/v1/sessions': {'get', 'head', 'post'},
            '/v1/sessions/{id}': {'get', 'head', 'delete'},
            '/v1/sessions/{id}/stdin': {'post'}, '/v1/sessions/{id}/resize': {'post'},
            '/v1/sessions/{id}/signal': {'post'},
            '/v1/files': {'get', 'put'}, '/v1/files/stat': {'post'},
            '/v1/files/fetch': {'post'},
            '/debug/stat': {'get'}, '/debug/logs': {'get'},
            # issues 22, 23 and 25
            '/v1/events': {'get'}, '/v1/ports': {'get', 'head'},
            '/v1/sandbox/resumed': {'post'}, '/v1/sandbox/pause': {'post'},
            '/mcp': {'post', 'delete'},
        }
        for path, methods in want.items():
            self.assertIn(path, paths)
            self.assertEqual(methods, set(paths[path]) - {'parameters'}, path)


class TestChecker(unittest.TestCase):
    """check() refuses what the document does not describe."""

    def test_undocumented_route_with_a_2xx(self):
        with self.assertRaisesRegex(AssertionError, 'no such route'):
            openapi_check.check('GET', '/v1/nope', 200, JSON, body('{}'))
        openapi_check.check('GET', '/v1/nope', 404, JSON,
                            body('{"error": {"code": "not_found", "message": "x"}}'))

    def test_undocumented_status(self):
        with self.assertRaisesRegex(AssertionError, 'status 418 not documented'):
            openapi_check.check('GET', '/v1/sessions', 418, JSON,
                                body('{"error": {"code": "teapot", "message": "x"}}'))

    def test_undocumented_field_and_wrong_type(self):
        with self.assertRaisesRegex(AssertionError, 'surprise'):
            openapi_check.check('GET', '/healthz', 200, JSON, body(
                '{"status": "ok", "version": "1", "sessions": 0, "uptime_ms": 1,'
                ' "pid": 7, "containment": "process_group", "generation": 0,'
                ' "surprise": 1}'))
        with self.assertRaisesRegex(AssertionError, 'does not match'):
            openapi_check.check('GET', '/healthz', 200, JSON, body(
                '{"status": "ok", "version": "1", "sessions": "0", "uptime_ms": 1,'
                ' "pid": 7}'))

    def test_error_shape(self):
        with self.assertRaisesRegex(AssertionError, 'does not match'):
            openapi_check.check('GET', '/v1/sessions/x', 404, JSON,
                                body('{"error": "not_found"}'))

    def test_content_type(self):
        with self.assertRaisesRegex(AssertionError, 'Content-Type'):
            openapi_check.check('GET', '/metrics', 200, JSON, body('{}'))


class TestAnswers(AgentdTestCase):
    """A few answers of each kind go through the hook (as every test's do)."""

    def test_session_answers_match(self):
        w = self.create(cmd='echo hi; echo err >&2', yield_ms=5000)
        self.get(w['id'], cursor=0)
        self.list_sessions()
        self.expect(self.req('GET', '/metrics'), 200)
        self.expect(self.req('HEAD', '/v1/sessions'), 200)
        self.assertError(self.get_raw(w['id'], cursor=99), 400, 'invalid_cursor')
        self.assertError(self.req('GET', '/v1/nope'), 404, 'not_found')
        self.assertError(self.req('PUT', '/v1/sessions'), 405, 'method_not_allowed')
        self.expect(self.delete(w['id']), 200)


if __name__ == '__main__':
    unittest.main()
