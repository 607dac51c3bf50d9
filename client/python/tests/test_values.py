"""What the client takes as users type it, with no ltd: --env items and durations."""

import datetime
import os
import socket
import tempfile
import unittest

import grpc

import ltd
from ltd._durations import to_ms
from ltd.client import _env_list


class EnvTest(unittest.TestCase):
    def test_one_key_value_per_item(self):
        # A text is one --env, never its characters one by one.
        self.assertEqual(_env_list("A=1", "env"), [b"A=1"])
        self.assertEqual(_env_list(b"A=x=y", "env"), [b"A=x=y"])
        self.assertEqual(_env_list(["A=1", "B="], "env"), [b"A=1", b"B="])
        self.assertEqual(_env_list({"A": "1"}, "env"), [b"A=1"])

    def test_this_process_environment_as_its_bytes(self):
        # os.environ is taken as os.environb holds it: a value that is not
        # UTF-8 comes as its bytes, and a change made through either shows.
        os.environb[b"LTD_TEST_RAW"] = b"\xff\xfe=x"
        os.environ["LTD_TEST_TEXT"] = "caf\u00e9"
        try:
            got = _env_list(os.environ, "environ")
            self.assertIn(b"LTD_TEST_RAW=\xff\xfe=x", got)
            self.assertIn("LTD_TEST_TEXT=caf\u00e9".encode(), got)
            self.assertEqual(got, [os.fsencode(k) + b"=" + os.fsencode(v)
                                   for k, v in os.environ.items()])
        finally:
            del os.environb[b"LTD_TEST_RAW"]
            del os.environ["LTD_TEST_TEXT"]

    def test_bad_items_are_one_line(self):
        for bad in ("NOEQUALS", "=value", ["A=1", "B"], {"": "x"}, {"A=B": "x"}):
            with self.assertRaises(ltd.InvalidArgument) as e:
                _env_list(bad, "env")
            self.assertNotIn("\n", str(e.exception))
            self.assertIn("env", str(e.exception))


class DurationTest(unittest.TestCase):
    def test_spellings(self):
        cases = {
            "500ms": 500, "10s": 10_000, "90s": 90_000, "5m": 300_000, "2h": 7_200_000,
            "1h30m": 5_400_000, "2m30s": 150_000, "1d2h": 26 * 3_600_000, "1.5": 1500,
            "30": 30_000, "05:30": 330_000, "90:00": 5_400_000, "01:30:00": 5_400_000,
            "2-12": (2 * 24 + 12) * 3_600_000, "1-02:30": (26 * 60 + 30) * 60_000,
            "1-02:30:15": ((26 * 60 + 30) * 60 + 15) * 1000,
        }
        for text, ms in cases.items():
            self.assertEqual(to_ms(text, "grace"), ms, text)
        self.assertEqual(to_ms(90, "grace"), 90_000)
        self.assertEqual(to_ms(datetime.timedelta(minutes=2), "grace"), 120_000)

    def test_time_limit_plain_numbers_are_minutes(self):
        self.assertEqual(to_ms("90", "time_limit", bare_ms=60_000), 90 * 60_000)
        self.assertEqual(to_ms("90s", "time_limit", bare_ms=60_000), 90_000)
        self.assertEqual(to_ms(90, "time_limit", bare_ms=60_000), 90_000)  # a number: seconds

    def test_the_rest_is_refused(self):
        for bad in ("", "s", "-1", "-5s", "10x", "ten", "10 s", "30m1h", "1h1h", "1h30", "1:60",
                    "1-24", "1:2:3:4", ":30", "1-", "9999h", "400-00", "1.2.3s"):
            with self.assertRaises(ValueError, msg=bad) as e:
                to_ms(bad, "grace")
            self.assertIn("is not a duration", str(e.exception))


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, mark=False):
        self._code, self._details = code, details
        self._metadata = (("grpc-status-details-bin", b"ltd.v1"),) if mark else ()

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._metadata


class RpcErrorTest(unittest.TestCase):
    """What gRPC says itself never reaches the user; ltd's own (marked) lines do."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "ltd.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(16)

    def tearDown(self):
        self.listener.close()
        self.dir.cleanup()

    def test_grpcs_words_are_replaced(self):
        client = ltd.Client(self.path)
        library = [(grpc.StatusCode.UNAVAILABLE, "Socket closed"),
                   (grpc.StatusCode.CANCELLED, "Cancelling all calls"),
                   (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
                   (grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2"),
                   (grpc.StatusCode.UNIMPLEMENTED, "Method not found!"),
                   (grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max")]
        for code, details in library:
            e = client._error(FakeRpcError(code, details))
            self.assertIsInstance(e, ltd.Error)
            self.assertNotIn(details, str(e))
            self.assertNotIn("\n", str(e))
        self.assertEqual(str(client._error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "Socket closed"))),
                         "ltd is stopping or restarting; try again in a moment")
        own = client._error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "ltd is shutting down", mark=True))
        self.assertEqual(str(own), "ltd is shutting down")
        self.assertEqual(str(client._error(FakeRpcError(grpc.StatusCode.NOT_FOUND, "no job 'x'"))),
                         "no job 'x'")

    def test_gone_ltd_says_how_to_start_it(self):
        self.listener.close()
        os.unlink(self.path)
        e = ltd.Client(self.path)._error(FakeRpcError(grpc.StatusCode.CANCELLED, "Cancelling all calls"))
        self.assertIsInstance(e, ltd.Unreachable)
        self.assertIn("cannot reach ltd at " + self.path, str(e))
        self.assertNotIn("Cancelling", str(e))


if __name__ == "__main__":
    unittest.main()
